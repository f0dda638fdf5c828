"""ServiceEngine: what the HTTP API serves — a locked, optionally durable cache run by TinyLM.

One engine owns a `TinyLM`, a `SequenceManager` over a pool (a `DurableSequenceManager`
when given a directory: its log, checkpoints and memory-mapped K/V), the `LockedManager`
around it and the `ServiceMetrics` reading it. Its operations are whole requests:

- `create`: admit a prompt (prefix lookup, allocation) and prefill it through the model,
- `generate`: decode n tokens, each appended and its K/V computed before the next,
- `append`: append given tokens and compute their K/V,
- `fork`, `free`, `sequence`, `snapshot`, `check`, `checkpoint`.

Each holds the service lock from start to end and is all-or-nothing: the pages a call
needs are counted before anything changes, so a call the pool cannot serve raises
`OutOfPagesError` having changed nothing (never half a generation). K/V are always computed
before the lock is released, so no other request can hit a page whose K/V are missing.

A crash can still come between a token's record and its K/V (`add` / `append` logged, its
`computed` record not): the recovered sequence then holds tokens whose K/V are not in the
cache, in pages already indexed for prefix hits. So before it serves anything, the engine
computes every such token (`TinyLM.forward`; the K/V of the computed prefix are durable
in the memory-mapped K/V file).

The last-position logits of each sequence are kept to sample its next token. After a
restart the others are gone, and are recomputed densely from the token ids when needed
(`TinyLM.forward_reference`, which writes nothing into the cache).

vLLM's AsyncLLM hands requests to one engine-core loop that batches them; this engine
runs each request's forward pass on its own, under the lock. Leaves out: batching across
requests, streaming, stop strings.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ..model import VOCAB_SIZE, TinyLM
from ..pool import KVCachePool, OutOfPagesError, PoolSnapshot
from ..sequence import Sequence, SequenceManager
from ..validation import check_tokens, check_vocab
from .concurrency import LockedManager
from .durable import DurableSequenceManager
from .metrics import ServiceMetrics
from .recovery import open_store
from .wal import FsyncPolicy

MAX_CONTEXT_TOKENS = 4096  # tokens one sequence may hold


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
    ) -> None:
        # The shipped trained weights, unless a seed asks for random ones (of the default shape).
        self.model = TinyLM.pretrained() if model_seed is None else TinyLM(seed=model_seed)
        config = self.model.cache_config(num_pages, page_size)
        if wal is not None:
            manager: SequenceManager = open_store(wal, config, fsync)
        else:
            manager = SequenceManager(KVCachePool(config))
        self.durable = manager if isinstance(manager, DurableSequenceManager) else None
        self.locked = LockedManager(manager)
        self.pool = manager.pool
        self.metrics = ServiceMetrics(
            self.locked, log=self.durable.log if self.durable is not None else None
        )
        self._logits: dict[Hashable, np.ndarray] = {}  # seq id -> last-position logits [vocab]
        self._next_id = 1
        # A checkpoint every this many log records bounds the log's size and recovery time.
        self.checkpoint_every = checkpoint_every
        self._checkpointed = (
            self.durable.recovery.get("checkpoint_seq", 0) if self.durable is not None else 0
        )
        uncomputed = [s for s, q in manager.sequences.items() if q.num_computed_tokens < q.num_tokens]
        if uncomputed:  # tokens the log holds but a crash kept from being computed
            self._logits.update(zip(uncomputed, self.model.forward(manager, uncomputed)))

    # ---- requests ------------------------------------------------------------------------

    def create(
        self, token_ids: list[int], seq_id: str | None = None, extra_key: str | None = None
    ) -> dict:
        """Admit and prefill a prompt; returns the prefix-hit count and the block table."""
        check_tokens("token_ids", token_ids)  # ints (TypeError otherwise), not empty
        check_vocab("token_ids", token_ids, VOCAB_SIZE)
        _check_context("token_ids", len(token_ids))
        with self._exclusive() as m:
            if seq_id is None:
                seq_id = self._fresh_id(m)
            elif seq_id in m:
                raise SequenceExistsError(f"seq_id {seq_id!r} is already a live sequence")
            with self.metrics.time_allocation():
                num_cached = m.add(seq_id, token_ids, extra_key)
            self._logits[seq_id] = self.model.forward(m, [seq_id])[0]
            return {**_describe(m.get(seq_id)), "num_cached_tokens": num_cached}

    def generate(
        self, seq_id: str, max_new_tokens: int, temperature: float = 0.0, seed: int = 0
    ) -> dict:
        """Sample and append `max_new_tokens` tokens, computing each one's K/V."""
        with self._exclusive() as m:
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
            return {
                **_describe(seq),
                "new_token_ids": new_tokens,
                "new_text": TinyLM.decode(new_tokens),
            }

    def append(self, seq_id: str, token_ids: list[int]) -> dict:
        """Append the given tokens (e.g. a user turn) and compute their K/V in one pass."""
        check_tokens("token_ids", token_ids)  # ints (TypeError otherwise), not empty
        check_vocab("token_ids", token_ids, VOCAB_SIZE)
        with self._exclusive() as m:
            seq = m.get(seq_id)
            self._reserve(m, seq, len(token_ids), "token_ids")
            for token in token_ids:
                with self.metrics.time_allocation():
                    m.append_slot(seq_id, token)
            self._logits[seq_id] = self.model.forward(m, [seq_id])[0]
            return _describe(seq)

    def fork(self, seq_id: str, child_id: str | None = None) -> dict:
        """Start `child_id` sharing every page of `seq_id` (copy-on-write later)."""
        with self._exclusive() as m:
            m.get(seq_id)
            if child_id is None:
                child_id = self._fresh_id(m)
            elif child_id in m:
                raise SequenceExistsError(f"child_id {child_id!r} is already a live sequence")
            m.fork(seq_id, child_id)
            if seq_id in self._logits:
                self._logits[child_id] = self._logits[seq_id]
            return _describe(m.get(child_id))

    def free(self, seq_id: str) -> None:
        with self._exclusive() as m:
            m.free(seq_id)
            self._logits.pop(seq_id, None)

    def sequence(self, seq_id: str) -> dict:
        return _describe(self.locked.sequence(seq_id))

    def snapshot(self) -> dict:
        return snapshot_json(self.locked.snapshot())

    def check(self) -> None:
        """Raise AssertionError naming the first broken rule (see KVCachePool.check_invariants)."""
        self.locked.check_invariants()

    def checkpoint(self) -> int:
        """Compact the write-ahead log; returns the record number the checkpoint covers."""
        if self.durable is None:
            raise RuntimeError("this engine has no write-ahead log (start it with a wal directory)")
        with self.metrics.exclusive():
            self._checkpointed = self.durable.checkpoint()
            return self._checkpointed

    def close(self) -> None:
        if self.durable is not None:
            with self.metrics.exclusive():
                self.durable.close()

    # ---- helpers (called with the lock held) ---------------------------------------------

    @contextmanager
    def _exclusive(self) -> Iterator[SequenceManager]:
        """The service lock for one request; afterwards, a checkpoint if the log has grown."""
        with self.metrics.exclusive() as m:
            try:
                yield m
            finally:
                log = self.durable.log if self.durable is not None else None
                if log is not None and log.last_seq - self._checkpointed >= self.checkpoint_every:
                    self._checkpointed = self.durable.checkpoint()

    def _fresh_id(self, m: SequenceManager) -> str:
        while f"seq-{self._next_id}" in m:
            self._next_id += 1
        self._next_id += 1
        return f"seq-{self._next_id - 1}"

    def _reserve(self, m: SequenceManager, seq: Sequence, n: int, field: str) -> None:
        """Raise before anything changes unless n more tokens fit (context limit and pages)."""
        _check_context(field, seq.num_tokens + n)
        size = m.page_size
        # The first token may need a page (the last one is full) or a copy of a shared last
        # page; after it the last page is the sequence's own, so the other n - 1 tokens need
        # a new page exactly at each page boundary they cross.
        needed = m.pages_needed_to_append(seq.seq_id) + (
            -(-(seq.num_tokens + n) // size) - -(-(seq.num_tokens + 1) // size)
        )
        if needed > self.pool.num_available_pages:
            raise OutOfPagesError(
                f"{n} more tokens for {seq.seq_id!r} need {needed} pages; only "
                f"{self.pool.num_available_pages} of {self.pool.num_pages} are FREE or CACHED"
            )

    def _last_logits(self, m: SequenceManager, seq: Sequence) -> np.ndarray:
        if seq.seq_id in self._logits:
            return self._logits[seq.seq_id]
        return self.model.forward_reference(seq.token_ids)[-1]


def _check_context(field: str, num_tokens: int) -> None:
    if num_tokens > MAX_CONTEXT_TOKENS:
        raise ValueError(
            f"{field}: the sequence would hold {num_tokens} tokens; "
            f"the limit is {MAX_CONTEXT_TOKENS}"
        )


def _describe(seq: Sequence) -> dict:
    return {
        "seq_id": seq.seq_id,
        "token_ids": list(seq.token_ids),
        "text": TinyLM.decode(seq.token_ids),
        "block_table": list(seq.block_table),
        "num_tokens": seq.num_tokens,
        "num_prompt_tokens": seq.num_prompt_tokens,
        "num_cached_tokens": seq.num_cached_tokens,
        "num_computed_tokens": seq.num_computed_tokens,
        "parent": seq.parent,
    }


def snapshot_json(snap: PoolSnapshot) -> dict:
    """A PoolSnapshot as JSON-ready data (page arrays as lists; state codes FREE 0, ACTIVE 1,
    CACHED 2)."""
    arrays = ("state", "fill", "ref_count", "owner", "lru_rank", "hashed", "last_access")
    return {
        "clock": snap.clock,
        "num_pages": snap.num_pages,
        "page_size": snap.page_size,
        **{name: getattr(snap, name).tolist() for name in arrays},
        "seq_ids": list(snap.seq_ids),
        "block_tables": {str(k): list(v) for k, v in snap.block_tables.items()},
        "num_cached_tokens": {str(k): v for k, v in snap.num_cached_tokens.items()},
        "cow_log": [list(pair) for pair in snap.cow_log],
        "stats": snap.stats,
        "usage": snap.usage,
        "token_usage": snap.token_usage,
    }
