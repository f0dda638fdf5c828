"""check_invariants: every rule of the page pool (docs/design.md), verified from scratch.

Tests call it after every operation; mini-sglang calls its equivalent `check_integrity`.
It recounts everything from the block tables and the pages instead of trusting any
counter: each page in exactly one state; ref counts equal block-table membership (docs/design.md rule 3);
block tables hold the right number of pages with the sequence's tokens (docs/design.md rule 2); FREE
pages empty; CACHED pages full, indexed and evictable (docs/design.md rule 6); index and pages agree;
every full page in a block table carries the chained hash of its tokens (docs/design.md rule 4); nothing
cached when prefix caching is off.

It takes the pool and the sequence manager as two arguments and reads only their public
fields (`pool.table`, `pool.free_queue`, `pool.prefix_index`, `pool.eviction`,
`seqs.sequences`). O(num_pages + tokens), hashing included: for tests and debugging, not
hot paths.

Leaves out: K/V contents (whether the cached K/V are the right numbers is what the
attention and generation oracles test).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING

from pagedkv.core.hashing import hash_block_tokens
from pagedkv.core.page import PageState
from pagedkv.core.slot_mapping import num_blocks

if TYPE_CHECKING:
    from pagedkv.core.pool import KVCachePool
    from pagedkv.core.slot_mapping import Sequence

FREE, CACHED = PageState.FREE, PageState.CACHED


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def check_invariants(pool: KVCachePool, sequences: Mapping[Hashable, Sequence] | None = None) -> None:
    """Raise AssertionError naming the first broken rule of docs/design.md.

    `sequences` (seq id -> Sequence) are every block table holding the pool's pages (None: no
    sequences)."""
    holders = _check_block_tables(pool, sequences or {})
    _check_pages(pool, holders)
    for block_hash, pid in pool.prefix_index.items():
        _require(pool.table.block_hash[pid] == block_hash, f"index entry for page {pid}: hash differs")
        _require(pool.table.state(pid) is not FREE, f"index points at FREE page {pid}")
    if not pool.config.enable_prefix_caching:
        _require(not len(pool.prefix_index) and not len(pool.eviction), "prefix caching off but cached")


def _check_block_tables(pool: KVCachePool, sequences: Mapping[Hashable, Sequence]) -> list[int]:
    """docs/design.md rules 2 and 4 for every block table; returns the number of tables holding each page."""
    holders = [0] * pool.num_pages
    size, caching, algo = (
        pool.page_size,
        pool.config.enable_prefix_caching,
        pool.config.prefix_caching_hash_algo,
    )
    table = pool.table
    for seq_id, seq in sequences.items():
        block_table, token_ids = seq.block_table, seq.token_ids
        _require(
            len(block_table) == num_blocks(seq.num_tokens, size),
            f"sequence {seq_id!r}: {len(block_table)} pages for {seq.num_tokens} tokens "
            "(docs/design.md rule 2)",
        )
        _require(len(set(block_table)) == len(block_table), f"sequence {seq_id!r}: page twice in table")
        parent = None
        for i, page_id in enumerate(block_table):
            holders[page_id] += 1
            expect = token_ids[i * size : (i + 1) * size]
            _require(
                table.token_ids(page_id) == expect,
                f"sequence {seq_id!r} block {i}: page {page_id} holds other tokens",
            )
            if caching and len(expect) == size:  # docs/design.md rule 4: full pages are hashed
                parent = hash_block_tokens(parent, expect, seq.extra_key if i == 0 else None, algo)
                _require(
                    table.block_hash[page_id] == parent,
                    f"sequence {seq_id!r} block {i}: page {page_id}'s hash is not the chain's "
                    "(docs/design.md rule 4)",
                )
    return holders


def _check_pages(pool: KVCachePool, holders: list[int]) -> None:
    """Each page in exactly one state, with the ref count its holders give it (docs/design.md rule 3)."""
    free = pool.free_queue.page_ids()
    free_set = set(free)
    _require(len(free) == len(pool.free_queue), "free queue counts a page twice")
    _require(len(pool.eviction) == len(set(pool.eviction.order())), "eviction order repeats")
    for page in pool.pages:
        pid, state = page.page_id, page.state
        _require(
            page.ref_count == holders[pid],
            f"page {pid}: ref_count {page.ref_count} != {holders[pid]} block tables (docs/design.md rule 3)",
        )
        _require((pid in free_set) == (state is FREE), f"page {pid}: free queue vs {state.name}")
        _require(
            (pid in pool.eviction) == (state is CACHED),
            f"page {pid}: eviction set vs {state.name}",
        )
        # (A state follows from the ref count and the free flag, page.py.)
        if state is FREE:
            _require(
                page.block_hash is None
                and pool.table.token_data[pid] == b""
                and not pool.table.token_block[pid],
                f"FREE page {pid} keeps tokens or a block hash",
            )
        elif state is CACHED:
            _require(
                page.num_tokens == pool.page_size and pool.prefix_index.holds_page(pid),
                f"CACHED page {pid} is not full and indexed (docs/design.md rule 6)",
            )
        if page.block_hash is not None:
            _require(
                page.num_tokens == pool.page_size, f"partial page {pid} has a hash (docs/design.md rule 4)"
            )
