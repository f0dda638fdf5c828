"""`ServerProcess`: `python -m pagedkv serve` in a child process on a free loopback port.

The tests, notebook 07 and the benchmarks use it to talk to a real server over real HTTP.
It is its own module so that the server and `serve --help` do not import what only a
launcher needs; `from pagedkv.service.serve import ServerProcess` still works.
"""

from __future__ import annotations

import ctypes
import http.client
import os
import signal
import subprocess
import sys
import tempfile
import time

from pagedkv.core.plumbing.validation import check_int
from pagedkv.service.limits import TOKEN_ENV
from pagedkv.service.wal import DIE_AFTER_ENV


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
    overlap its start-up with other work — once `wait()` returns. With `die_after_record`
    N, the server SIGKILLs itself right after writing log record N (a crash drill, wal.py)."""

    def __init__(
        self,
        *args: str,
        token: str | None = None,
        via_cli: bool = False,
        wait: bool = True,
        timeout: float = 30.0,
        poll: float = 0.02,
        die_after_record: int | None = None,
    ) -> None:
        entry = ["pagedkv", "serve"] if via_cli else ["pagedkv.service.serve"]
        cmd = [sys.executable, "-m", *entry, "--port", "0", *args]
        env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
        if token is not None:
            env[TOKEN_ENV] = token  # not on the command line, where ps would show it
        env.pop(DIE_AFTER_ENV, None)
        if die_after_record is not None:
            env[DIE_AFTER_ENV] = str(check_int("die_after_record", die_after_record, 1))
        self.args = args  # to start it again on the same store (`crash_during`)
        self.stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            cmd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        assert self.process.stdout is not None  # stdout=PIPE
        self.stdout = self.process.stdout
        self.token, self.timeout, self.poll = token, timeout, poll  # poll: seconds between probes
        self.url: str | None = None
        self.health_url: str | None = None  # with --health-port: its /health
        if wait:
            self.wait()

    def wait(self) -> ServerProcess:
        """Block until the server answers /health (at once if it already has)."""
        if self.url is not None:
            return self
        line = self.stdout.readline()
        if line.startswith("pagedkv health on "):
            self.health_url = line.split()[-1]
            line = self.stdout.readline()
        if not line.startswith("pagedkv serving on "):
            self.process.kill()
            raise RuntimeError(f"server did not start: {line!r} {self.log_tail()}")
        self.port = int(line.split()[-1].rsplit(":", 1)[1])
        deadline = time.monotonic() + self.timeout
        while not self._healthy():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.process.kill()
                raise RuntimeError(f"server did not answer /health: {self.log_tail()}")
            time.sleep(self.poll)
        self.url = line.split()[-1]
        return self

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def _healthy(self) -> bool:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
        try:
            connection.request("GET", "/health", headers=self.headers)
            return connection.getresponse().status in (200, 401)  # 401: up, token elsewhere
        except OSError:
            return False
        finally:
            connection.close()

    def log_tail(self) -> str:
        """The last 2,000 characters the server wrote to stderr (its log)."""
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-2000:]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        """Send `sig` (SIGTERM: graceful; SIGKILL: a crash) and wait; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout)
        finally:
            self.stdout.close()
            self.stderr.close()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.stop()
