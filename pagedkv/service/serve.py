"""`python -m pagedkv serve`: its arguments, its entry point, and a child-process launcher.

Importing this module imports neither FastAPI nor uvicorn (they come with `run`), so the
rest of the command line works without the `serve` extra. `ServerProcess` (launcher.py,
importable from here) starts the command in a child process on a free loopback port and
waits until it answers: the tests, notebook 07 and `bench api` use it to talk to a real
server over real HTTP.

The bearer token comes from `--token-file PATH` or the `PAGEDKV_TOKEN` environment
variable (both stay out of the process list; `--token` works but is visible in `ps`); an
empty token is refused. Exit codes: 0 after a clean shutdown (SIGTERM or SIGINT: requests
in flight get `--shutdown-timeout` seconds, then the log is synced and closed), 2 bad
arguments or token, 3 a store file is missing, 4 a store file is damaged, 5 the store is
open in another process. Errors are one line naming the file and the problem.

`vllm serve` is the same kind of entry point. Leaves out: TLS options, worker processes
(one process serves; its engine lock serialises requests), and reload-on-change.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from dataclasses import fields
from typing import TYPE_CHECKING

from pagedkv.service import clients
from pagedkv.service.limits import TOKEN_ENV, ServiceLimits

if TYPE_CHECKING:
    from pagedkv.service.launcher import ServerProcess as ServerProcess

HELP = "serve the cache over HTTP (FastAPI + uvicorn; needs the serve extra)"
EXIT_USAGE, EXIT_MISSING, EXIT_DAMAGED, EXIT_LOCKED = 2, 3, 4, 5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="interface to bind (default: %(default)s, loopback only)",
    )
    parser.add_argument("--port", type=int, default=8000, help="TCP port; 0 picks a free one")
    parser.add_argument(
        "--wal",
        metavar="PATH",
        help="store directory: write-ahead log, checkpoints, K/V file; recovered on start when it exists",
    )
    parser.add_argument("--fsync", default="always", help="WAL fsync policy: always | never | 'batch N'")
    parser.add_argument(
        "--checkpoint-every",
        type=int,
        default=10_000,
        metavar="RECORDS",
        help="compact the WAL into a checkpoint every this many records",
    )
    parser.add_argument(
        "--token",
        help=f"require 'Authorization: Bearer TOKEN' (visible in ps: prefer --token-file or ${TOKEN_ENV})",
    )
    parser.add_argument(
        "--token-file", metavar="PATH", help="read the bearer token from this file (one line)"
    )
    parser.add_argument("--num-pages", type=int, default=256)
    parser.add_argument("--page-size", type=int, default=16)
    parser.add_argument(
        "--model-seed", type=int, default=None, help="random TinyLM weights of this seed (default: trained)"
    )
    parser.add_argument(
        "--vllm-metrics",
        action="store_true",
        help="also export vLLM's metric names (vllm:kv_cache_usage_perc, ...) on /metrics",
    )
    parser.add_argument(
        "--metrics-created",
        action="store_true",
        help="also export prometheus_client's *_created series (start times)",
    )
    limits = parser.add_argument_group("limits (see pagedkv/service/limits.py)")
    for f in fields(ServiceLimits):
        limits.add_argument(
            "--" + f.name.replace("_", "-"),
            type=int if f.type == "int" else float,
            default=f.default,
            metavar="N" if f.type == "int" else "SECONDS",
            help="default: %(default)s",
        )
    clients.add_arguments(parser)  # --tokens-file, --quota-* (clients.py)
    parser.add_argument(
        "--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"]
    )


def read_token(args: argparse.Namespace) -> str | None:
    """The token from --token-file, --token or $PAGEDKV_TOKEN (in that order); None for no
    auth. Raises ValueError for an empty one: it would silently turn auth off."""
    if args.token_file is not None:
        with open(args.token_file) as f:
            token, source = f.read().strip(), f"--token-file {args.token_file}"
    elif args.token is not None:
        token, source = args.token, "--token"
    elif TOKEN_ENV in os.environ:
        token, source = os.environ[TOKEN_ENV].strip(), f"${TOKEN_ENV}"
    else:
        return None
    if not token:
        raise ValueError(f"{source} is empty: give a non-empty token, or none for no auth")
    return token


def run(args: argparse.Namespace) -> int:
    from pagedkv.service.recovery import StoreFileError
    from pagedkv.service.wal import WALCorruptionError

    try:
        token = read_token(args) if args.tokens_file is None else None
        limits = ServiceLimits(**{f.name: getattr(args, f.name) for f in fields(ServiceLimits)})
        args.clients = clients.read_clients(args)  # None without --tokens-file
    except (OSError, ValueError, TypeError) as exc:
        print(f"pagedkv serve: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return _serve(args, token, limits)
    except StoreFileError as exc:
        print(f"pagedkv serve: error: {exc}", file=sys.stderr)
        return EXIT_MISSING if exc.missing else EXIT_DAMAGED
    except WALCorruptionError as exc:
        print(f"pagedkv serve: error: {exc}", file=sys.stderr)
        return EXIT_DAMAGED
    except RuntimeError as exc:  # the store's lock is held by another process
        if "open in another process" not in str(exc):
            raise
        print(f"pagedkv serve: error: {exc}", file=sys.stderr)
        return EXIT_LOCKED


def _serve(args: argparse.Namespace, token: str | None, limits: ServiceLimits) -> int:
    import logging
    import socket

    import uvicorn

    from pagedkv.service import logs
    from pagedkv.service.engine import ServiceEngine
    from pagedkv.service.guard import MAX_HEADER_BUFFER
    from pagedkv.service.protocol import protocol_class
    from pagedkv.service.server import create_app

    if args.host not in ("127.0.0.1", "localhost", "::1") and not token and not args.clients:
        print(
            f"warning: serving on {args.host} without a token: anyone who can reach it can use it",
            file=sys.stderr,
        )
    # Worker threads run the model holding the GIL; the event loop thread answering /health
    # waits for it at every switch. 1 ms switches (default 5 ms) keep probes quick.
    sys.setswitchinterval(0.001)
    logging.basicConfig(format="%(levelname)s: %(name)s: %(message)s")
    logging.getLogger("pagedkv").setLevel(args.log_level.upper())
    logs.install()
    engine = ServiceEngine(
        args.num_pages,
        args.page_size,
        args.wal,
        args.fsync,
        args.model_seed,
        args.checkpoint_every,
        limits=limits,
        vllm_names=args.vllm_metrics,
        metrics_created=args.metrics_created,
        clients=args.clients,
    )
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted sockets only when the
    # protocol says TCP, and without it every keep-alive response waits ~40 ms (Nagle).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    host, port = sock.getsockname()[:2]
    print(f"pagedkv serving on http://{host}:{port}", flush=True)
    config = uvicorn.Config(
        create_app(engine, token),
        http=protocol_class(limits),
        log_level=args.log_level,
        # uvicorn annotates both as int, but hands them to loop.call_later and
        # asyncio.wait_for, which take any float number of seconds.
        timeout_keep_alive=limits.keep_alive,  # type: ignore[arg-type]
        timeout_graceful_shutdown=limits.shutdown_timeout,  # type: ignore[arg-type]
        backlog=min(2048, limits.max_connections * 2),
        h11_max_incomplete_event_size=MAX_HEADER_BUFFER,  # headers over 16 KiB: 431 (guard.py)
    )
    # uvicorn turns SIGTERM / SIGINT into a graceful shutdown, then raises the signal again
    # with the handler it found: with this one, a clean shutdown exits 0, not -15.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    uvicorn.Server(config).run(sockets=[sock])
    return 0


def __getattr__(name: str) -> object:
    # NOTE: ServerProcess lives in launcher.py and comes from here on first use, so that
    # `serve --help` and the server itself never import what only a launcher needs
    # (subprocess, tempfile, http.client, ctypes).
    if name == "ServerProcess":
        from pagedkv.service.launcher import ServerProcess

        return ServerProcess
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog="python -m pagedkv.service.serve", description=HELP)
    add_arguments(_parser)
    sys.exit(run(_parser.parse_args()))
