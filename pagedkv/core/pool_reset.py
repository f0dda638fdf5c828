"""Resetting a pool wholesale: to an empty prefix cache, or to a checkpoint's page state.

Every other verb of `KVCachePool` changes a few pages on behalf of one block table; these
two rewrite the state of every page at once, outside any sequence's request:

- `reset_prefix_cache(pool)` turns every CACHED page FREE and empties the prefix index,
  refusing while any page is ACTIVE (vLLM v1's `BlockPool.reset_prefix_cache`, which also
  refuses while blocks are in use).
- `restore_pool(pool, manager, ...)` loads page metadata saved by a checkpoint into a fresh
  pool (service/checkpoint.py calls it through `KVCachePool.restore`). vLLM keeps no
  checkpoints: a restarted engine starts with an empty cache.

Both are also the pool's methods `reset_prefix_cache()` and `restore(...)`.

Leaves out: restoring a radix-tree index (`prefix_index="radix"`), whose tree is not
rebuilt from page metadata, and K/V values (only page metadata is loaded; the K/V store
is whatever `kv_cache` the pool was built over).
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING

from pagedkv.core.page import PageState
from pagedkv.core.support.snapshot import PoolStats

if TYPE_CHECKING:
    from pagedkv.core.pool import KVCachePool
    from pagedkv.core.sequence import SequenceManager

FREE = PageState.FREE


def reset_prefix_cache(pool: KVCachePool) -> bool:
    """Turn every CACHED page FREE and empty the index; refused (False) while any page is ACTIVE."""
    if pool.num_active_pages:
        return False
    pool.tick()
    cached = pool.eviction.order()
    pool.table.empty(cached)
    pool.free_queue.extend(cached)
    for page_id in cached:
        pool.events.emit(pool.clock, "reset", page_id)
    pool.eviction.clear()
    pool.prefix_index.clear()
    pool.publish()
    return True


def restore_pool(
    pool: KVCachePool,
    manager: SequenceManager | None,
    pages: list[tuple],
    release_order: list[int],
    stats: dict[str, int],
    clock: int,
) -> None:
    """Load page metadata saved from a pool with the same config (checkpoint recovery).

    pages[i] = (state, ref_count, token_ids, block_hash, indexed, last_access) of page i;
    release_order = the CACHED page ids in the order they turned CACHED, oldest first
    (what the eviction policy was given; its order() follows from it). Only a fresh pool
    (clock 0, every page FREE, no sequences in `manager`, the pool's SequenceManager)
    accepts it; the caller restores the manager's sequences next and then calls
    check_invariants()."""
    if pool.config.prefix_index != "hash":  # a tree is not rebuilt from page metadata
        raise ValueError(
            f"restore rebuilds a prefix_index='hash' pool; this one is {pool.config.prefix_index!r}"
        )
    if pool.clock or manager and len(manager) or len(pool.free_queue) != pool.num_pages:
        raise ValueError("restore needs a fresh pool (clock 0, every page FREE, no sequences)")
    if len(pages) != pool.num_pages:
        raise ValueError(f"pages must describe {pool.num_pages} pages, got {len(pages)}")
    table = pool.table
    for pid, (_, ref_count, token_ids, block_hash, _, last_access) in enumerate(pages):
        table.ref_count[pid] = ref_count
        table.last_access[pid], table.block_hash[pid] = last_access, block_hash
        table.token_source[pid] = array("q", token_ids) if token_ids else None
        table.token_block[pid] = 0
    pool.free_queue.reset(pid for pid, saved in enumerate(pages) if PageState(saved[0]) is FREE)
    index = {saved[3]: pid for pid, saved in enumerate(pages) if saved[4] and saved[3]}
    pool.prefix_index.insert_all(list(index.values()), list(index))
    pool.eviction.add_all(list(release_order))
    pool.stats = PoolStats(**stats)
    pool.clock = clock
