"""The listening socket: a hard cap on open connections and a deadline for each request's
headers, below any HTTP protocol class.

`Listener` is the socket the server listens on (handed to uvicorn with `sockets=`). Every
connection it accepts is a `Connection`, counted by its `Gate` from `accept()` until its
`close()`, so the count is the number of sockets the process holds for clients:

- **a cap**, `max_connections`: when the cap is reached and another client is waiting in
  the listen backlog, the oldest connection with no request in flight (stalled before its
  headers, or idle between requests) is shut down, and the newcomer is accepted once it is
  gone. When every connection has a request in flight, nothing more is accepted: newcomers
  wait in the kernel's listen backlog (uvicorn's `backlog`) until one closes, as nginx does
  when out of `worker_connections`. The process never holds more than the cap.
- **a header deadline**: a connection with no request in flight is shut down
  `header_timeout` seconds after it opened (408 first, as no response was sent on it), or
  `keep_alive + header_timeout` after its last response (uvicorn's `timeout_keep_alive`
  usually closes it first). A client sending its headers a byte a minute (slowloris), or
  nothing at all, thus holds its socket for seconds. The body has its own deadline in the
  ASGI guard (guard.py), which answers 408.

"In flight" is told by `Tracker`, an ASGI middleware that marks a connection busy from the
moment its request reaches the app (its headers are complete) until the app returns; it
finds the connection by the peer address in the ASGI scope (`proxy_headers` must be off).

NOTE: why this is hand-written, checked against uvicorn 0.54: uvicorn has no header
timeout (`--timeout-request-start`, proposed in its issue #157, was never added; it arms
`timeout_keep_alive` only after a first response, and every byte received cancels it),
and `limit_concurrency` answers 503 only after accepting, so a connection that sends
nothing is held forever and every accepted socket is a descriptor. Working at the socket
(the one object uvicorn takes from us, `sockets=`) keeps this independent of the protocol
class (h11 or httptools) and of uvicorn's internals. To stop accepting, `accept()` reports
EMFILE: asyncio's accept loop then pauses the listener for a second (its own answer to
running out of descriptors), instead of polling a socket that stays readable. This relies
on asyncio's loop calling the socket's own `accept()` (uvloop does not: serve.py names
`loop="asyncio"`).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import select
import socket
import time

from pagedkv.service.limits import ServiceLimits
from pagedkv.service.logs import RateLimitedLog

_log = RateLimitedLog("pagedkv.service")
_SLOW = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\ncontent-length: 67\r\n"
    b'connection: close\r\n\r\n{"error":"timeout","detail":"request headers not received in time"}'
)
AT_CAP = "connection cap reached"  # the strerror of the EMFILE that pauses accepting
LEAVING_GRACE = 1.0  # seconds a shut-down connection may take to close before we pause


class Connection(socket.socket):
    """An accepted socket, counted by its gate until closed."""

    gate: Gate | None = None
    peer: tuple = ()
    opened = idle_since = leaving_since = 0.0
    busy = 0  # requests of it in the app (0 or 1 under HTTP/1.1)
    served = False  # whether a request of it reached the app

    def close(self) -> None:
        gate, self.gate = self.gate, None
        super().close()
        if gate is not None:
            gate.closed(self)

    def cut(self, slow: bool) -> None:
        """Shut it down (both ways): its transport reads the end and closes it."""
        if slow and not self.served:
            try:
                self.send(_SLOW)
            except OSError:
                pass
        try:
            self.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.leaving_since = time.monotonic()


class Gate:
    """The connections of one listener: count, cap, busy marks and header deadlines."""

    def __init__(self, limits: ServiceLimits) -> None:
        self.limits = limits
        self.open: dict[tuple, Connection] = {}  # peer address -> connection, oldest first
        self.sweeping = False

    def __len__(self) -> int:
        return len(self.open)

    def room(self, listener: socket.socket) -> None:
        """Return when one more connection may be accepted; else raise as accept() would:
        BlockingIOError (try again next tick: a connection is closing) or EMFILE (pause)."""
        if len(self.open) < self.limits.max_connections:
            return
        poller = select.poll()
        poller.register(listener, select.POLLIN)
        if not poller.poll(0):  # nobody waiting: asyncio's accept loop is done
            raise BlockingIOError(errno.EAGAIN, "no connection waiting")
        now = time.monotonic()
        leaving = [c for c in self.open.values() if c.leaving_since]
        if leaving and now - min(c.leaving_since for c in leaving) < LEAVING_GRACE:
            raise BlockingIOError(errno.EAGAIN, "a connection is closing")
        idle = [c for c in self.open.values() if not c.busy and not c.leaving_since]
        if idle:
            _log.warning("evict", "%d connections open: closed the oldest one without a request", len(self))
            idle[0].cut(slow=False)
            raise BlockingIOError(errno.EAGAIN, "a connection is closing")
        _log.warning("connections", "%d connections open, all busy: not accepting for now", len(self))
        raise OSError(errno.EMFILE, f"{AT_CAP} ({self.limits.max_connections})")

    def opened(self, conn: Connection, peer: tuple) -> None:
        conn.gate, conn.peer = self, peer[:2]
        conn.opened = conn.idle_since = time.monotonic()
        self.open[conn.peer] = conn

    def closed(self, conn: Connection) -> None:
        if self.open.get(conn.peer) is conn:
            del self.open[conn.peer]

    def started(self, peer: tuple | None) -> None:
        conn = self.open.get(tuple(peer)) if peer else None
        if conn is not None:
            conn.busy += 1
            conn.served = True

    def finished(self, peer: tuple | None) -> None:
        conn = self.open.get(tuple(peer)) if peer else None
        if conn is not None:
            conn.busy -= 1
            conn.idle_since = time.monotonic()

    def sweep(self) -> None:
        """Shut down every connection past its header deadline (module docstring)."""
        now, limits = time.monotonic(), self.limits
        for conn in list(self.open.values()):
            if conn.busy or conn.leaving_since:
                continue
            if conn.served:
                late = now - conn.idle_since > limits.keep_alive + limits.header_timeout
            else:
                late = now - conn.opened > limits.header_timeout
            if late:
                _log.warning(
                    "slow headers",
                    "closed a connection whose headers took over %.1f s",
                    limits.header_timeout,
                )
                conn.cut(slow=True)


class Listener(socket.socket):
    """A TCP listening socket whose accept() keeps its gate's cap (module docstring)."""

    def __init__(self, family: socket.AddressFamily, limits: ServiceLimits) -> None:
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted sockets only when the
        # protocol says TCP, and without it every keep-alive response waits ~40 ms (Nagle).
        super().__init__(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.gate = Gate(limits)

    def accept(self) -> tuple[socket.socket, tuple]:  # type: ignore[override]
        self.gate.room(self)
        fd, peer = self._accept()  # type: ignore[attr-defined]
        conn = Connection(self.family, self.type, self.proto, fileno=fd)
        self.gate.opened(conn, peer)
        return conn, peer


class Tracker:
    """ASGI middleware: marks a request's connection busy while the app serves it, and
    sweeps the gate's header deadlines (a timer on the event loop, started by the first
    request or lifespan event)."""

    def __init__(self, app, gate: Gate) -> None:
        self.app, self.gate = app, gate

    async def __call__(self, scope, receive, send) -> None:
        if not self.gate.sweeping:
            self._sweep_every(min(0.25, self.gate.limits.header_timeout / 4))
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        self.gate.started(scope.get("client"))
        try:
            await self.app(scope, receive, send)
        finally:
            self.gate.finished(scope.get("client"))

    def _sweep_every(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        self.gate.sweeping = True

        def tick() -> None:
            self.gate.sweep()
            loop.call_later(seconds, tick)

        loop.call_later(seconds, tick)


class QuietAtCap(logging.Filter):
    """Drops asyncio's "socket.accept() out of system resource" lines for the EMFILE that
    `Gate.room` raises on purpose (the gate logs its own, rate-limited)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return AT_CAP not in record.getMessage() and AT_CAP not in str(record.exc_info and record.exc_info[1])
