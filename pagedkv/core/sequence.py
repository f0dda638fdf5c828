"""Sequences and their block tables: admission with prefix lookup, append, fork, free.

`SequenceManager` is vLLM v1's `KVCacheManager` (with the v0 block manager's fork and
copy-on-write, which v1 dropped when it stopped sharing partial blocks): it turns "this
sequence has these tokens" into "these pages, in this order", asking the pool for pages
only when the last one is full.

- `add` hashes the prompt's full pages, reuses the longest cached prefix (never the page
  holding the last prompt token: that token must run to produce logits), and allocates
  the rest all-or-nothing.
- `append_slot` finds the slot for one new token: the last page if it has room and is not
  shared, a copy of it if it is shared (copy-on-write), a new page if it is full. A page
  that fills is hashed and indexed at once.
- `fork` shares every page of the parent; `free` releases pages tail first, so the
  deepest page of a finished sequence is the first of its pages to be evicted.

The contract with whoever computes K/V (TinyLM, the Scheduler, the service): a page is
indexed the moment it fills, like vLLM v1 caches blocks as soon as they are scheduled, so
the K/V of every admitted or appended token must be computed (`TinyLM.forward`) before
the sequence is freed and before another sequence is admitted that could hit the page.
`TinyLM.generate`, the Scheduler and the service all compute in the same step. Pure
bookkeeping (benchmarks, the state-machine tests) never reads K/V, so it may skip that.

The manager decides and the pool acts: every page changes through the pool's public
verbs (`get_new_blocks`, `touch`, `free_blocks`, `cache_full_blocks`, `copy_block`, ...),
between `pool.tick()` and `pool.publish()`, together with the block-table change.

Leaves out: sliding-window or cross-attention block tables; admission takes all of a
prompt's pages at once (vLLM v1 allocates them per scheduled chunk).
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable
from collections.abc import Sequence as SequenceLike

import numpy as np

from pagedkv.core.hashing import chain_hashes, encode_extra_key, hash_block_tokens
from pagedkv.core.observe.invariants import check_invariants
from pagedkv.core.observe.snapshot import PoolSnapshot, take_snapshot
from pagedkv.core.plumbing.validation import (
    MAX_TOKEN_ID,
    UnknownSequenceError,
    check_instance,
    check_int,
    check_known,
    check_new,
    check_seq_id,
    check_token,
    check_token_array,
)
from pagedkv.core.pool import KVCachePool, OutOfPagesError
from pagedkv.core.sequence_data import AdmissionPlan, Sequence
from pagedkv.core.slot_mapping import num_blocks, slot_mapping

__all__ = ["AdmissionPlan", "Sequence", "SequenceManager", "UnknownSequenceError"]


class SequenceManager:
    """Block tables for live sequences over one `KVCachePool`."""

    def __init__(self, pool: KVCachePool) -> None:
        check_instance("pool", pool, KVCachePool)
        self.pool = pool
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
        if not (type(seq_id) is int or type(seq_id) is str and seq_id) or seq_id in self.sequences:
            check_new("seq_id", check_seq_id("seq_id", seq_id), self.sequences)  # raises, naming it
        tokens, data = check_token_array("prompt_token_ids", prompt_token_ids)
        if extra_key is not None:
            encode_extra_key(extra_key)  # validates its type
        pool, size = self.pool, self.page_size
        hashes: list[bytes] = []
        hits: list[int] = []
        revived: list[int] = []
        if self._caching:
            hashes = chain_hashes(data, size, extra_key, pool.config.prefix_caching_hash_algo)
            # The page holding the last prompt token is never a hit: that token must run.
            hits = pool.find_longest_cache_hit(hashes[: (len(tokens) - 1) // size], tokens)
            ref_count = pool.table.ref_count
            revived = [p for p in hits if not ref_count[p]]  # unheld hits are CACHED
        new_pages = num_blocks(len(tokens), size) - len(hits)
        return AdmissionPlan._make(
            (seq_id, tokens, extra_key, hashes, hits, revived, new_pages, len(hits) * size)
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
        pool, tokens, hits, num_hits = self.pool, plan.tokens, plan.hits, len(plan.hits)
        needed = plan.num_new_pages
        if needed > len(pool.free_queue) and needed > pool.num_available_pages - len(plan.revived):
            raise OutOfPagesError(
                f"prompt of {len(tokens)} tokens needs {plan.num_new_pages} new pages; "
                f"{pool.num_free_pages} FREE + {pool.num_cached_pages - len(plan.revived)} "
                "evictable CACHED"
            )
        pool.tick()
        if hits:
            pool.touch(hits, plan.seq_id, "prefix_hit")  # before allocating: hits are not victims
        new_pages = pool.get_new_blocks(needed, plan.seq_id, tokens, num_hits)
        if self._caching:
            pool.cache_full_blocks(
                new_pages[: len(plan.hashes) - num_hits], plan.hashes[num_hits:], hits[-1] if hits else None
            )
            pool.record_prefix_lookup(len(tokens), plan.num_cached_tokens)
        self.sequences[plan.seq_id] = Sequence(
            plan.seq_id,
            tokens,
            hits + new_pages if hits else new_pages,
            len(tokens),
            plan.num_cached_tokens,
            plan.num_cached_tokens,
            plan.extra_key,
            None,
            self.page_size,
        )
        pool.publish()
        return plan.num_cached_tokens

    # ---- decode, fork, free ----------------------------------------------------------------

    def append_slot(self, seq_id: Hashable, token_id: int) -> int:
        """Append one token; return its slot. Allocates a page only when the last is full
        (docs/design.md rule 2), and copies the last page first when another block table
        shares it (rule 7)."""
        seq = self.sequences.get(seq_id) if type(seq_id) is int or type(seq_id) is str else None
        if seq is None:
            seq = self.get(seq_id)  # raises UnknownSequenceError (or TypeError) with the usual message
        if type(token_id) is not int or not 0 <= token_id <= MAX_TOKEN_ID:
            token_id = check_token("token_id", token_id)
        slot = self._append(seq, token_id)
        if slot is None:
            raise OutOfPagesError(
                f"appending to {seq_id!r} needs a page and all {self.pool.num_pages} are ACTIVE"
            )
        return slot

    def append_slots(self, seq_ids: SequenceLike[Hashable], token_ids: SequenceLike[int]) -> list[int]:
        """`append_slot` for each (seq_id, token_id) pair in turn, each its own operation:
        one decode step of many sequences in one call; their slots.

        Stops at the first pair that needs a page when none is left, raising nothing: fewer
        slots come back than pairs, and nothing changed for that pair or the ones after it
        (the Scheduler preempts and asks again). Every pair is checked before the first
        append, so bad input raises and changes nothing."""
        if len(seq_ids) != len(token_ids):
            raise ValueError(
                f"seq_ids and token_ids must be as long, got {len(seq_ids)} and {len(token_ids)}"
            )
        try:
            found = list(map(self.sequences.get, seq_ids))
        except TypeError:  # an unhashable id: not a live sequence either
            found = [None]
        if None in found:  # raises UnknownSequenceError naming the first unknown id
            found = [self.get(s) for s in seq_ids]
        seqs: list[Sequence] = found  # type: ignore[assignment]  # no None is left
        if not all(type(t) is int and 0 <= t <= MAX_TOKEN_ID for t in token_ids):
            token_ids = [check_token(f"token_ids[{i}]", t) for i, t in enumerate(token_ids)]
        pool, size, ref_count = self.pool, self.page_size, self.pool.table.ref_count
        slots: list[int] = []
        for seq, token_id in zip(seqs, token_ids):
            tokens, block_table = seq.tokens, seq.block_table
            offset, page_id = len(tokens) % size, block_table[-1]
            if offset and offset != size - 1 and ref_count[page_id] == 1:
                # The usual decode: room in an unshared last page that this token does not fill.
                pool.tick()
                tokens.append(token_id)
                pool.append_token(page_id, tokens, len(block_table) - 1)
                pool.publish()
                slots.append(page_id * size + offset)  # slot_mapping(block_table, size, position)
                continue
            slot = self._append(seq, token_id)
            if slot is None:
                break
            slots.append(slot)
        return slots

    def _append(self, seq: Sequence, token_id: int) -> int | None:
        """Append a checked token to a live sequence; its slot, or None (nothing changed)
        when it needs a page and none is left."""
        pool, size, tokens = self.pool, self.page_size, seq.tokens
        position = len(tokens)
        offset = position % size
        last = seq.block_table[-1]
        shared = pool.table.ref_count[last] > 1
        if (offset == 0 or shared) and pool.num_available_pages == 0:
            return None
        pool.tick()
        if offset == 0:
            seq.block_table.append(pool.get_new_blocks(1, seq.seq_id)[0])
        elif shared:
            self._copy_on_write(seq, last)
        tokens.append(token_id)
        page_id, block = seq.block_table[-1], len(seq.block_table) - 1
        pool.append_token(page_id, tokens, block)
        if offset == size - 1 and self._caching:  # the page is now full
            parent = pool.table.block_hash[seq.block_table[block - 1]] if block else None
            block_hash = hash_block_tokens(
                parent, tokens[block * size :], seq.extra_key, pool.config.prefix_caching_hash_algo
            )
            pool.cache_full_blocks([page_id], [block_hash], seq.block_table[block - 1] if block else None)
        pool.publish()
        return slot_mapping(seq.block_table, size, position)

    def _copy_on_write(self, seq: Sequence, src: int) -> None:
        """`seq` is about to write into its shared last page: give it a copy of its own.

        NOTE: only the last page can be shared and written (earlier pages are full and
        never written again), so only it is ever copied; vLLM v0 made the same decision in
        `cow_block_if_not_appendable`."""
        dst = self.pool.get_new_blocks(1, seq.seq_id)[0]
        self.pool.copy_block(src, dst, seq.seq_id)
        self.pool.free_blocks([src], seq.seq_id)  # src keeps its other holders
        seq.block_table[-1] = dst
        self.cow_log.append((src, dst))

    def fork(self, parent_id: Hashable, child_id: Hashable) -> None:
        """Start `child_id` as a copy of `parent_id` sharing all its pages (docs/design.md rule 7; no page
        is taken)."""
        parent = self.get(parent_id)
        check_new("child_id", check_seq_id("child_id", child_id), self.sequences)
        self.pool.tick()
        self.pool.touch(parent.block_table, child_id, "fork")
        self.sequences[child_id] = Sequence(
            child_id,
            array("q", parent.tokens),
            list(parent.block_table),
            parent.num_prompt_tokens,
            parent.num_cached_tokens,
            parent.num_computed_tokens,
            parent.extra_key,
            parent_id,
            self.page_size,
        )
        self.pool.publish()

    def free(self, seq_id: Hashable) -> None:
        """Finish a sequence: release its pages tail first (docs/design.md rule 6).

        NOTE: the tail page is the least reusable (the longest prefix, least likely to be
        asked for again), so it goes to the eviction policy first and is evicted first;
        vLLM v1's `SingleTypeKVCacheManager.free` passes `reversed(blocks)` for the same
        reason."""
        seq = self.sequences.pop(seq_id, None) if type(seq_id) is int or type(seq_id) is str else None
        if seq is None:
            seq = self.get(seq_id)  # raises UnknownSequenceError with the usual message
            del self.sequences[seq_id]
        self.pool.tick()
        self.pool.free_blocks(seq.block_table[::-1], seq_id)  # tail first
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
