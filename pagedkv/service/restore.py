"""Restoring a pool to a checkpoint's page state.

Every verb of `KVCachePool` changes a few pages on behalf of one block table; `restore_pool`
rewrites the state of every page at once, outside any request: it loads page metadata
saved by a checkpoint into a fresh pool (service/checkpoint.py calls it). vLLM keeps no
checkpoints: a restarted engine starts with an empty cache.

Leaves out: restoring a radix-tree index (`prefix_index="radix"`), whose tree is not
rebuilt from page metadata, and K/V values (only page metadata is loaded; the K/V store
is whatever `kv_cache` the pool was built over).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pagedkv.core.hashing import token_bytes
from pagedkv.core.page import PageState

if TYPE_CHECKING:
    from pagedkv.core.pool import KVCachePool

FREE = PageState.FREE


def restore_pool(
    pool: KVCachePool,
    pages: list[tuple],
    release_order: list[int],
    stats: dict[str, int],
    clock: int,
) -> None:
    """Load page metadata saved from a pool with the same config (checkpoint recovery).

    pages[i] = (state, ref_count, token_ids, block_hash, indexed, last_access) of page i;
    release_order = the CACHED page ids in the order they turned CACHED, oldest first
    (what the eviction policy was given; its order() follows from it). Only a fresh pool
    (clock 0, every page FREE) accepts it; the caller restores the sequences next and then calls
    check_invariants()."""
    if pool.config.prefix_index != "hash":  # a tree is not rebuilt from page metadata
        raise ValueError(
            f"restore rebuilds a prefix_index='hash' pool; this one is {pool.config.prefix_index!r}"
        )
    if pool.clock or len(pool.free_queue) != pool.num_pages:
        raise ValueError("restore needs a fresh pool (clock 0, every page FREE)")
    if len(pages) != pool.num_pages:
        raise ValueError(f"pages must describe {pool.num_pages} pages, got {len(pages)}")
    table = pool.table
    for pid, (_, ref_count, token_ids, block_hash, _, last_access) in enumerate(pages):
        table.ref_count[pid] = ref_count
        table.last_access[pid], table.block_hash[pid] = last_access, block_hash
        table.token_data[pid], table.token_block[pid] = token_bytes(token_ids), 0
    pool.free_queue.reset(pid for pid, saved in enumerate(pages) if PageState(saved[0]) is FREE)
    index = {saved[3]: pid for pid, saved in enumerate(pages) if saved[4] and saved[3]}
    pool.prefix_index.insert_all(list(index.values()), list(index))
    pool.eviction.add_all(list(release_order))
    pool.stats = type(pool.stats)(**stats)
    pool.clock = clock
