"""Idempotency keys: a retried request returns the first answer instead of running again.

A client that sends `Idempotency-Key: K` with a mutating request and loses the reply (a
timeout, a dropped connection, a server crash) retries with the same key. The service
keeps, for each key it has committed, a fingerprint of the request and the answer:

- the same key with the same request returns the stored answer and changes nothing,
- the same key with a different request is refused (`IdempotencyKeyReusedError`, HTTP 422),
- a request that failed (4xx) stores nothing: it changed nothing, so a retry runs afresh.

With a write-ahead log the key and answer travel in the transaction's commit record
(durable.py), so they are committed with the operation they answer, survive a crash, and
are restored by recovery and carried by checkpoints.

Retention is bounded by count, not time (so it is deterministic and survives restarts the
same way): the newest `max_keys` keys (default 1,024) are kept, the oldest forgotten
first. A retry that arrives after its key was forgotten runs again.

Stripe's API and the IETF draft "The Idempotency-Key HTTP Header Field" work the same way
(Stripe keeps keys for 24 hours). Leaves out: time-based expiry, and a "request still in
progress" answer (requests are serialised by the engine lock, so a retry waits for the
first and then finds its stored answer).
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict

from pagedkv.core.plumbing.validation import check_instance, check_int
from pagedkv.service.limits import FieldError

DEFAULT_MAX_KEYS = 1024
MAX_KEY_LENGTH = 255


HEADER = ("header", "Idempotency-Key")  # where a refused key is, in a 422's "loc"


class IdempotencyKeyReusedError(FieldError):
    """The key was already used for a different request."""

    def __init__(self, message: str) -> None:
        super().__init__(HEADER, message)


def fingerprint(op: str, *args: object) -> str:
    """A short digest of an operation and its arguments.

    Example: fingerprint("generate", "seq-1", 8, 0.0, 0) -> "3f0c..." (16 hex digits)."""
    text = json.dumps([op, *args], separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class IdempotencyKeys:
    """The newest `max_keys` committed keys: key -> (request fingerprint, answer)."""

    def __init__(self, max_keys: int = DEFAULT_MAX_KEYS) -> None:
        self.max_keys = check_int("max_keys", max_keys, 1)
        self._entries: OrderedDict[str, tuple[str, dict]] = OrderedDict()

    def lookup(self, key: str, request: str) -> dict | None:
        """The stored answer for `key`, None if unknown; raises if it was another request."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] != request:
            raise IdempotencyKeyReusedError(
                f"Idempotency-Key {key!r} was already used for a different request"
            )
        return entry[1]

    def store(self, key: str, request: str, answer: dict) -> None:
        self._entries[key] = (request, answer)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_keys:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)

    def export(self) -> list[list]:
        """[[key, fingerprint, answer], ...], oldest first (for checkpoints)."""
        return [[k, f, a] for k, (f, a) in self._entries.items()]

    def restore(self, entries: list[list]) -> None:
        for key, request, answer in entries:
            self.store(key, request, answer)


def check_key(key: object) -> str:
    """A key as sent in the header: 1-255 visible ASCII characters."""
    text: str = check_instance("Idempotency-Key", key, str)
    if not 1 <= len(text) <= MAX_KEY_LENGTH or not text.isascii() or not text.isprintable():
        raise FieldError(
            HEADER, f"Idempotency-Key must be 1-{MAX_KEY_LENGTH} printable ASCII characters, got {text!r}"
        )
    return text
