"""ServiceEngine: what the HTTP API serves — a locked, optionally durable cache run by TinyLM.

One engine owns a `TinyLM`, a `SequenceManager` over a pool (a `DurableSequenceManager`
when given a directory: its log, checkpoints and memory-mapped K/V), the `LockedManager`
around it and the `ServiceMetrics` reading it. Its operations are whole requests:

- `create`: admit a prompt (prefix lookup, allocation) and prefill it through the model,
- `generate`: decode n tokens, each appended and its K/V computed before the next,
- `append`: append given tokens and compute their K/V,
- `fork`, `free`, `sequence`, `snapshot`, `check`, `checkpoint`.

Each holds the service lock from start to end and is all-or-nothing: the pages a call
needs are counted before anything changes: a call the pool cannot serve now raises
`OutOfPagesError`, one needing more pages than the pool has `ExceedsPoolError`, having
changed nothing (never half a generation). K/V are computed before the lock is released.
With a write-ahead log each request is one transaction (durable.py): a crash in the middle
of a generate is rolled back by recovery to the state before the request. Each mutating
call takes an optional idempotency key (idempotency.py): a retry with the same key returns
the first answer and applies nothing twice, across crashes too.

Limits (`ServiceLimits`) bound what one client can make: live sequences, tokens per
sequence, block tables per snapshot page; the copy-on-write record keeps its newest
`COW_LOG_KEEP` pairs. After every request the lock publishes the counts `/health` and
`/metrics` read (`LockedManager.published`), so they never wait for it; checkpoints are
written by a background thread (checkpointer.py), never inside a client's request.

Recovery may still return a sequence with tokens whose K/V were not computed (a log written
without transactions, by direct use of `DurableSequenceManager`): before it serves anything
the engine computes every such token (`TinyLM.forward`).

The last-position logits of each sequence are kept to sample its next token. After a
restart the others are gone, and are recomputed densely from the token ids when needed
(`TinyLM.forward_reference`, which writes nothing into the cache).

vLLM's AsyncLLM hands requests to one engine-core loop that batches them; this engine
runs each request's forward pass on its own, under the lock. Leaves out: batching across
requests, streaming, stop strings.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pagedkv.core.plumbing.validation import check_tokens, check_vocab
from pagedkv.core.pool import KVCachePool, OutOfPagesError
from pagedkv.core.sequence import Sequence, SequenceManager
from pagedkv.model.tinylm import VOCAB_SIZE, TinyLM
from pagedkv.service.answers import describe, snapshot_json
from pagedkv.service.checkpointer import Checkpointer
from pagedkv.service.concurrency import LockedManager
from pagedkv.service.durable import COW_LOG_KEEP, DurableSequenceManager
from pagedkv.service.idempotency import IdempotencyKeys, check_key, fingerprint
from pagedkv.service.limits import FieldError, ServiceBusyError, ServiceLimits, check_fits_pool
from pagedkv.service.metrics import ServiceMetrics
from pagedkv.service.quota import Quotas
from pagedkv.service.recovery import discarded_lines, open_store
from pagedkv.service.wal import FsyncPolicy

if TYPE_CHECKING:
    from pagedkv.service.clients import Client

MAX_CONTEXT_TOKENS = ServiceLimits.max_context_tokens  # default tokens one sequence may hold
log = logging.getLogger("pagedkv.service")


class SequenceExistsError(ValueError):
    """A sequence with this id is already live."""


class ServiceEngine:
    """A thread-safe, optionally durable paged KV cache with TinyLM, serving whole requests."""

    def __init__(
        self,
        num_pages: int = 256,
        page_size: int = 16,
        wal: Path | str | None = None,
        fsync: FsyncPolicy | str = "always",
        model_seed: int | None = None,
        checkpoint_every: int = 10_000,
        limits: ServiceLimits | None = None,
        vllm_names: bool = False,
        metrics_created: bool = False,
        clients: list[Client] | None = None,
    ) -> None:
        self.limits = limits if limits is not None else ServiceLimits()
        # The shipped trained weights, unless a seed asks for random ones (of the default shape).
        self.model = TinyLM.pretrained() if model_seed is None else TinyLM(seed=model_seed)
        config = self.model.cache_config(num_pages, page_size)
        if wal is not None:
            manager: SequenceManager = open_store(wal, config, fsync, self.limits.idempotency_keys)
        else:
            manager = SequenceManager(KVCachePool(config))
        self.durable = manager if isinstance(manager, DurableSequenceManager) else None
        self.keys = (
            self.durable.idempotency
            if self.durable is not None
            else IdempotencyKeys(self.limits.idempotency_keys)
        )
        self.locked = LockedManager(manager)
        self.pool = manager.pool
        self.recovery = dict(self.durable.recovery) if self.durable is not None else {}
        # Per-client quotas and sequence owners (quota.py); no-ops without clients.
        self.quotas = Quotas(clients, self.durable.owners if self.durable is not None else {})
        self.quotas.publish(manager, everyone=True)
        self.metrics = ServiceMetrics(
            self.locked,
            log=self.durable.log if self.durable is not None else None,
            recovery=self.recovery,
            vllm_names=vllm_names,
            created=metrics_created,
            quotas=self.quotas if self.quotas.active else None,
        )
        self._logits: dict[Hashable, np.ndarray] = {}  # seq id -> last-position logits [vocab]
        self._next_id = 1
        self._local = threading.local()  # .replayed: the last request answered from its key
        uncomputed = [s for s, q in manager.sequences.items() if q.num_computed_tokens < q.num_tokens]
        if uncomputed:  # tokens the log holds but a crash kept from being computed
            with self.locked.exclusive():
                self._logits.update(zip(uncomputed, self.model.forward(manager, uncomputed)))
        self.checkpointer = (
            Checkpointer(self.durable, self.locked, checkpoint_every) if self.durable is not None else None
        )
        for line in discarded_lines(self.recovery):
            log.warning("%s: %s", wal, line)

    # ---- requests ------------------------------------------------------------------------

    def create(
        self,
        token_ids: list[int],
        seq_id: str | None = None,
        extra_key: str | None = None,
        key: str | None = None,
        field: str = "token_ids",
    ) -> dict:
        """Admit and prefill a prompt; returns the prefix-hit count and the block table."""
        check_tokens("token_ids", token_ids)  # ints (TypeError otherwise), not empty
        check_vocab("token_ids", token_ids, VOCAB_SIZE)
        self._check_context(field, len(token_ids))
        # a prompt no pool state could hold is bad input (422), not "busy" (503)
        check_fits_pool(field, "the prompt", len(token_ids), self.pool.page_size, self.pool.num_pages)

        def run(m: SequenceManager) -> dict:
            nonlocal seq_id
            if seq_id is None:
                seq_id = self._fresh_id(m)
            elif seq_id in m:
                raise SequenceExistsError(f"seq_id {seq_id!r} is already a live sequence")
            self.quotas.check_new_sequence(m, self.quotas.create_pages(m, len(token_ids)))
            self._check_room(m)
            with self.metrics.time_allocation():
                num_cached = m.add(seq_id, token_ids, extra_key)
            self.quotas.claim(seq_id)
            self._logits[seq_id] = self.model.forward(m, [seq_id])[0]
            return {**describe(m.get(seq_id)), "num_cached_tokens": num_cached}

        return self._run(key, fingerprint("create", list(token_ids), seq_id, extra_key), run)

    def generate(
        self,
        seq_id: str,
        max_new_tokens: int,
        temperature: float = 0.0,
        seed: int = 0,
        key: str | None = None,
    ) -> dict:
        """Sample and append `max_new_tokens` tokens, computing each one's K/V."""

        def run(m: SequenceManager) -> dict:
            self.quotas.check_owner(seq_id)
            seq = m.get(seq_id)
            self._reserve(m, seq, max_new_tokens, "max_new_tokens")
            logits = self._last_logits(m, seq)
            rng = np.random.default_rng(seed)
            new_tokens = []
            for _ in range(max_new_tokens):
                token = self.model.sample(logits[None], temperature, rng)[0]
                with self.metrics.time_allocation():
                    m.append_slot(seq_id, token)
                logits = self.model.forward(m, [seq_id])[0]
                new_tokens.append(token)
            self._logits[seq_id] = logits
            new_tokens = [int(t) for t in new_tokens]
            return {**describe(seq), "new_token_ids": new_tokens, "new_text": TinyLM.decode(new_tokens)}

        request = fingerprint("generate", seq_id, max_new_tokens, temperature, seed)
        return self._run(key, request, run)

    def append(self, seq_id: str, token_ids: list[int], key: str | None = None) -> dict:
        """Append the given tokens (e.g. a user turn) and compute their K/V in one pass."""
        check_tokens("token_ids", token_ids)  # ints (TypeError otherwise), not empty
        check_vocab("token_ids", token_ids, VOCAB_SIZE)

        def run(m: SequenceManager) -> dict:
            self.quotas.check_owner(seq_id)
            seq = m.get(seq_id)
            self._reserve(m, seq, len(token_ids), "token_ids")
            for token in token_ids:
                with self.metrics.time_allocation():
                    m.append_slot(seq_id, token)
            self._logits[seq_id] = self.model.forward(m, [seq_id])[0]
            return describe(seq)

        return self._run(key, fingerprint("append", seq_id, list(token_ids)), run)

    def fork(self, seq_id: str, child_id: str | None = None, key: str | None = None) -> dict:
        """Start `child_id` sharing every page of `seq_id` (copy-on-write later)."""

        def run(m: SequenceManager) -> dict:
            nonlocal child_id
            self.quotas.check_owner(seq_id)
            m.get(seq_id)
            if child_id is None:
                child_id = self._fresh_id(m)
            elif child_id in m:
                raise SequenceExistsError(f"child_id {child_id!r} is already a live sequence")
            self.quotas.check_new_sequence(m, self.quotas.fork_pages(m, seq_id))
            self._check_room(m)
            m.fork(seq_id, child_id)
            self.quotas.claim(child_id)
            if seq_id in self._logits:
                self._logits[child_id] = self._logits[seq_id]
            return describe(m.get(child_id))

        return self._run(key, fingerprint("fork", seq_id, child_id), run)

    def free(self, seq_id: str, key: str | None = None) -> None:
        def run(m: SequenceManager) -> dict:
            self.quotas.check_owner(seq_id)
            m.free(seq_id)
            self.quotas.release(seq_id)
            self._logits.pop(seq_id, None)
            return {}

        self._run(key, fingerprint("free", seq_id), run)

    def sequence(self, seq_id: str) -> dict:
        self.quotas.check_owner(seq_id)
        return describe(self.locked.sequence(seq_id))

    def snapshot(self, offset: int = 0) -> dict:
        """The pool's snapshot; block tables of at most `max_snapshot_sequences` sequences
        from `offset` on (`next_offset` is where the next page starts, None at the end)."""
        return snapshot_json(self.locked.snapshot(), offset, self.limits.max_snapshot_sequences)

    def check(self) -> None:
        """Raise AssertionError naming the first broken rule (see KVCachePool.check_invariants)."""
        self.locked.check_invariants()

    def checkpoint(self) -> int:
        """Compact the write-ahead log now; returns the record number the checkpoint covers."""
        if self.checkpointer is None:
            raise RuntimeError("this engine has no write-ahead log (start it with a wal directory)")
        return self.checkpointer.run()

    def last_replayed(self) -> bool:
        """Whether this thread's last request was answered from its idempotency key."""
        return getattr(self._local, "replayed", False)

    def close(self) -> None:
        if self.checkpointer is not None:
            self.checkpointer.stop()
        if self.durable is not None:
            with self.locked.exclusive():
                self.durable.close()

    # ---- helpers (called with the lock held) ---------------------------------------------

    def _run(self, key: str | None, request: str, body: Callable[[SequenceManager], dict]) -> dict:
        """One request under the lock: the stored answer for a known key, else `body` as one
        transaction whose commit stores the key and answer."""
        if key is not None:
            key = self.quotas.scoped_key(check_key(key))  # each client has its own keys
        self._local.replayed = False
        with self.metrics.exclusive() as m:
            self.quotas.take_claims()  # none left by a request that failed
            stored = self.keys.lookup(key, request) if key is not None else None
            if stored is not None:
                self._local.replayed = True
                return stored
            if self.durable is None:
                answer = body(m)
                self.quotas.take_claims()
                self.quotas.publish(m)
                if key is not None:
                    self.keys.store(key, request, answer)
                del m.cow_log[:-COW_LOG_KEEP]  # bounded, as a durable store's (durable.py)
                return answer
            with self.durable.transaction():
                answer = body(m)
                owners = self.quotas.take_claims()
                self.durable.commit(key, request, answer if key is not None else None, owners)
            self.quotas.publish(m)
        if self.checkpointer is not None:  # there is one exactly when there is a durable store
            self.checkpointer.poke()
        return answer

    def _fresh_id(self, m: SequenceManager) -> str:
        while f"seq-{self._next_id}" in m:
            self._next_id += 1
        self._next_id += 1
        return f"seq-{self._next_id - 1}"

    def _check_room(self, m: SequenceManager) -> None:
        if len(m) >= self.limits.max_sequences:
            raise ServiceBusyError(
                f"{len(m)} live sequences: the limit is {self.limits.max_sequences} "
                "(free some, or start the server with a higher --max-sequences)"
            )

    def _check_context(self, field: str, num_tokens: int) -> None:
        if num_tokens > self.limits.max_context_tokens:
            raise FieldError(
                ("body", field),
                f"{field}: the sequence would hold {num_tokens} tokens; "
                f"the limit is {self.limits.max_context_tokens}",
            )

    def _reserve(self, m: SequenceManager, seq: Sequence, n: int, field: str) -> None:
        """Raise before anything changes unless n more tokens fit (context limit and pages)."""
        self._check_context(field, seq.num_tokens + n)
        size = m.page_size
        check_fits_pool(field, repr(seq.seq_id), seq.num_tokens + n, size, self.pool.num_pages)
        # The first token may need a page (the last one is full) or a copy of a shared last
        # page; after it the last page is the sequence's own, so the other n - 1 tokens need
        # a new page exactly at each page boundary they cross.
        needed = m.pages_needed_to_append(seq.seq_id) + (
            -(-(seq.num_tokens + n) // size) - -(-(seq.num_tokens + 1) // size)
        )
        self.quotas.check_pages(m, needed)
        if needed > self.pool.num_available_pages:
            raise OutOfPagesError(
                f"{n} more tokens for {seq.seq_id!r} need {needed} pages; only "
                f"{self.pool.num_available_pages} of {self.pool.num_pages} are FREE or CACHED"
            )

    def _last_logits(self, m: SequenceManager, seq: Sequence) -> np.ndarray:
        if seq.seq_id in self._logits:
            return self._logits[seq.seq_id]
        return self.model.forward_reference(seq.token_ids)[-1]


__all__ = ["MAX_CONTEXT_TOKENS", "SequenceExistsError", "ServiceEngine", "snapshot_json"]
