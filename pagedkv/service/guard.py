"""The ASGI guard in front of the routes: headers, bearer token, requests in flight, the
time a body may take.

Runs before routing, so a refused request costs no validation, no thread and no lock:

- headers: more than `MAX_HEADER_BYTES` is 431; two `Authorization` or two
  `Idempotency-Key` headers are 400 naming the header (a proxy may have checked one copy
  and the server would read the other);
- auth: with a token, the credentials FastAPI's `HTTPBearer` reads from `Authorization:
  Bearer <token>`, compared in constant time (`hmac.compare_digest`); missing or wrong is 401;
- back-pressure: at most `max_inflight` requests past the guard at once; beyond that, 503
  with `Retry-After` at once (never a queue that grows until clients time out). `/health`
  and `/metrics` are never refused: they are cheap and never wait for the engine. After
  SIGTERM every other request is 503 `shutting_down`;
- bodies: read whole before the app sees them within `body_timeout` seconds (408, then the
  connection closes). Their size is FastAPI's `max_body_size` (server.py), which wraps this
  guard: over `MAX_BODY_BYTES` is 413 before or while the body arrives.

NOTE: what is stock and what is not (checked against uvicorn 0.54, Starlette 1.10, FastAPI
0.165). Stock: body size (FastAPI's `max_body_size`), the bearer scheme's parsing and its
OpenAPI declaration (`HTTPBearer`), keep-alive, the header buffer, the listen backlog and
the shutdown timeout (uvicorn options, serve.py). Hand-written here: the in-flight bound,
as uvicorn's `limit_concurrency` counts connections as well as tasks, answers 503 without
`Retry-After` and refuses `/health` too; the body deadline, which neither uvicorn nor
Starlette has; enforcing the token here rather than as a route dependency, which would
leave `/docs`, `/openapi.json` and a 404 open and read the first of two `Authorization`
headers; the 431, as h11's `max_incomplete_event_size` bounds only headers still arriving
(a whole 100 KB header block in one read passes). uvicorn's `limit_max_requests` is not a
protection (it ends the process after N requests). Connections: gate.py.

Refusals are logged through `RateLimitedLog`. nginx's `limit_conn` / `client_body_timeout`
do the same jobs. Leaves out: per-client limits.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections.abc import Callable

from fastapi.security import HTTPBearer
from starlette.requests import HTTPConnection

from pagedkv.service.limits import ServiceLimits
from pagedkv.service.logs import RateLimitedLog

MAX_BODY_BYTES = 256 << 10  # FastAPI's max_body_size (server.py)
BEARER = HTTPBearer(auto_error=False, description="the server's --token-file or $PAGEDKV_TOKEN")
# Request line excluded, the headers' names and values plus ": " and CRLF each: beyond it
# 431. (The protocol buffers at most MAX_HEADER_BUFFER bytes of a request still arriving,
# serve.py's h11_max_incomplete_event_size; beyond that uvicorn itself answers 400.)
MAX_HEADER_BYTES = 16 << 10
MAX_HEADER_BUFFER = 256 << 10
# Headers whose meaning changes with which copy is read (a proxy may check one copy and
# the server read another): two of one is 400, never "the first wins".
SINGLE_HEADERS = (b"authorization", b"idempotency-key")
_UNLIMITED = frozenset({"/health", "/metrics"})  # cheap, lock-free: never refused as busy


class Guard:
    """ASGI middleware before routing: bearer token, requests in flight, body size and time."""

    def __init__(
        self,
        app,
        token: bytes | None,
        limits: ServiceLimits,
        refusing: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.app, self.token, self.limits, self.refusing = app, token, limits, refusing
        self.inflight = 0  # requests past this guard and not yet answered (event loop only)
        self.log = RateLimitedLog("pagedkv.service")

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        refusal = self._refusal(scope) or await self._unauthorized(scope)
        if refusal is not None:
            return await _reply(send, *refusal)
        limited = scope["path"] not in _UNLIMITED
        retry = [(b"retry-after", str(self.limits.retry_after).encode())]
        if limited and self.refusing() is not None:  # shutting down: nothing new starts
            return await _reply(send, 503, {"error": "shutting_down", "detail": self.refusing()}, retry)
        if limited and self.inflight >= self.limits.max_inflight:
            self.log.warning("busy", "%d requests in flight: answering 503", self.inflight)
            return await _reply(
                send,
                503,
                {"error": "busy", "detail": f"{self.inflight} requests in flight; try again"},
                retry,
            )
        self.inflight += limited
        try:
            await self._serve(scope, receive, send)
        finally:
            self.inflight -= limited

    def _refusal(self, scope) -> tuple | None:
        """(status, body, headers) when the headers or the credentials are refused, else None."""
        headers = scope["headers"]
        size = sum(len(k) + len(v) + 4 for k, v in headers)
        if size > MAX_HEADER_BYTES:
            detail = f"request headers hold {size} bytes; this server takes at most {MAX_HEADER_BYTES}"
            return 431, {"error": "headers_too_large", "detail": detail}
        for name in SINGLE_HEADERS:
            if sum(k == name for k, _ in headers) > 1:  # which one would a proxy have checked?
                title = name.decode().title()
                return 400, {"error": "bad_request", "detail": f"more than one {title} header"}
        return None

    async def _unauthorized(self, scope) -> tuple | None:
        """(401, body, headers) when a token is required and not given, else None."""
        if self.token is None:
            return None
        given = await BEARER(HTTPConnection(scope))  # None: missing, or not the Bearer scheme
        if given is None or not hmac.compare_digest(given.credentials.encode("latin-1"), self.token):
            return (
                401,
                {"error": "unauthorized", "detail": "missing or wrong bearer token"},
                [(b"www-authenticate", b"Bearer")],
            )
        return None

    async def _serve(self, scope, receive, send) -> None:
        body, more = b"", True
        deadline = time.monotonic() + self.limits.body_timeout
        while more:  # read the whole body first (max_body_size bounds it: 413 from FastAPI)
            try:
                message = await asyncio.wait_for(receive(), deadline - time.monotonic())
            except TimeoutError:
                self.log.warning(
                    "slow body", "a request body took over %.1f s: answering 408", self.limits.body_timeout
                )
                return await _reply(
                    send,
                    408,
                    {"error": "timeout", "detail": f"body not received in {self.limits.body_timeout} s"},
                    [(b"connection", b"close")],
                )
            if message["type"] == "http.disconnect":
                return None
            body += message.get("body", b"")
            more = message.get("more_body", False)
        sent = False

        async def replay():
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        return await self.app(scope, replay, send)


async def _reply(send, status: int, content: dict, headers: list | None = None) -> None:
    """A whole JSON response straight from the middleware."""
    data = json.dumps(content).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})
