"""A liveness listener that never waits for the event loop: `/health` on its own port,
served by one thread of its own over plain sockets (`selectors`).

`serve --health-port PORT` starts it beside the API. It answers `GET` and `HEAD /health`
with the API's own body (`{"status": "ok", ...}`: the counts the engine published after
its last request, read without its lock) and, with a token, asks for the same bearer
token; anything else is 404. Each connection is answered once and closed (HTTP/1.0, as a
probe needs); at most `MAX_PROBES` are open at once (a newcomer closes the oldest, so
stalled connections cannot lock probes out), each must send its request (at most 8 KiB)
within `PROBE_TIMEOUT` seconds.

NOTE: why a second listener, measured with `bench api`: with 64 clients past the in-flight
cap, the event loop spends its time answering their 503s, and a probe queued behind them
waited hundreds of ms (p99), far over the 50 ms a 1 s probe timeout needs for margin. A
thread of its own waits only for the GIL (1 ms switches, serve.py), never for the loop's
queue. uvicorn serves one app on one loop and Starlette has no priority lanes, hence a
listener of our own. It is a selector loop on plain sockets rather than `http.server`:
a thread per probe and the email parser took the GIL many more times per probe, and each
wait for it is a switch interval (bench api: p99 94 ms with `ThreadingHTTPServer`).
Kubernetes' liveness probes and vLLM's `/health` ask the same of a server: answer even
when it is too busy for anything else.
"""

from __future__ import annotations

import hmac
import json
import selectors
import socket
import threading
import time
from collections.abc import Callable

MAX_PROBES = 8  # connections open at once; a newcomer closes the oldest
PROBE_TIMEOUT = 1.0  # seconds a probe connection may take to send its request
MAX_REQUEST = 8192  # bytes of request line and headers


def _response(status: str, content: dict, head: bool, extra: str = "") -> bytes:
    body = json.dumps(content).encode()
    head_lines = (
        f"HTTP/1.0 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        f"connection: close\r\n{extra}\r\n"
    )
    return head_lines.encode() + (b"" if head else body)


class HealthServer:
    """`GET /health` on `address` from a thread of its own (module docstring)."""

    def __init__(self, address: tuple[str, int], published: Callable[[], dict], token: bytes | None) -> None:
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.sock = socket.create_server(address, family=family, backlog=64)
        self.sock.setblocking(False)
        self.server_address = self.sock.getsockname()
        self.published, self.token = published, token
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.sock, selectors.EVENT_READ)
        self.open: dict[socket.socket, tuple[bytearray, float]] = {}  # request so far, deadline
        self.stopping = False
        self.thread = threading.Thread(target=self._serve, name="pagedkv health", daemon=True)

    def start(self) -> HealthServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping = True
        self.thread.join(2)
        for conn in list(self.open):
            self._close(conn)
        self.selector.close()
        self.sock.close()

    def answer(self, request: bytes) -> bytes:
        """The whole response to one request (its line and headers)."""
        lines = request.decode("latin-1").split("\r\n")
        method, _, rest = lines[0].partition(" ")
        path = rest.partition(" ")[0].partition("?")[0]
        head = method == "HEAD"
        if self.token is not None:
            given = [
                v.strip() for k, _, v in (h.partition(":") for h in lines[1:]) if k.lower() == "authorization"
            ]
            scheme, _, credentials = (given[0] if len(given) == 1 else "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                credentials.strip().encode(), self.token
            ):
                content = {"error": "unauthorized", "detail": "missing or wrong bearer token"}
                return _response("401 Unauthorized", content, head, "www-authenticate: Bearer\r\n")
        if method not in ("GET", "HEAD") or path != "/health":
            content = {"error": "not_found", "detail": "this port answers GET /health only"}
            return _response("404 Not Found", content, head)
        return _response("200 OK", {"status": "ok", **self.published()}, head)

    def _serve(self) -> None:
        while not self.stopping:
            self.serve_once(0.25)

    def serve_once(self, timeout: float) -> None:
        """One wake-up: accept and read what is ready, then close connections past their time."""
        for key, _ in self.selector.select(timeout=timeout):
            if key.fileobj is self.sock:
                self._accept()
            elif key.fileobj in self.open:  # not closed by an accept earlier in this wake-up
                self._read(key.fileobj)  # type: ignore[arg-type]
        now = time.monotonic()
        for conn, (_, deadline) in list(self.open.items()):
            if now > deadline:
                self._close(conn)

    def _accept(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:  # gone before we got to it, or out of descriptors
            return
        if len(self.open) >= MAX_PROBES:  # the oldest has had longest to send its request
            self._close(next(iter(self.open)))
        conn.setblocking(False)
        self.open[conn] = (bytearray(), time.monotonic() + PROBE_TIMEOUT)
        self.selector.register(conn, selectors.EVENT_READ)
        self._read(conn)  # a probe's request mostly arrives with it: one wake-up less

    def _read(self, conn: socket.socket) -> None:
        try:
            data = conn.recv(MAX_REQUEST)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        buffer = self.open[conn][0]
        buffer += data
        end = buffer.find(b"\r\n\r\n")
        if end >= 0:
            try:
                conn.send(self.answer(bytes(buffer[:end])))  # a few hundred bytes: one send
            except OSError:
                pass
        if end >= 0 or not data or len(buffer) > MAX_REQUEST:
            self._close(conn)

    def _close(self, conn: socket.socket) -> None:
        self.open.pop(conn, None)
        try:
            self.selector.unregister(conn)
        except (KeyError, ValueError):
            pass
        conn.close()
