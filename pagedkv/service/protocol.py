"""The HTTP/1.1 connection handler: uvicorn's h11 protocol with a header deadline and a
connection cap that slow clients cannot fill.

uvicorn bounds idle keep-alive time, but every byte received cancels that timer, and
nothing bounds the time to receive a request: a client that sends its headers one byte a
minute (slowloris), or opens a connection and sends nothing, holds a connection and a file
descriptor forever, and enough of them lock every client out. `GuardedH11Protocol` adds:

- a header deadline: from the moment a connection opens (or finishes its previous
  response and its next request's first byte arrives), the request line and headers must
  be complete within `header_timeout` seconds, or the connection is closed (after a 408
  if nothing of a response was sent). The body has its own deadline in the ASGI guard
  (server.py), which can still answer 408.
- a connection cap, `max_connections`: a connection opened beyond it first evicts the
  oldest connection that has not completed its request's headers (stalled or idle — a
  working client's headers arrive at once, so it is never the victim); only when every
  connection is busy with a request is the newcomer answered 503 with `Retry-After` and
  closed. Stalled sockets can thus never lock out clients, and the process never holds
  more descriptors than the cap (keep it below `ulimit -n`).

NOTE: uvicorn has no public option for this: its h11 protocol arms no timer until a first
response is complete (`timeout_keep_alive` then bounds idle time), and `limit_concurrency`
answers 503 only once a request arrives, so a connection that sends nothing is held
forever. Hence this subclass of uvicorn's `H11Protocol` (an internal class: pin uvicorn,
and with `http="httptools"` none of this applies).

Every cut-off is logged through `RateLimitedLog`, so a flood makes a few lines, not a
traceback loop. nginx does the same with `client_header_timeout`, `client_body_timeout`,
`worker_connections` and reusing idle keep-alive connections when out of them. Leaves out:
a minimum transfer rate (a deadline is simpler and just as bounded) and per-address caps.
"""

from __future__ import annotations

import asyncio
import itertools

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from pagedkv.service.limits import ServiceLimits
from pagedkv.service.logs import RateLimitedLog

_order = itertools.count()  # connection opening order (oldest = smallest)
_log = RateLimitedLog("pagedkv.service")


def _raw(status: str, body: bytes, extra: str = "") -> bytes:
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n{extra}\r\n"
    ).encode() + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header deadline and a connection cap (module doc)."""

    limits = ServiceLimits()  # protocol_class() makes a subclass with the server's own

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.opened = next(_order)
        self.header_timer: asyncio.TimerHandle | None = None
        if len(self.connections) > self.limits.max_connections and not self._evict_one():
            _log.warning("connections", "%d connections open: answering 503", len(self.connections))
            transport.write(
                _raw(
                    "503 Service Unavailable",
                    b'{"error":"busy","detail":"too many connections; try again"}',
                    f"retry-after: {self.limits.retry_after}\r\n",
                )
            )
            transport.close()
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            if self.header_timer is None:  # the first bytes of a request: the clock starts
                self._arm()
        elif self.header_timer is not None:  # headers complete
            self.header_timer.cancel()
            self.header_timer = None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
            self.header_timer = None
        super().connection_lost(exc)

    def waiting_for_headers(self) -> bool:
        """Open, and no request of it is being served (stalled or idle)."""
        return self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)

    def _arm(self) -> None:
        self.header_timer = self.loop.call_later(self.limits.header_timeout, self._too_slow)

    def _too_slow(self) -> None:
        self.header_timer = None
        if self.transport.is_closing() or not self.waiting_for_headers():
            return
        _log.warning(
            "slow headers",
            "closed a connection whose headers took over %.1f s",
            self.limits.header_timeout,
        )
        if self.cycle is None:  # nothing of a response was sent on it yet
            self.transport.write(_SLOW)
        self.transport.close()

    def _evict_one(self) -> bool:
        """Close the oldest connection still waiting for its headers; False if none."""
        idle = [
            c
            for c in self.connections  # every protocol of the server, a WebSocket's too
            if isinstance(c, GuardedH11Protocol)
            and c is not self
            and c.waiting_for_headers()
            and not c.transport.is_closing()
        ]
        if not idle:
            return False
        victim = min(idle, key=lambda c: c.opened)
        _log.warning(
            "evict",
            "%d connections open: closed the oldest one without a request",
            len(self.connections),
        )
        victim.transport.close()
        victim.connections.discard(victim)  # counted out now, not when the loop gets to it
        return True


_SLOW = _raw(
    "408 Request Timeout",
    b'{"error":"timeout","detail":"request headers not received in time"}',
)


def protocol_class(limits: ServiceLimits) -> type[GuardedH11Protocol]:
    """A GuardedH11Protocol bound to `limits` (uvicorn's `http=` option takes a class)."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"limits": limits})
