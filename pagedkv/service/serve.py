"""`python -m pagedkv serve`: its arguments, its entry point, and a child-process launcher.

Importing this module imports neither FastAPI nor uvicorn (they come with `run`), so the
rest of the command line works without the `serve` extra. `ServerProcess` starts the
command in a child process on a free loopback port and waits until it answers: the tests,
notebook 07 and `bench api` use it to talk to a real server over real HTTP.

`vllm serve` is the same kind of entry point. Leaves out: TLS options, worker processes
(one process serves; its engine lock serialises requests), and reload-on-change.
"""

from __future__ import annotations

import argparse
import ctypes
import http.client
import os
import signal
import subprocess
import sys
import tempfile
import time

HELP = "serve the cache over HTTP (FastAPI + uvicorn; needs the serve extra)"


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
        help="store directory: write-ahead log, checkpoints, K/V file; "
        "recovered on start when it exists",
    )
    parser.add_argument(
        "--fsync", default="always", help="WAL fsync policy: always | never | 'batch N'"
    )
    parser.add_argument(
        "--checkpoint-every",
        type=int,
        default=10_000,
        metavar="RECORDS",
        help="compact the WAL into a checkpoint every this many records",
    )
    parser.add_argument(
        "--token",
        default=os.environ.get("PAGEDKV_TOKEN"),
        help="require 'Authorization: Bearer TOKEN' (default: $PAGEDKV_TOKEN)",
    )
    parser.add_argument("--num-pages", type=int, default=256)
    parser.add_argument("--page-size", type=int, default=16)
    parser.add_argument(
        "--model-seed", type=int, default=None, help="random TinyLM weights of this seed (default: trained)"
    )
    parser.add_argument(
        "--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"]
    )


def run(args: argparse.Namespace) -> int:
    import socket

    import uvicorn

    from .engine import ServiceEngine
    from .server import create_app

    if args.host not in ("127.0.0.1", "localhost", "::1") and not args.token:
        print(
            f"warning: serving on {args.host} without --token: anyone who can reach it can use it",
            file=sys.stderr,
        )
    engine = ServiceEngine(
        args.num_pages, args.page_size, args.wal, args.fsync, args.model_seed, args.checkpoint_every
    )
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted sockets only when the
    # protocol says TCP, and without it every keep-alive response waits ~40 ms (Nagle).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    host, port = sock.getsockname()[:2]
    print(f"pagedkv serving on http://{host}:{port}", flush=True)
    config = uvicorn.Config(create_app(engine, args.token), log_level=args.log_level)
    uvicorn.Server(config).run(sockets=[sock])
    return 0


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the parent dies (Linux prctl PDEATHSIG), so a
    test run or notebook kernel that crashes never leaves a server behind."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class ServerProcess:
    """The serve command in a child process on a free loopback port.

    Runs `python -m pagedkv.service.serve` (this module: the same arguments and `run`,
    without importing every benchmark the full command line lists); with `via_cli`,
    `python -m pagedkv serve` itself. Ready when constructed, or — with `wait=False`, to
    overlap its start-up with other work — once `wait()` returns."""

    def __init__(
        self,
        *args: str,
        token: str | None = None,
        via_cli: bool = False,
        wait: bool = True,
        timeout: float = 30.0,
    ) -> None:
        entry = ["pagedkv", "serve"] if via_cli else [__name__]
        cmd = [sys.executable, "-m", *entry, "--port", "0", *args]
        if token is not None:
            cmd += ["--token", token]
        self.stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        self.token, self.timeout = token, timeout
        self.url: str | None = None
        if wait:
            self.wait()

    def wait(self) -> ServerProcess:
        """Block until the server answers /health (at once if it already has)."""
        if self.url is not None:
            return self
        line = self.process.stdout.readline()
        if not line.startswith("pagedkv serving on "):
            self.process.kill()
            raise RuntimeError(f"server did not start: {line!r} {self._errors()}")
        self.port = int(line.split()[-1].rsplit(":", 1)[1])
        deadline = time.monotonic() + self.timeout
        while not self._healthy():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.process.kill()
                raise RuntimeError(f"server did not answer /health: {self._errors()}")
            time.sleep(0.02)
        self.url = line.split()[-1]
        return self

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def _healthy(self) -> bool:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
        try:
            connection.request("GET", "/health", headers=self.headers)
            return connection.getresponse().status == 200
        except OSError:
            return False
        finally:
            connection.close()

    def _errors(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-2000:]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        """Send `sig` (SIGTERM: graceful; SIGKILL: a crash) and wait; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout)
        finally:
            self.process.stdout.close()
            self.stderr.close()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.stop()


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog="python -m pagedkv.service.serve", description=HELP)
    add_arguments(_parser)
    sys.exit(run(_parser.parse_args()))
