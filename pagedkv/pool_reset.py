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

from typing import TYPE_CHECKING

from .page import PageState
from .snapshot import PoolStats

if TYPE_CHECKING:
    from .pool import KVCachePool
    from .sequence import SequenceManager

FREE = PageState.FREE


def reset_prefix_cache(pool: KVCachePool) -> bool:
    """Turn every CACHED page FREE and empty the index; refused (False) while any page is ACTIVE."""
    if pool.num_active_pages:
        return False
    pool.tick()
    cached = pool.eviction.order()
    for page_id in cached:
        page = pool.pages[page_id]
        page.state = FREE
        page.token_ids = []
        page.block_hash = None
    pool.free_queue.extend(list(cached))
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
    for page, (state, ref_count, token_ids, block_hash, _, last_access) in zip(pool.pages, pages):
        page.state, page.ref_count, page.last_access = PageState(state), ref_count, last_access
        page.token_ids, page.block_hash = list(token_ids), block_hash
    pool.free_queue.reset(p.page_id for p in pool.pages if p.state is FREE)
    index = {p.block_hash: p.page_id for p, saved in zip(pool.pages, pages) if saved[4] and p.block_hash}
    pool.prefix_index.insert_all(list(index.values()), list(index))
    pool.eviction.add_all(list(release_order))
    pool.stats = PoolStats(**stats)
    pool.clock = clock
