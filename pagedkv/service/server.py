"""The HTTP API: FastAPI routes over a ServiceEngine, served by uvicorn.

    GET    /health (and HEAD)                liveness, clock and page counts
    POST   /sequences                        create from text or token_ids: seq_id, prefix-hit
                                             tokens (num_cached_tokens), block_table
    GET    /sequences/{seq_id}               one sequence
    POST   /sequences/{seq_id}/generate      decode max_new_tokens tokens with TinyLM
    POST   /sequences/{seq_id}/append        append text or token_ids
    POST   /sequences/{seq_id}/fork          new sequence sharing every page
    DELETE /sequences/{seq_id}               free
    GET    /snapshot?offset=N                the pool's snapshot as JSON (block tables paged)
    GET    /invariants                       check_invariants(): 200, or 500 naming the broken rule
    GET    /metrics                          Prometheus text format (metrics.py)
    POST   /checkpoint                       compact the write-ahead log (409 without --wal)
    GET    /docs, /openapi.json              OpenAPI

Input is validated by pydantic in strict mode with explicit limits (below); a bad request is
answered 422 naming the field (`"loc": ["body", "max_new_tokens"]`) and never reaches the
engine, so it changes nothing; so are prompts, appends and `max_new_tokens` over the
server's ServiceLimits (`--max-prompt-tokens`, `--max-append-tokens`, `--max-new-tokens`).
Other answers: 404 unknown sequence, 409 id already live, 413 body over 256 KiB (FastAPI's
`max_body_size`: its body is `{"detail": "Content Too Large"}`), 408 body
slower than `body_timeout`, 431 headers over 16 KiB, 401 missing or wrong token, 400 for two
`Authorization` or two `Idempotency-Key` headers, and 503 with `Retry-After` for "try again
later": too few FREE or CACHED pages now (body: `error`, `detail`, page counts), too many
live sequences, too many requests in flight, shutting down (SIGTERM), or a store that needs
a restart; 429 with `Retry-After` for a client past one of its own quotas (`--tokens-file`,
quota.py). A sequence that would need more pages than the pool has in all can never be
served, so it is no 503: it is 422 `exceeds_pool` naming the field, its page count and the
pool's, without `Retry-After` (vLLM answers a prompt over the model's maximum length 400).

Mutating requests take an `Idempotency-Key` header (idempotency.py): a retry with the same
key gets the first answer, with `Idempotent-Replayed: true`, and changes nothing; a key
used for another request is 422 with `"loc": ["header", "Idempotency-Key"]`. Every 422 names
its field in `loc`, as pydantic's do (a lone surrogate in `text` included).

Engine endpoints are plain functions, so uvicorn runs them on its thread pool and the
engine's lock serialises them. `/health` and `/metrics` are coroutines on the event loop
reading what the engine published after its last request: they never wait for the lock or
for a worker thread.

With a token, every request — docs and metrics included — needs `Authorization: Bearer
<token>`; that, the bound on requests in flight and the body limits are in an ASGI
middleware before routing (guard.py); connections and header deadlines are kept at the
listening socket (gate.py).

vLLM's OpenAI-compatible server plays this role for vLLM. Leaves out: TLS (put a proxy in
front), per-client rate limits, streaming responses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import FastAPI, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from pagedkv import __version__
from pagedkv.core.pool import OutOfPagesError
from pagedkv.core.sequence import UnknownSequenceError
from pagedkv.service.bodies import (
    MAX_APPEND_TOKENS,
    MAX_NEW_TOKENS,
    MAX_PROMPT_TOKENS,
    AppendTokens,
    CreateSequence,
    Fork,
    Generate,
    IdempotencyKey,
    PathSeqId,
    too_large,
)
from pagedkv.service.durable import StoreNeedsRecoveryError
from pagedkv.service.engine import MAX_CONTEXT_TOKENS, SequenceExistsError, ServiceEngine
from pagedkv.service.guard import BEARER, MAX_BODY_BYTES, Guard
from pagedkv.service.limits import ExceedsPoolError, FieldError, ServiceBusyError, ShuttingDownError
from pagedkv.service.quota import install as install_quotas


def create_app(
    engine: ServiceEngine, token: str | None = None, stopping: Callable[[], bool] | None = None
) -> FastAPI:
    """The FastAPI application serving `engine` (closed when the app shuts down). Once
    `stopping()` is true (uvicorn's `should_exit` after SIGTERM), requests that have not
    reached the engine are answered 503 `shutting_down`, so the shutdown timeout is spent
    finishing at most the request holding the engine, never a queue of them."""
    if token is not None and not token:
        raise ValueError("token must not be empty (an empty token would turn auth off)")

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        watch = asyncio.create_task(_refuse_once(stopping, engine)) if stopping else None
        yield
        if watch is not None:
            watch.cancel()
        engine.locked.refuse(None)  # close() takes the lock itself
        engine.close()

    app = FastAPI(
        title="pagedkv",
        summary="A paged KV cache with prefix caching, copy-on-write and a write-ahead log.",
        version=__version__,
        lifespan=lifespan,
        max_body_size=MAX_BODY_BYTES,  # 413; the guard inside it bounds the body's time
        # The guard enforces the token on every path; this declares it in the OpenAPI docs.
        dependencies=[Security(BEARER)] if token else None,
    )
    app.add_middleware(
        Guard,
        token=token.encode() if token else None,
        limits=engine.limits,
        refusing=lambda: engine.locked.refusing,
    )
    if engine.quotas.active:  # a tokens file: per-client auth and quotas, before the guard
        install_quotas(app, engine.quotas, engine.limits.retry_after)
    _add_error_answers(app, engine)
    _add_sequence_routes(app, engine)
    _add_pool_routes(app, engine)
    return app


async def _refuse_once(stopping: Callable[[], bool], engine: ServiceEngine) -> None:
    while not stopping():  # polls uvicorn's public should_exit (it runs until shutdown)
        await asyncio.sleep(0.05)
    engine.locked.refuse("the server is shutting down; try again")


def _add_error_answers(app: FastAPI, engine: ServiceEngine) -> None:
    """The status code and JSON body of each error a request can meet (the module docstring)."""

    @app.exception_handler(RequestValidationError)
    def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        # Field and reason only: echoing the input back could be huge, or not even JSON (inf).
        errors = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
        return JSONResponse(status_code=422, content={"error": "invalid", "detail": errors})

    retry = {"Retry-After": str(engine.limits.retry_after)}

    @app.exception_handler(OutOfPagesError)
    def out_of_pages(request: Request, exc: OutOfPagesError) -> JSONResponse:
        engine.metrics.count_out_of_pages()  # pagedkv_out_of_pages_refusals_total
        counts = engine.locked.published  # other requests may be changing the pool meanwhile
        return JSONResponse(
            status_code=503,
            headers=retry,
            content={
                "error": "out_of_pages",
                "detail": str(exc),
                "num_pages": engine.pool.num_pages,
                "num_available_pages": counts["num_free_pages"] + counts["num_cached_pages"],
            },
        )

    @app.exception_handler(ValueError)
    def invalid_value(request: Request, exc: ValueError) -> JSONResponse:
        # The same body as pydantic's 422s: every 422 names its field in "loc".
        loc = list(exc.loc) if isinstance(exc, FieldError) else ["body"]
        detail = [{"loc": loc, "msg": str(exc), "type": "value_error"}]
        error = "exceeds_pool" if isinstance(exc, ExceedsPoolError) else "invalid"
        return JSONResponse(status_code=422, content={"error": error, "detail": detail})

    for exc_type, status, error in (
        (UnknownSequenceError, 404, "unknown_sequence"),
        (SequenceExistsError, 409, "sequence_exists"),
        (ShuttingDownError, 503, "shutting_down"),
        (ServiceBusyError, 503, "too_many_sequences"),
        (StoreNeedsRecoveryError, 503, "needs_recovery"),
    ):
        app.add_exception_handler(
            exc_type,
            lambda request, exc, status=status, error=error: JSONResponse(
                status_code=status,
                content={"error": error, "detail": str(exc)},
                headers=retry if status == 503 else None,
            ),
        )


def _replayed(engine: ServiceEngine) -> dict[str, str] | None:
    """The header that tells a retry it got the first answer (Idempotency-Key), if it did."""
    return {"Idempotent-Replayed": "true"} if engine.last_replayed() else None


def _add_sequence_routes(app: FastAPI, engine: ServiceEngine) -> None:
    """/sequences: create, read, generate, append, fork and free, each through the engine."""

    def answer(result: dict, status: int = 200) -> JSONResponse:
        return JSONResponse(result, status_code=status, headers=_replayed(engine))

    @app.post("/sequences", status_code=201)
    def create_sequence(body: CreateSequence, key: IdempotencyKey = None) -> JSONResponse:
        tokens = body.tokens(engine.limits.max_prompt_tokens)
        return answer(engine.create(tokens, body.seq_id, body.extra_key, key=key, field=body.field), 201)

    @app.get("/sequences/{seq_id}")
    def get_sequence(seq_id: PathSeqId) -> dict:
        return engine.sequence(seq_id)

    @app.post("/sequences/{seq_id}/generate")
    def generate(seq_id: PathSeqId, body: Generate, key: IdempotencyKey = None) -> JSONResponse:
        if body.max_new_tokens > engine.limits.max_new_tokens:
            too_large(
                "max_new_tokens",
                f"max_new_tokens is {body.max_new_tokens}; this server decodes at most "
                f"{engine.limits.max_new_tokens} per request",
            )
        return answer(engine.generate(seq_id, body.max_new_tokens, body.temperature, body.seed, key=key))

    @app.post("/sequences/{seq_id}/append")
    def append(seq_id: PathSeqId, body: AppendTokens, key: IdempotencyKey = None) -> JSONResponse:
        return answer(engine.append(seq_id, body.tokens(engine.limits.max_append_tokens), key=key))

    @app.post("/sequences/{seq_id}/fork", status_code=201)
    def fork(seq_id: PathSeqId, body: Fork | None = None, key: IdempotencyKey = None) -> JSONResponse:
        return answer(engine.fork(seq_id, body.child_id if body else None, key=key), 201)

    @app.delete("/sequences/{seq_id}", status_code=204)
    def free(seq_id: PathSeqId, key: IdempotencyKey = None) -> Response:
        engine.free(seq_id, key=key)
        return Response(status_code=204, headers=_replayed(engine))


def _add_pool_routes(app: FastAPI, engine: ServiceEngine) -> None:
    """The whole pool: health, snapshot, invariants, metrics and the WAL checkpoint."""

    @app.api_route("/health", methods=["GET", "HEAD"])
    async def health() -> dict:
        return {"status": "ok", **engine.locked.published}

    @app.get("/snapshot")
    def snapshot(offset: Annotated[int, Query(ge=0)] = 0) -> dict:
        return engine.snapshot(offset)

    @app.get("/invariants")
    def invariants() -> JSONResponse:
        try:
            engine.check()
        except AssertionError as exc:  # a bug in the server, not in the request
            return JSONResponse(status_code=500, content={"ok": False, "detail": str(exc)})
        return JSONResponse({"ok": True})

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(engine.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    @app.post("/checkpoint")
    def checkpoint() -> JSONResponse:
        if engine.durable is None:
            return JSONResponse(
                status_code=409,
                content={"error": "no_wal", "detail": "start the server with --wal PATH"},
            )
        return JSONResponse({"checkpoint_seq": engine.checkpoint()})


__all__ = [
    "MAX_BODY_BYTES",
    "MAX_APPEND_TOKENS",
    "MAX_CONTEXT_TOKENS",
    "MAX_NEW_TOKENS",
    "MAX_PROMPT_TOKENS",
    "create_app",
]
