"""Quotas per client: pages held, live sequences and requests in flight (clients.py: the file).

With a tokens file, every request names its client by its bearer token, and each client has
its own bounds. A request that would take a client past one gets **429** with `Retry-After`
and a body naming the quota, its limit and the client's use:

    {"error": "quota_exceeded", "client": "alice", "quota": "pages", "limit": 8,
     "used": 8, "requested": 2, "detail": "..."}

and changes nothing; other clients are unaffected (the server-wide bounds answer 503).

- in flight: `ClientGate`, an ASGI middleware in front of the guard, looks the token up
  (a dict keyed by its SHA-256, so the lookup time tells nothing about the tokens), answers
  401 for an unknown one, counts the client's requests in flight (`/health`, `/metrics`
  not counted) and hands the client's name to the engine in `CURRENT_CLIENT`;
- sequences and pages: `Quotas`, called by the engine under its lock before anything
  changes. A client's pages are the distinct pages in the block tables of its live
  sequences; a request is counted at the most it could take (a create: every page its
  prompt fills; an append or generate: every page it may allocate; a fork of its own
  sequence: none). A client reaches only its own sequences (another's is 404).

Ownership is durable: the commit record of the request that made a sequence names its
owner (`owners`, durable.py), checkpoints carry the table, and a free drops the entry, so
a recovered server knows whose each sequence is. Idempotency keys are per client too.

Metrics carry a `client` label whose values are the tokens file's names only — never
anything a request sent — so each family has at most `MAX_CLIENTS` series (x 3 quotas).

Leaves out: rate limits over time, and quotas without a tokens file (one shared token
means one client).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from pagedkv.core.sequence import SequenceManager, UnknownSequenceError
from pagedkv.core.slot_mapping import num_blocks
from pagedkv.service.clients import QUOTAS, Client

if TYPE_CHECKING:
    from fastapi import FastAPI

# The name of the client whose request this thread or task is serving (None: no tokens file).
CURRENT_CLIENT: ContextVar[str | None] = ContextVar("pagedkv_client", default=None)
_UNCOUNTED = frozenset({"/health", "/metrics"})  # cheap and lock-free, as in the guard


class QuotaExceededError(Exception):
    """A client's request would take it past one of its quotas (HTTP 429)."""

    def __init__(self, client: str, quota: str, limit: int, used: int, requested: int) -> None:
        super().__init__(
            f"client {client!r} is at its {quota} quota: {used} of {limit} in use, this request "
            f"needs {requested} more; free some and retry"
        )
        self.client, self.quota, self.limit, self.used, self.requested = client, quota, limit, used, requested

    def body(self) -> dict:
        return {
            "error": "quota_exceeded",
            "client": self.client,
            "quota": self.quota,
            "limit": self.limit,
            "used": self.used,
            "requested": self.requested,
            "detail": str(self),
        }


class Quotas:
    """Who owns which sequence, and each client's use: checked by the engine under its lock.

    Without clients every method is a no-op (and `owners` stays empty)."""

    def __init__(self, clients: list[Client] | None, owners: dict[Hashable, str]) -> None:
        self.clients = {c.name: c for c in clients or ()}
        self.by_token = {hashlib.sha256(c.token.encode()).digest(): c for c in clients or ()}
        self.owners = owners  # seq id -> client name (a durable manager's own dict, if any)
        self.claimed: dict[Hashable, str] = {}  # owners the current request adds (its commit logs them)
        self.inflight = dict.fromkeys(self.clients, 0)  # changed on the event loop only
        self.usage = {name: (0, 0) for name in self.clients}  # (pages, sequences) after the last request
        self.refusals = {(name, q): 0 for name in self.clients for q in QUOTAS}

    @property
    def active(self) -> bool:
        return bool(self.clients)

    def client(self) -> str | None:
        """The client of the request being served, or None (no tokens file, or no request)."""
        return CURRENT_CLIENT.get() if self.clients else None

    def identify(self, authorization: bytes) -> Client | None:
        scheme, _, credentials = authorization.partition(b" ")
        if scheme.lower() != b"bearer":
            return None
        return self.by_token.get(hashlib.sha256(credentials.strip()).digest())

    def scoped_key(self, key: str | None) -> str | None:
        """An Idempotency-Key in the client's own namespace (another client's key never matches)."""
        client = self.client()
        return f"{client}/{key}" if key is not None and client is not None else key

    # ---- checks (engine lock held) ------------------------------------------------------

    def check_owner(self, seq_id: Hashable) -> None:
        """404 for a sequence another client owns (its existence is not revealed)."""
        client, owner = self.client(), self.owners.get(seq_id)
        if client is not None and owner is not None and owner != client:
            raise UnknownSequenceError(f"unknown seq_id {seq_id!r}")

    def check_new_sequence(self, m: SequenceManager, pages: int) -> None:
        """Before a create (`pages`: blocks its prompt fills) or a fork (the parent's pages
        this client does not hold yet)."""
        client = self.client()
        if client is None:
            return
        owned = self._owned(client)
        self._check(client, "sequences", len(owned), 1)
        self._check(client, "pages", len(_pages_of(m, owned)), pages)

    def check_pages(self, m: SequenceManager, pages: int) -> None:
        """Before an append or generate that may allocate `pages` pages."""
        client = self.client()
        if client is not None and pages:
            self._check(client, "pages", len(_pages_of(m, self._owned(client))), pages)

    def fork_pages(self, m: SequenceManager, parent: Hashable) -> int:
        """Pages a fork of `parent` adds to this client's (none for its own sequence)."""
        client = self.client()
        if client is None or self.owners.get(parent) == client:
            return 0
        return len(set(m.get(parent).block_table) - _pages_of(m, self._owned(client)))

    def create_pages(self, m: SequenceManager, num_tokens: int) -> int:
        return num_blocks(num_tokens, m.page_size)

    def _check(self, client: str, quota: str, used: int, requested: int) -> None:
        limit = self.clients[client].limit(quota)
        if used + requested > limit:
            self.refusals[client, quota] += 1
            raise QuotaExceededError(client, quota, limit, used, requested)

    def _owned(self, client: str) -> list[Hashable]:
        return [s for s, owner in self.owners.items() if owner == client]

    # ---- changes (engine lock held) -----------------------------------------------------

    def claim(self, seq_id: Hashable) -> None:
        """The current request's client owns `seq_id` (a create or fork that succeeded)."""
        client = self.client()
        if client is not None:
            self.owners[seq_id] = self.claimed[seq_id] = client

    def take_claims(self) -> dict[Hashable, str] | None:
        """The owners the request added, for its commit record (None when none)."""
        claimed, self.claimed = self.claimed, {}
        return claimed or None

    def release(self, seq_id: Hashable) -> None:
        self.owners.pop(seq_id, None)

    def publish(self, m: SequenceManager, everyone: bool = False) -> None:
        """Note the current client's use (every client's after recovery) for /metrics: only
        a client's own requests change its block tables."""
        names = list(self.clients) if everyone else [c for c in [self.client()] if c is not None]
        for name in names:
            owned = self._owned(name)
            self.usage[name] = (len(_pages_of(m, owned)), len(owned))

    # ---- metrics ------------------------------------------------------------------------

    def metrics(self) -> Iterator[Metric]:
        """Per-client families, labelled by the tokens file's names only."""
        pages = GaugeMetricFamily("pagedkv_client_pages", "Pages a client holds.", labels=["client"])
        seqs = GaugeMetricFamily(
            "pagedkv_client_sequences", "Live sequences a client owns.", labels=["client"]
        )
        flying = GaugeMetricFamily(
            "pagedkv_client_requests_inflight", "Requests of a client in flight.", labels=["client"]
        )
        limits = GaugeMetricFamily("pagedkv_client_quota", "A client's quota.", labels=["client", "quota"])
        refused = CounterMetricFamily(
            "pagedkv_client_quota_refusals", "Requests answered 429 by quota.", labels=["client", "quota"]
        )
        for name, client in self.clients.items():
            pages.add_metric([name], self.usage[name][0])
            seqs.add_metric([name], self.usage[name][1])
            flying.add_metric([name], self.inflight[name])
            for quota in QUOTAS:
                limits.add_metric([name, quota], client.limit(quota))
                refused.add_metric([name, quota], self.refusals[name, quota])
        yield from (pages, seqs, flying, limits, refused)


def _pages_of(m: SequenceManager, seq_ids: list[Hashable]) -> set[int]:
    pages: set[int] = set()
    for seq_id in seq_ids:
        pages.update(m.get(seq_id).block_table)
    return pages


class ClientGate:
    """ASGI middleware: the client from its bearer token (401 if none), its in-flight quota
    (429), and `CURRENT_CLIENT` for the engine."""

    def __init__(self, app, quotas: Quotas, retry_after: int) -> None:
        self.app, self.quotas, self.retry_after = app, quotas, retry_after

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        given = [v for k, v in scope["headers"] if k == b"authorization"]
        if len(given) > 1:  # the guard behind answers 400 naming the header
            return await self.app(scope, receive, send)
        client = self.quotas.identify(given[0] if given else b"")
        if client is None:
            body = {"error": "unauthorized", "detail": "missing or unknown bearer token"}
            return await _reply(send, 401, body, [(b"www-authenticate", b"Bearer")])
        counted = scope["path"] not in _UNCOUNTED
        inflight = self.quotas.inflight
        if counted and inflight[client.name] >= client.inflight:
            self.quotas.refusals[client.name, "inflight"] += 1
            error = QuotaExceededError(client.name, "inflight", client.inflight, inflight[client.name], 1)
            return await _reply(send, 429, error.body(), [(b"retry-after", str(self.retry_after).encode())])
        reset = CURRENT_CLIENT.set(client.name)
        inflight[client.name] += counted
        try:
            await self.app(scope, receive, send)
        finally:
            inflight[client.name] -= counted
            CURRENT_CLIENT.reset(reset)


async def _reply(send, status: int, content: dict, headers: list) -> None:
    data = json.dumps(content).encode()
    start = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": start + headers})
    await send({"type": "http.response.body", "body": data})


def install(app: FastAPI, quotas: Quotas, retry_after: int) -> None:
    """Put the gate in front of `app` (outermost: before the guard) and answer quota errors 429."""
    from fastapi.responses import JSONResponse

    def quota_exceeded(request, exc: QuotaExceededError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=429, headers={"Retry-After": str(retry_after)})

    app.add_exception_handler(QuotaExceededError, quota_exceeded)  # type: ignore[arg-type]
    app.add_middleware(ClientGate, quotas=quotas, retry_after=retry_after)  # type: ignore[arg-type]
