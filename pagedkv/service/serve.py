"""`python -m pagedkv serve`: its arguments, its entry point, and a child-process launcher.

Importing this module imports neither FastAPI nor uvicorn (they come with `run`), so the
rest of the command line works without the `serve` extra. `ServerProcess` (launcher.py,
importable from here) starts the command in a child process on a free loopback port and
waits until it answers: the tests, notebook 07 and `bench api` use it to talk to a real
server over real HTTP.

The bearer token comes from `--token-file PATH` or the `PAGEDKV_TOKEN` environment
variable (both stay out of the process list; `--token` works but is visible in `ps`); an
empty token is refused. Exit codes: 0 after a clean shutdown (SIGTERM or SIGINT: the
request holding the engine gets up to `--shutdown-timeout` seconds, the ones waiting for
it are answered 503 `shutting_down`, then the log is synced and closed), 2 bad arguments
or token, 3 a store file is missing, 4 a store file is damaged, 5 the store is open in
another process. Errors are one line naming the file and the problem.

`--health-port PORT` adds a listener answering `/health` from a thread of its own
(health.py), for liveness probes that must not queue behind a busy event loop; its
address is printed (`pagedkv health on ...`) before the API's.

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
    from collections.abc import Callable

    import uvicorn

    from pagedkv.service.health import HealthServer
    from pagedkv.service.launcher import ServerProcess as ServerProcess


class UsageError(Exception):
    """A bad argument found once the server starts (one line naming it, exit code 2)."""


HELP = "serve the cache over HTTP (FastAPI + uvicorn; needs the serve extra)"
EXIT_USAGE, EXIT_MISSING, EXIT_DAMAGED, EXIT_LOCKED = 2, 3, 4, 5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="interface to bind (default: %(default)s, loopback only)",
    )
    parser.add_argument("--port", type=int, default=8000, help="TCP port; 0 picks a free one")
    health = "also answer GET /health on this port from a thread of its own (liveness probes; 0: any)"
    parser.add_argument("--health-port", type=int, metavar="PORT", help=health)
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
    except UsageError as exc:
        print(f"pagedkv serve: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
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
    from pagedkv.service.gate import Listener, QuietAtCap, Tracker
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
    logging.getLogger("asyncio").addFilter(QuietAtCap())
    logs.install()
    # Bound before the store is opened (a taken port fails fast); it reads `engine` once started.
    health = _health_server(args, lambda: engine.locked.published, token)
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
    sock = Listener(socket.AF_INET6 if ":" in args.host else socket.AF_INET, limits)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    host, port = sock.getsockname()[:2]
    if health is not None:
        health.start()
    print(f"pagedkv serving on http://{host}:{port}", flush=True)
    # On SIGTERM uvicorn sets should_exit; the app then refuses what has not started (server.py).
    app = create_app(engine, token, stopping=lambda: server.should_exit)
    server = uvicorn.Server(_config(Tracker(app, sock.gate), limits, args.log_level))
    # uvicorn turns SIGTERM / SIGINT into a graceful shutdown, then raises the signal again
    # with the handler it found: with this one, a clean shutdown exits 0, not -15.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    try:
        server.run(sockets=[sock])
    finally:
        if health is not None:
            health.stop()
    return 0


def _health_server(
    args: argparse.Namespace, published: Callable[[], dict], token: str | None
) -> HealthServer | None:
    """The --health-port listener, bound and not yet started (health.py); None without it."""
    if args.health_port is None:
        return None
    from pagedkv.service.health import HealthServer

    if not 0 <= args.health_port <= 65535:
        raise UsageError(f"--health-port must be a TCP port, 0 to 65535; got {args.health_port}")
    secret = token.encode() if token else None
    try:
        health = HealthServer((args.host, args.health_port), published, secret)
    except OSError as exc:
        raise UsageError(f"--health-port {args.health_port}: {exc.strerror or exc}") from None
    host, port = health.server_address[:2]
    print(f"pagedkv health on http://{host}:{port}/health", flush=True)
    return health


def _config(app: object, limits: ServiceLimits, log_level: str) -> uvicorn.Config:
    """uvicorn's public options for the limits it can keep itself (the rest: gate.py, guard.py)."""
    import uvicorn

    from pagedkv.service.guard import MAX_HEADER_BUFFER

    return uvicorn.Config(
        app,  # type: ignore[arg-type]
        # h11 and the asyncio loop, named: the gate (gate.py) needs a loop that calls the
        # listener's accept(), which uvloop would not; the guards need no protocol class.
        http="h11",
        loop="asyncio",
        proxy_headers=False,  # scope["client"] is the peer the gate accepted, never a header
        log_level=log_level,
        # uvicorn annotates both as int, but hands them to loop.call_later and
        # asyncio.wait_for, which take any float number of seconds.
        timeout_keep_alive=limits.keep_alive,  # type: ignore[arg-type]
        timeout_graceful_shutdown=limits.shutdown_timeout,  # type: ignore[arg-type]
        backlog=min(2048, limits.max_connections * 2),  # newcomers wait here at the cap
        h11_max_incomplete_event_size=MAX_HEADER_BUFFER,  # headers over 16 KiB: 431 (guard.py)
    )


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
