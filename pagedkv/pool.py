"""KVCachePool: the physical pages, their K/V storage, and the verbs that change them.

This is vLLM v1's `BlockPool` (with the K/V tensors its model runner allocates). It owns
the K/V store (one preallocated array for all layers), a `Page` per physical page, the
FREE pages (free_queue.py), the prefix index (prefix_index.py), the eviction policy over
CACHED pages (eviction.py), counters, a logical clock and the page events (events.py).
It changes them only through public verbs named as in vLLM: `get_new_blocks`, `touch`,
`free_blocks`, `cache_full_blocks`, `get_cached_block`, `find_longest_cache_hit`, plus
`fill_blocks` / `append_token` (record token ids, which vLLM's blocks do not keep) and
`copy_block` (the copy of a copy-on-write). The pool knows nothing about sequences: the
`SequenceManager` decides what to call, together with the block-table change that
justifies it, between `tick()` and `publish()`.

Faithful to vLLM: LRU eviction in release order; CACHED pages count as free in `usage`
(`kv_cache_usage_perc`); blocks are indexed when they fill, before their K/V are
computed, on the promise that the step that filled them computes them (`SequenceManager`).
Deliberately different (docs/design.md, "Deliberately different"): FREE pages are used
before any CACHED page is evicted; one page per hash; the K/V of all layers are stacked
into one array [layers, 2, ...] so the store can be a single file-backed memmap
(`kv_cache[layer]` is vLLM's per-layer layout).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from .config import CacheConfig
from .events import Event, EventStream
from .eviction import EvictionPolicy, make_eviction_policy
from .free_queue import FreeQueue
from .invariants import check_invariants
from .page import Page, PageState
from .pool_reset import reset_prefix_cache, restore_pool
from .prefix_index import PrefixIndex
from .radix_index import RadixPrefixIndex
from .snapshot import PoolSnapshot, PoolStats, take_snapshot
from .validation import check_array, check_instance, check_int

if TYPE_CHECKING:
    from .sequence import SequenceManager

FREE, ACTIVE, CACHED = PageState.FREE, PageState.ACTIVE, PageState.CACHED


class OutOfPagesError(MemoryError):
    """The pool cannot provide the pages an operation needs; nothing was changed."""


class KVCachePool:
    """Fixed-size pages of K/V storage with ref counts, prefix index and eviction."""

    def __init__(self, config: CacheConfig, kv_cache: np.ndarray | None = None) -> None:
        check_instance("config", config, CacheConfig)
        if kv_cache is None:
            kv_cache = np.zeros(config.kv_shape, dtype=config.dtype)
        check_array("kv_cache", kv_cache, config.kv_shape, config.dtype, contiguous=True)
        self.config = config
        self.page_size = config.page_size
        self.num_pages = config.num_pages
        self.kv_cache = kv_cache  # [layers, 2, num_pages, page_size, kv_heads, head_dim]
        # page id -> Page. Read it freely; change pages only through the verbs below.
        self.pages: tuple[Page, ...] = tuple(Page(pid, kv_cache) for pid in range(config.num_pages))
        self.free_queue = FreeQueue(range(config.num_pages))
        self.prefix_index: PrefixIndex | RadixPrefixIndex
        self.eviction: EvictionPolicy
        if config.prefix_index == "radix":  # SGLang's tree and its leaf-first LRU
            tree_index = RadixPrefixIndex(self.pages, config.page_size)
            self.prefix_index, self.eviction = tree_index, tree_index.eviction_policy()
        else:
            self.prefix_index = PrefixIndex(self.pages, config.page_size)
            self.eviction = make_eviction_policy(config.eviction_policy)
        attach = getattr(self.eviction, "attach", None)  # optional: a learner's policy may not have it
        if attach is not None:
            attach(config.num_pages, self._content_key)
        self.stats = PoolStats()
        self.clock = 0  # logical: one tick per successful operation
        self.events = EventStream()
        # NOTE: the only link to sequences, read by `snapshot()` and `check_invariants()`
        # alone (they describe block tables too); no verb of the pool looks at it.
        self._manager: SequenceManager | None = None

    # ---- read-only queries -------------------------------------------------------------

    def page(self, page_id: int) -> Page:
        """The metadata of one page (do not mutate it)."""
        return self.pages[check_int("page_id", page_id, 0, self.num_pages - 1)]

    def ref_count(self, page_id: int) -> int:
        """How many block tables hold the page."""
        return self.page(page_id).ref_count

    @property
    def num_free_pages(self) -> int:
        """FREE pages (empty, on the free queue)."""
        return len(self.free_queue)

    @property
    def num_cached_pages(self) -> int:
        """CACHED pages: unreferenced, holding a reusable prefix, evictable."""
        return len(self.eviction)

    @property
    def num_active_pages(self) -> int:
        """ACTIVE pages: held by at least one block table."""
        return self.num_pages - len(self.free_queue) - len(self.eviction)

    @property
    def num_available_pages(self) -> int:
        """Pages an allocation can draw on: FREE + CACHED."""
        return len(self.free_queue) + len(self.eviction)

    @property
    def usage(self) -> float:
        """ACTIVE pages / num_pages (vLLM's kv_cache_usage_perc: CACHED counts as free)."""
        return self.num_active_pages / self.num_pages

    @property
    def token_usage(self) -> float:
        """Token slots filled in ACTIVE pages / (num_pages * page_size)."""
        filled = sum(p.num_tokens for p in self.pages if p.state is ACTIVE)
        return filled / self.config.num_slots

    def get_cached_block(self, block_hash: bytes) -> int | None:
        """The page id indexed under a block hash, or None (vLLM: `get_cached_block`)."""
        return self.prefix_index.get(block_hash)

    lookup = get_cached_block  # the name notebooks use

    def find_longest_cache_hit(self, block_hashes: Sequence[bytes], token_ids: Sequence[int]) -> list[int]:
        """Pages holding the longest verified prefix of a prompt's block hashes (docs/design.md rule 5)."""
        return self.prefix_index.find_longest_cache_hit(block_hashes, token_ids)

    def add_listener(self, callback: Callable[[Event], None]) -> None:
        """Call `callback(event)` for every page event from now on (events.py)."""
        self.events.add_listener(callback)

    def remove_listener(self, callback: Callable[[Event], None]) -> None:
        """Stop calling `callback` (ValueError if it was never added)."""
        self.events.remove_listener(callback)

    def peek_allocation(self, n: int, revived: Iterable[int] = ()) -> tuple[list[int], list[int]]:
        """The pages `get_new_blocks(n)` would take now, changing nothing: (FREE page ids,
        lowest first; CACHED page ids it would evict, next victim first).

        `revived` names CACHED pages a prefix hit takes back before allocating (they are not
        victims). A write-ahead log records these pages before the allocation happens."""
        n = check_int("n", n, 0)
        from_free = min(n, len(self.free_queue))
        victims: list[int] = []
        if n > from_free:
            keep = set(revived)
            victims = [p for p in self.eviction.order() if p not in keep][: n - from_free]
            if len(victims) < n - from_free:
                raise OutOfPagesError(
                    f"need {n} pages, only {len(self.free_queue)} FREE + "
                    f"{len(self.eviction) - len(keep)} evictable CACHED of {self.num_pages}"
                )
        return self.free_queue.peek_n(from_free), victims

    # ---- one operation: tick, change pages, publish ----------------------------------------

    def tick(self) -> int:
        """Start an operation: advance the logical clock (docs/design.md rule 8) and return it."""
        self.clock += 1
        return self.clock

    def publish(self) -> None:
        """End an operation: deliver its events, in order (listeners never see a pool
        half changed)."""
        self.events.publish()

    def get_new_blocks(self, num_blocks: int, seq_id: Hashable | None = None) -> list[int]:
        """Hand out writable pages, ref count 1: FREE ones lowest id first, then the eviction
        policy's victims (docs/design.md rule 1). Raises OutOfPagesError, changing nothing, when FREE +
        CACHED pages are too few."""
        free, pages = self.free_queue, self.pages
        if num_blocks > len(free) + len(self.eviction):
            raise OutOfPagesError(
                f"need {num_blocks} pages, only {len(free)} FREE + {len(self.eviction)} CACHED "
                f"of {self.num_pages} (the rest are ACTIVE)"
            )
        from_free = min(num_blocks, len(free))
        page_ids = free.popleft_n(from_free)
        if num_blocks > from_free:
            page_ids += self._evict(num_blocks - from_free, seq_id)
        clock = self.clock
        for page_id in page_ids:
            page = pages[page_id]
            page.state = ACTIVE
            page.ref_count = 1
            page.last_access = clock
        self.stats.allocations += num_blocks
        if self.events.listeners:
            for page_id in page_ids:
                self.events.emit(self.clock, "allocate", page_id, seq_id)
        return page_ids

    def touch(
        self, page_ids: Iterable[int], seq_id: Hashable | None = None, kind: str = "prefix_hit"
    ) -> None:
        """One more block table holds each page (a prefix hit, or `kind="fork"`); a CACHED
        page leaves the eviction policy and turns ACTIVE (docs/design.md rule 5)."""
        pages, eviction, clock = self.pages, self.eviction, self.clock
        for page_id in page_ids:
            page = pages[page_id]
            if page.state is CACHED:
                eviction.remove(page_id)
                page.state = ACTIVE
            page.ref_count += 1
            page.last_access = clock
            if self.events.listeners:
                self.events.emit(self.clock, kind, page_id, seq_id)

    def free_blocks(self, ordered_page_ids: Iterable[int], seq_id: Hashable | None = None) -> None:
        """One fewer block table holds each page. Pages nobody holds any more turn CACHED
        (full and indexed) or FREE; CACHED ones join the eviction order in the order given,
        so the first page given is evicted first (docs/design.md rule 6)."""
        pages, clock, listeners = self.pages, self.clock, self.events.listeners
        index = self.prefix_index.hash_to_page
        cached, freed = [], []
        for page_id in ordered_page_ids:
            page = pages[page_id]
            page.last_access = clock
            page.ref_count -= 1
            if page.ref_count:
                continue
            block_hash = page.block_hash
            if block_hash is not None and index.get(block_hash) == page_id:
                page.state = CACHED
                cached.append(page_id)
            else:
                page.state = FREE
                page.token_ids = []
                page.block_hash = None
                freed.append(page_id)
            if listeners:
                self.events.emit(clock, "cache" if page.state is CACHED else "free", page_id, seq_id)
        self.free_queue.extend(freed)
        self.eviction.add_all(cached)

    def fill_blocks(self, page_ids: Sequence[int], token_ids: list[int], first_block: int) -> None:
        """Record a prompt's tokens in freshly allocated pages: page_ids[i] holds logical
        block first_block + i."""
        pages, size = self.pages, self.page_size
        for block, page_id in enumerate(page_ids, first_block):
            pages[page_id].token_ids = token_ids[block * size : (block + 1) * size]

    def append_token(self, page_id: int, token_id: int) -> None:
        """Record one more token in a page that has room and that one block table holds."""
        page = self.pages[page_id]
        page.token_ids.append(token_id)
        page.last_access = self.clock

    def cache_full_blocks(
        self, page_ids: Sequence[int], block_hashes: Sequence[bytes], parent: int | None = None
    ) -> None:
        """Full pages get their block hashes and enter the prefix index; a hash already
        indexed keeps its page (docs/design.md rule 4 and "Duplicate full pages"). `parent`
        is the page of the block before page_ids[0] (None for a prompt's first block): a
        radix tree needs it, a chained hash names its parent already."""
        self.prefix_index.insert_all(page_ids, block_hashes, parent)

    def copy_block(self, src: int, dst: int, seq_id: Hashable | None = None) -> None:
        """The copy of a copy-on-write: dst (fresh, from `get_new_blocks`) gets src's K/V
        slots and token ids. The caller releases its hold on src itself (docs/design.md rule 7)."""
        src_page, dst_page = self.pages[src], self.pages[dst]
        n = src_page.num_tokens
        dst_page.keys[:, :n] = src_page.keys[:, :n]
        dst_page.values[:, :n] = src_page.values[:, :n]
        dst_page.token_ids = list(src_page.token_ids)
        self.stats.cow_copies += 1
        self.events.emit(self.clock, "cow", dst, seq_id, f"copied from page {src}")

    def record_prefix_lookup(self, num_queried_tokens: int, num_hit_tokens: int) -> None:
        """Count one admission's prefix lookup (vLLM: `PrefixCacheStats` queries and hits)."""
        self.stats.prefix_queries += num_queried_tokens
        self.stats.prefix_hits += num_hit_tokens

    def _evict(self, n: int, seq_id: Hashable | None) -> list[int]:
        """Reclaim the next n victims of the eviction policy: their hashes leave the index."""
        pages = self.pages
        victims = self.eviction.pop_victims(n)
        self.prefix_index.remove_all(victims)
        for page_id in victims:
            pages[page_id].token_ids = []
        self.stats.evictions += n
        if self.events.listeners:
            for page_id in victims:
                self.events.emit(self.clock, "evict", page_id, seq_id)
        return victims

    def _content_key(self, page_id: int) -> bytes | None:
        return self.pages[page_id].block_hash

    # ---- whole-pool operations (pool_reset.py) ----------------------------------------------

    def reset_prefix_cache(self) -> bool:
        """Turn every CACHED page FREE and empty the index; refused (False) while any page is ACTIVE."""
        return reset_prefix_cache(self)

    def restore(
        self, pages: list[tuple], release_order: list[int], stats: dict[str, int], clock: int
    ) -> None:
        """Load page metadata saved from a pool with the same config into this fresh pool
        (checkpoint recovery; `pool_reset.restore_pool` says what `pages` holds)."""
        restore_pool(self, self._manager, pages, release_order, stats, clock)

    # ---- the sequences' view: snapshot and invariants describe block tables too ------------
    def attach_manager(self, manager: SequenceManager) -> None:
        """Name the one SequenceManager whose block tables `snapshot()` and
        `check_invariants()` describe (its constructor calls this)."""
        if self._manager is not None:
            raise ValueError("pool already has a SequenceManager; create one manager per pool")
        self._manager = manager

    def check_invariants(self) -> None:
        """`invariants.check_invariants(pool, manager)`: raise AssertionError naming the
        first broken rule of docs/design.md."""
        check_invariants(self, self._manager)

    def snapshot(self) -> PoolSnapshot:
        """`snapshot.take_snapshot(pool, manager)`: the pool's and block tables' state as
        plain numpy arrays and tuples (for plots and APIs)."""
        return take_snapshot(self, self._manager)

    def __repr__(self) -> str:
        return (
            f"KVCachePool(num_pages={self.num_pages}, page_size={self.page_size}, "
            f"active={self.num_active_pages}, cached={self.num_cached_pages}, "
            f"free={self.num_free_pages}, clock={self.clock})"
        )
