"""SequenceManager: block tables for live sequences — admission with prefix lookup,
append_slot, fork, free.

`SequenceManager` is vLLM v1's `KVCacheManager` (with the v0 block manager's fork and
copy-on-write, which v1 dropped when it stopped sharing partial blocks); nano-vllm's
`BlockManager` does the same job. It turns "this sequence has these tokens" into "these
pages, in this order", asking the pool for pages only when the last one is full.

- `add` hashes the prompt's full pages, reuses the longest cached prefix (never the page
  holding the last prompt token: that token must run to produce logits), and allocates
  the rest all-or-nothing.
- `append_slot` finds the slot for one new token: the last page if it has room and is not
  shared, a copy of it if it is shared (copy-on-write), a new page if it is full. A page
  that fills is hashed and indexed at once.
- `fork` shares every page of the parent; `free` releases pages tail first, so the
  deepest page of a finished sequence is the first of its pages to be evicted.

The contract with whoever computes K/V (the model runner, the Scheduler, the service): a
page is indexed the moment it fills, like vLLM v1 caches blocks as soon as they are
scheduled, so the K/V of every admitted or appended token must be computed before the
sequence is freed and before another sequence is admitted that could hit the page.
Pure bookkeeping (benchmarks, the state-machine tests) never reads K/V, so it may skip that.

The manager decides and the pool acts: every page changes through the pool's public
verbs, between `pool.tick()` and `pool.publish()`, together with the block-table change.
A `Sequence` itself is plain data (slot_mapping.py).

Leaves out: sliding-window or cross-attention block tables; admission takes all of a
prompt's pages at once (vLLM v1 allocates them per scheduled chunk).
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable
from collections.abc import Sequence as SequenceLike
from typing import NamedTuple

import numpy as np

from pagedkv.core.hashing import chain_hashes, encode_extra_key, hash_block_tokens
from pagedkv.core.observe.invariants import check_invariants
from pagedkv.core.observe.snapshot import PoolSnapshot, take_snapshot
from pagedkv.core.plumbing.validation import (
    UnknownSequenceError,
    check_instance,
    check_int,
    check_known,
    check_new,
    check_seq_id,
    check_token,
    check_token_array,
    check_token_list,
)
from pagedkv.core.plumbing.words import count
from pagedkv.core.pool import KVCachePool, OutOfPagesError
from pagedkv.core.slot_mapping import Sequence, num_blocks, slot_mapping

__all__ = ["AdmissionPlan", "Sequence", "SequenceManager", "UnknownSequenceError"]


class AdmissionPlan(NamedTuple):
    """What `add` will do for a prompt, worked out without changing anything."""

    seq_id: Hashable
    tokens: array  # the prompt's token ids, array('q')
    extra_key: object
    hashes: list[bytes]  # chained digests of the prompt's full pages (none if caching is off)
    hits: list[int]  # pages reused from the prefix cache, block order
    revived: list[int]  # those of the hits that are CACHED now (they leave the evictable supply)
    num_new_pages: int  # pages to allocate for the rest of the prompt
    num_cached_tokens: int  # prompt tokens the hits cover

    @property
    def token_ids(self) -> list[int]:
        """The prompt's token ids as a list."""
        return self.tokens.tolist()


class SequenceManager:
    """Block tables for live sequences over one `KVCachePool`."""

    def __init__(self, pool: KVCachePool) -> None:
        self.pool = check_instance("pool", pool, KVCachePool)
        self.page_size = pool.page_size
        self.sequences: dict[Hashable, Sequence] = {}  # seq id -> sequence, oldest first
        self.cow_log: list[tuple[int, int]] = []  # (src, dst) page pairs, in copy order
        self._caching = pool.config.enable_prefix_caching  # fixed for the pool's lifetime

    # ---- queries ---------------------------------------------------------------------------

    def get(self, seq_id: Hashable) -> Sequence:
        """The live sequence with this id (raises UnknownSequenceError)."""
        return check_known("seq_id", seq_id, self.sequences)

    __getitem__ = get

    def __contains__(self, seq_id: object) -> bool:
        try:
            return seq_id in self.sequences
        except TypeError:
            return False

    def __len__(self) -> int:
        return len(self.sequences)

    def block_table(self, seq_id: Hashable) -> list[int]:
        """The page ids of a sequence's logical blocks (a copy)."""
        return list(self.get(seq_id).block_table)

    def slot_mapping(self, seq_id: Hashable, start: int = 0, end: int | None = None) -> np.ndarray:
        """Slots of a sequence's positions start..end-1 (`Sequence.slot_mapping`)."""
        return self.get(seq_id).slot_mapping(start, end)

    def pages_needed_to_append(self, seq_id: Hashable) -> int:
        """Pages `append_slot` would take now: 1 for a new page or a COW copy, else 0."""
        return self.pages_needed_for_decode([seq_id])

    def pages_needed_for_decode(self, seq_ids: SequenceLike[Hashable]) -> int:
        """Pages a decode step appending one token to each of these sequences takes.

        A full last page needs a new page. A partial last page shared by k block tables
        needs k copies if some holder is outside the step, else k - 1: the last writer
        finds itself the only holder and writes in place."""
        seqs = [self.get(s) for s in seq_ids]
        if len({s.seq_id for s in seqs}) != len(seqs):
            raise ValueError(f"seq_ids must be distinct, got {list(seq_ids)}")
        needed = 0
        writers: dict[int, int] = {}  # partial last page id -> sequences of the step on it
        for seq in seqs:
            if seq.num_tokens % self.page_size == 0:
                needed += 1
            else:
                writers[seq.block_table[-1]] = writers.get(seq.block_table[-1], 0) + 1
        for page_id, k in writers.items():
            holders = self.pool.table.ref_count[page_id]
            needed += k if holders > k else k - 1
        return needed

    # ---- admission -------------------------------------------------------------------------

    def plan_add(
        self, seq_id: Hashable, prompt_token_ids: SequenceLike[int] | np.ndarray, extra_key: object = None
    ) -> AdmissionPlan:
        """Validate an admission and work out what `add` would do, changing nothing."""
        check_new("seq_id", check_seq_id("seq_id", seq_id), self.sequences)
        tokens, data = check_token_array("prompt_token_ids", prompt_token_ids)
        encode_extra_key(extra_key)  # validates its type
        hashes: list[bytes] = []
        hits: list[int] = []
        if self._caching:
            hashes = chain_hashes(data, self.page_size, extra_key, self.pool.config.prefix_caching_hash_algo)
            # The page holding the last prompt token is never a hit: that token must run.
            hits = self.pool.find_longest_cache_hit(hashes[: (len(tokens) - 1) // self.page_size], tokens)
        return AdmissionPlan(
            seq_id=seq_id,
            tokens=tokens,
            extra_key=extra_key,
            hashes=hashes,
            hits=hits,
            revived=[p for p in hits if not self.pool.table.ref_count[p]],  # unheld hits are CACHED
            num_new_pages=num_blocks(len(tokens), self.page_size) - len(hits),
            num_cached_tokens=len(hits) * self.page_size,
        )

    def add(
        self, seq_id: Hashable, prompt_token_ids: SequenceLike[int] | np.ndarray, extra_key: object = None
    ) -> int:
        """Admit a sequence: reuse cached prefix pages, allocate the rest (all or nothing).

        Returns the number of prompt tokens whose K/V came from the prefix cache; the
        caller computes K/V for positions from there on. Raises OutOfPagesError, changing
        nothing, when FREE + CACHED pages cannot cover the prompt.
        """
        return self._admit(self.plan_add(seq_id, prompt_token_ids, extra_key))

    def _admit(self, plan: AdmissionPlan) -> int:
        """Carry out a plan from `plan_add` (it must still hold: nothing changed since)."""
        pool, tokens, hits = self.pool, plan.tokens, plan.hits
        own = len(plan.revived)  # CACHED pages the prompt hits: not evictable for it
        if plan.num_new_pages > pool.num_available_pages - own:
            need, free, evictable = plan.num_new_pages, pool.num_free_pages, pool.num_cached_pages - own
            mine = f" (+ {own} CACHED that are its own hits)" if own > 1 else ""
            if own == 1:
                mine = " (+ 1 CACHED that is its own hit)"
            raise OutOfPagesError(
                f"prompt of {len(tokens)} tokens needs {count(need, 'new page')}; {free} "
                f"FREE + {evictable} evictable CACHED{mine}",
                (len(tokens), need, free, evictable, own),
            )
        pool.tick()
        pool.touch(hits, plan.seq_id, "prefix_hit")  # before allocating: hits are not victims
        new_pages = pool.get_new_blocks(plan.num_new_pages, plan.seq_id, tokens, len(hits))
        if self._caching:
            full = len(plan.hashes) - len(hits)  # new pages the prompt fills
            pool.cache_full_blocks(new_pages[:full], plan.hashes[len(hits) :], hits[-1] if hits else None)
            pool.record_prefix_lookup(len(tokens), plan.num_cached_tokens)
        self.sequences[plan.seq_id] = Sequence(
            seq_id=plan.seq_id,
            tokens=tokens,
            block_table=hits + new_pages,
            page_size=self.page_size,
            num_prompt_tokens=len(tokens),
            num_cached_tokens=plan.num_cached_tokens,
            num_computed_tokens=plan.num_cached_tokens,  # a prefix hit's K/V are computed already
            extra_key=plan.extra_key,
        )
        pool.publish()
        return plan.num_cached_tokens

    # ---- decode, fork, free ----------------------------------------------------------------

    def append_slot(self, seq_id: Hashable, token_id: int) -> int:
        """Append one token; return its slot. Allocates a page only when the last is full
        (docs/design.md rule 2), and copies the last page first when another block table
        shares it (rule 7)."""
        seq = self.get(seq_id)
        if not self._append(seq, check_token("token_id", token_id)):
            raise OutOfPagesError(
                f"appending to {seq_id!r} needs a page and all {self.pool.num_pages} are ACTIVE"
            )
        return slot_mapping(seq.block_table, self.page_size, len(seq.tokens) - 1)

    def append_slots(self, seq_ids: SequenceLike[Hashable], token_ids: SequenceLike[int]) -> list[int]:
        """`append_slot` for each (seq_id, token_id) pair in turn, each its own operation:
        one decode step of many sequences in one call; their slots.

        Stops at the first pair that needs a page when none is left, raising nothing: fewer
        slots come back than pairs, and nothing changed for that pair or the ones after it
        (the Scheduler preempts and asks again). Every pair is checked before the first
        append, so bad input raises and changes nothing."""
        slots: list[int] = []
        for seq, token_id in zip(*self._check_pairs(seq_ids, token_ids)):
            if not self._append(seq, token_id):
                break
            slots.append(slot_mapping(seq.block_table, self.page_size, len(seq.tokens) - 1))
        return slots

    def append_tokens(self, seq_ids: SequenceLike[Hashable], token_ids: SequenceLike[int]) -> int:
        """`append_slots` without working out the slots: how many pairs were appended. A
        bookkeeping-only decode step never reads its slots (`slot_mapping` gives them)."""
        seqs, tokens = self._check_pairs(seq_ids, token_ids)
        for n, (seq, token_id) in enumerate(zip(seqs, tokens)):
            if not self._append(seq, token_id):
                return n
        return len(seqs)

    def _check_pairs(
        self, seq_ids: SequenceLike[Hashable], token_ids: SequenceLike[int]
    ) -> tuple[list[Sequence], list[int]]:
        """The live sequences and the checked tokens of (seq_id, token_id) pairs: all of them
        checked before anything changes."""
        if len(seq_ids) != len(token_ids):
            raise ValueError(
                f"seq_ids and token_ids must be as long, got {len(seq_ids)} and {len(token_ids)}"
            )
        try:
            seqs = list(map(self.sequences.__getitem__, seq_ids))
        except (KeyError, TypeError):
            seqs = [self.get(seq_id) for seq_id in seq_ids]  # raises, naming the unknown id
        return seqs, check_token_list("token_ids", token_ids)

    def _append(self, seq: Sequence, token_id: int) -> bool:
        """Append a checked token to a live sequence; False (nothing changed) when it needs
        a page and none is left."""
        pool, position = self.pool, len(seq.tokens)
        last_page_full = position % self.page_size == 0
        shared = pool.table.ref_count[seq.block_table[-1]] > 1
        if (last_page_full or shared) and not pool.num_available_pages:
            return False
        pool.tick()
        if last_page_full:
            seq.block_table += pool.get_new_blocks(1, seq.seq_id)
        elif shared:
            self._copy_on_write(seq)
        seq.tokens.append(token_id)
        pool.append_token(seq.block_table[-1], token_id)
        if self._caching and (position + 1) % self.page_size == 0:
            self._cache_last_block(seq)
        pool.publish()
        return True

    def _cache_last_block(self, seq: Sequence) -> None:
        """The sequence's last page just filled: hash it and index it (docs/design.md rule 4)."""
        parent = seq.block_table[-2] if len(seq.block_table) > 1 else None
        parent_hash = self.pool.table.block_hash[parent] if parent is not None else None
        algo = self.pool.config.prefix_caching_hash_algo
        block_hash = hash_block_tokens(parent_hash, seq.tokens[-self.page_size :], seq.extra_key, algo)
        self.pool.cache_full_blocks([seq.block_table[-1]], [block_hash], parent)

    def _copy_on_write(self, seq: Sequence) -> None:
        """`seq` is about to write into its shared last page: give it a copy of its own.

        NOTE: only the last page can be shared and written (earlier pages are full and
        never written again), so only it is ever copied; vLLM v0 made the same decision in
        `cow_block_if_not_appendable`."""
        src = seq.block_table[-1]
        dst = self.pool.get_new_blocks(1, seq.seq_id)[0]
        self.pool.copy_block(src, dst, seq.seq_id)
        self.pool.free_blocks([src], seq.seq_id)  # src keeps its other holders
        seq.block_table[-1] = dst
        self.cow_log.append((src, dst))

    def fork(self, parent_id: Hashable, child_id: Hashable) -> None:
        """Start `child_id` as a copy of `parent_id` sharing all its pages (docs/design.md
        rule 7; no page is taken)."""
        parent = self.get(parent_id)
        check_new("child_id", check_seq_id("child_id", child_id), self.sequences)
        self.pool.tick()
        self.pool.touch(parent.block_table, child_id, "fork")
        self.sequences[child_id] = parent.copy(seq_id=child_id, parent=parent_id)
        self.pool.publish()

    def free(self, seq_id: Hashable) -> None:
        """Finish a sequence: release its pages tail first (docs/design.md rule 6).

        NOTE: the tail page is the least reusable (the longest prefix, least likely to be
        asked for again), so it goes to the eviction policy first and is evicted first;
        vLLM v1's `SingleTypeKVCacheManager.free` passes `reversed(blocks)` for the same
        reason."""
        seq = self.get(seq_id)
        del self.sequences[seq_id]
        self.pool.tick()
        self.pool.free_blocks(reversed(seq.block_table), seq_id)  # tail first
        self.pool.publish()

    def set_computed(self, seq_id: Hashable, num_computed_tokens: int) -> None:
        """Record that K/V of the first `num_computed_tokens` tokens are in the cache."""
        seq = self.get(seq_id)
        seq.num_computed_tokens = check_int("num_computed_tokens", num_computed_tokens, 0, seq.num_tokens)

    # ---- what tests and pictures read (core/observe: a reader may skip them) ---------------

    def snapshot(self) -> PoolSnapshot:
        """The pool's pages and these block tables as plain numpy arrays and tuples
        (`take_snapshot`), for plots and APIs."""
        return take_snapshot(self.pool, self.sequences, self.cow_log)

    def check_invariants(self) -> None:
        """Raise AssertionError naming the first broken rule of docs/design.md
        (`check_invariants` over the pool and these block tables)."""
        check_invariants(self.pool, self.sequences)

    def __repr__(self) -> str:
        return f"SequenceManager(sequences={list(self.sequences)}, pool={self.pool!r})"
