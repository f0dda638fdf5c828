"""check_invariants: every rule of DESIGN.md's page pool, verified from scratch.

Tests call it after every operation (mini-sglang calls its equivalent `check_integrity`).
It recounts everything from the block tables and the pages instead of trusting any
counter: each page in exactly one state; ref counts equal block-table membership; block
tables hold the right number of pages with the sequence's tokens; FREE pages empty;
CACHED pages full, indexed and evictable; index and pages agree; every full page in a
block table carries the chained hash of its tokens; nothing cached when prefix caching is
off. O(num_pages + tokens), hashing included: for tests and debugging, not hot paths.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .hashing import hash_block_tokens
from .lifecycle import STATES
from .page import PageState

if TYPE_CHECKING:
    from .pool import KVCachePool

FREE, ACTIVE, CACHED = PageState.FREE, PageState.ACTIVE, PageState.CACHED


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def check_invariants(pool: KVCachePool) -> None:
    """Raise AssertionError naming the first broken rule of DESIGN.md."""
    holders = [0] * pool.num_pages
    caching = pool.config.enable_prefix_caching
    for seq_id, seq in pool._sequences().items():
        table = seq.block_table
        _require(
            len(table) == -(-seq.num_tokens // pool.page_size),
            f"sequence {seq_id!r}: {len(table)} pages for {seq.num_tokens} tokens",
        )
        _require(len(set(table)) == len(table), f"sequence {seq_id!r}: page twice in table")
        parent = None
        for i, page_id in enumerate(table):
            holders[page_id] += 1
            page = pool._pages[page_id]
            expect = seq.token_ids[i * pool.page_size : (i + 1) * pool.page_size]
            _require(
                page.token_ids == expect,
                f"sequence {seq_id!r} block {i}: page {page_id} holds other tokens",
            )
            if caching and len(expect) == pool.page_size:  # rule 4: full pages are hashed
                parent = hash_block_tokens(parent, expect, seq.extra_key if i == 0 else None)
                _require(
                    page.block_hash == parent,
                    f"sequence {seq_id!r} block {i}: page {page_id}'s hash is not the chain's",
                )
    free_set = set(pool._free)
    _require(len(free_set) == len(pool._free), "free list holds a page twice")
    _require(len(pool.eviction) == len(set(pool.eviction.order())), "eviction order repeats")
    for page in pool._pages:
        pid, state = page.page_id, page.state
        _require(
            page.ref_count == holders[pid],
            f"page {pid}: ref_count {page.ref_count} != {holders[pid]} block tables",
        )
        _require((pid in free_set) == (state is FREE), f"page {pid}: free list vs {state.name}")
        _require(
            (pid in pool.eviction) == (state is CACHED),
            f"page {pid}: eviction set vs {state.name}",
        )
        if state is FREE:
            _require(page.num_tokens == 0 and page.block_hash is None, f"FREE page {pid} not empty")
        elif state is ACTIVE:
            _require(page.ref_count >= 1, f"ACTIVE page {pid} has ref_count 0")
        else:
            _require(page.ref_count == 0, f"CACHED page {pid} has ref_count {page.ref_count}")
            _require(
                page.num_tokens == pool.page_size and pool._index.get(page.block_hash) == pid,
                f"CACHED page {pid} is not full and indexed",
            )
        _require(page.num_tokens <= pool.page_size, f"page {pid} overfull")
        if page.block_hash is not None:
            _require(page.num_tokens == pool.page_size, f"partial page {pid} has a hash")
    for block_hash, pid in pool._index.items():
        page = pool._pages[pid]
        _require(page.block_hash == block_hash, f"index entry for page {pid}: hash differs")
        _require(page.state is not FREE, f"index points at FREE page {pid}")
    if not pool.config.enable_prefix_caching:
        _require(not pool._index and not len(pool.eviction), "prefix caching off but cached")
    _check_lifecycle_states(pool)


def _check_lifecycle_states(pool: KVCachePool) -> None:
    """Every page is in one of the states of the lifecycle table (pagedkv.lifecycle), the
    table the lifecycle diagram is drawn from; its transitions are checked by the tests."""
    for page in pool._pages:
        _require(
            page.state in STATES, f"page {page.page_id}: state {page.state!r} not in the lifecycle table"
        )
