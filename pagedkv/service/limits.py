"""ServiceLimits: every bound the HTTP service puts on what clients can make it do.

One dataclass, validated in `__post_init__`, shared by the engine (what one client can
create: live sequences, tokens per sequence, snapshot pages), the ASGI guard (in-flight
requests, body read time), the listening socket (gate.py: connections, header read time)
and uvicorn's options (keep-alive, shutdown). `python -m pagedkv serve` exposes each field as an option.

A request beyond a limit gets a quick answer, never a hang: 503 with `Retry-After` for
"busy, try again" (connections, in-flight requests, too few FREE or CACHED pages now), 408
for a body that arrives too slowly, 413 for one too large, 422 for a sequence or request
over its size, a sequence needing more pages than the whole pool included (no retry can
succeed, so no `Retry-After`).

vLLM's server bounds the same things with `--max-num-seqs`, `--max-model-len` and its
uvicorn settings (`--timeout-keep-alive`). Leaves out: per-client quotas (every client
shares these limits) and rate limits over time.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from pagedkv.core.plumbing.validation import check_int, check_number

TOKEN_ENV = "PAGEDKV_TOKEN"  # the environment variable serve reads its bearer token from


@dataclass(frozen=True)
class ServiceLimits:
    max_sequences: int = 1024  # live sequences (a fork takes no pages, so pages alone do not bound it)
    max_context_tokens: int = 4096  # tokens one sequence may hold
    max_prompt_tokens: int = 2048  # tokens (bytes of text) in one create request
    max_append_tokens: int = 1024  # tokens in one append request
    max_new_tokens: int = 256  # tokens one generate request may decode
    max_snapshot_sequences: int = 256  # block tables per GET /snapshot page (?offset=)
    idempotency_keys: int = 1024  # newest Idempotency-Keys remembered (idempotency.py)
    max_connections: int = 512  # client sockets held (gate.py; below the usual 1,024 descriptors)
    max_inflight: int = 32  # requests being served or waiting for the engine at once
    header_timeout: float = 5.0  # seconds for a request line and headers to arrive
    body_timeout: float = 10.0  # seconds for a request body to arrive
    keep_alive: float = 5.0  # seconds an idle keep-alive connection stays open
    shutdown_timeout: float = 8.0  # seconds SIGTERM waits for the request running (others: 503)
    retry_after: int = 1  # seconds, in the Retry-After header of every 503

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "int":
                check_int(f.name, value, 1)
            elif not 0 < check_number(f.name, value, 0.0) <= 3600:  # seconds
                raise ValueError(f"{f.name} must be in (0, 3600] seconds, got {value}")


class ServiceBusyError(Exception):
    """The service cannot take this request now (HTTP 503 with Retry-After)."""


class ShuttingDownError(ServiceBusyError):
    """The server is shutting down (SIGTERM): a request not yet started is refused (HTTP 503
    with Retry-After) rather than left to be cut off by the shutdown timeout."""


class FieldError(ValueError):
    """A value the request sent is refused (HTTP 422); `loc` names it as FastAPI does,
    e.g. ("body", "text") or ("header", "Idempotency-Key")."""

    def __init__(self, loc: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc


class ExceedsPoolError(FieldError):
    """The sequence would need more pages than the pool has in all, so no retry can ever
    succeed (HTTP 422 `exceeds_pool`, no Retry-After); one that fits the pool but not its
    FREE and CACHED pages now is OutOfPagesError (503 with Retry-After)."""


def check_fits_pool(field: str, what: str, num_tokens: int, page_size: int, num_pages: int) -> None:
    """Raise ExceedsPoolError unless `num_tokens` tokens fit in `num_pages` pages in all."""
    needed = -(-num_tokens // page_size)
    if needed > num_pages:
        raise ExceedsPoolError(
            ("body", field),
            f"{field}: {what} would hold {num_tokens} tokens, {needed} pages of {page_size} "
            f"tokens; the pool has {num_pages} pages in all (at most {num_pages * page_size} "
            "tokens per sequence), so no retry can succeed",
        )
