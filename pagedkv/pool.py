"""KVCachePool: the physical pages, their K/V storage, the free list and the prefix index.

This is vLLM v1's `BlockPool` (with the K/V tensors its model runner allocates) in one
class. It owns:

- the K/V store, one preallocated array for all layers,
- a `Page` per physical page (state, ref count, tokens, block hash, last access),
- the FREE pages, handed out lowest page id first so pictures fill predictably,
- the prefix index (block hash -> page id) and the eviction policy over CACHED pages,
- counters, a logical clock and an event stream for plots and metrics.

Sequences and their block tables belong to the `SequenceManager`; it is the only caller of
the pool's `_private` mutators, so every change to a page happens together with the
block-table change that justifies it and `check_invariants()` can hold after every call.

Faithful to vLLM: eviction takes the least recently released CACHED page; cached but
unreferenced pages count as free in `usage` (`kv_cache_usage_perc`); blocks are indexed
when they fill, before their K/V are computed, on the promise that the step that filled
them computes them (see `SequenceManager`).

Deliberately different:
- vLLM keeps free and cached blocks in a single queue and evicts lazily when a cached
  block reaches its head, so a cached block can be evicted while untouched FREE blocks
  remain; pagedkv always uses FREE pages first, which keeps cached prefixes alive longer
  and makes the pictures simpler.
- vLLM v1 does not de-duplicate: its index maps a hash to every block holding it, so a
  freed duplicate stays cached. pagedkv keeps the first page indexed under a hash and
  frees a duplicate when its last holder releases it (DESIGN.md, "Duplicate full pages"):
  one page per prefix, which is what the pictures show.
- vLLM allocates K/V per layer, as separate tensors of [2, num_blocks, block_size,
  kv_heads, head_dim]; pagedkv stacks the layers into one array [layers, 2, ...] so the
  whole store can be a single file-backed memmap. `kv_cache[layer]` is vLLM's per-layer
  layout.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING

import numpy as np

from .config import CacheConfig
from .eviction import EvictionPolicy, make_eviction_policy
from .invariants import check_invariants
from .page import Page, PageState
from .snapshot import Event, PoolSnapshot, PoolStats, take_snapshot

if TYPE_CHECKING:
    from .sequence import SequenceManager

FREE, ACTIVE, CACHED = PageState.FREE, PageState.ACTIVE, PageState.CACHED


class OutOfPagesError(MemoryError):
    """The pool cannot provide the pages an operation needs; nothing was changed."""


class KVCachePool:
    """Fixed-size pages of K/V storage with ref counts, prefix index and eviction."""

    def __init__(self, config: CacheConfig, kv_cache: np.ndarray | None = None) -> None:
        if not isinstance(config, CacheConfig):
            raise TypeError(f"config must be a CacheConfig, got {type(config).__name__}")
        if kv_cache is None:
            kv_cache = np.zeros(config.kv_shape, dtype=config.dtype)
        elif (
            kv_cache.shape != config.kv_shape
            or kv_cache.dtype != np.dtype(config.dtype)
            or not kv_cache.flags.c_contiguous  # reshaped views of it must not be copies
        ):
            raise ValueError(
                f"kv_cache must be a C-contiguous array of shape {config.kv_shape} and dtype "
                f"{config.dtype}, got {kv_cache.shape} {kv_cache.dtype} "
                f"(C-contiguous: {kv_cache.flags.c_contiguous})"
            )
        self.config = config
        self.page_size = config.page_size
        self.num_pages = config.num_pages
        self.kv_cache = kv_cache  # [layers, 2, num_pages, page_size, kv_heads, head_dim]
        self._pages = [Page(pid, kv_cache) for pid in range(config.num_pages)]
        self._free = list(range(config.num_pages))  # heap of FREE page ids
        self._index: dict[bytes, int] = {}  # block hash -> page id
        self.eviction: EvictionPolicy = make_eviction_policy(config.eviction_policy)
        self.eviction.attach(config.num_pages, self._content_key)
        self.stats = PoolStats()
        self.clock = 0  # logical: one tick per successful operation
        self._listeners: list[Callable[[Event], None]] = []
        self._pending: list[Event] = []  # events of the operation in progress
        self._manager: SequenceManager | None = None

    # ---- read-only queries -------------------------------------------------------------

    def page(self, page_id: int) -> Page:
        """The metadata of one page (do not mutate it)."""
        return self._pages[self._check_page_id(page_id)]

    def ref_count(self, page_id: int) -> int:
        return self._pages[self._check_page_id(page_id)].ref_count

    @property
    def num_free_pages(self) -> int:
        """FREE pages (empty, on the free list)."""
        return len(self._free)

    @property
    def num_cached_pages(self) -> int:
        """CACHED pages: unreferenced, holding a reusable prefix, evictable."""
        return len(self.eviction)

    @property
    def num_active_pages(self) -> int:
        return self.num_pages - len(self._free) - len(self.eviction)

    @property
    def num_available_pages(self) -> int:
        """Pages an allocation can draw on: FREE + CACHED."""
        return len(self._free) + len(self.eviction)

    @property
    def usage(self) -> float:
        """ACTIVE pages / num_pages (vLLM's kv_cache_usage_perc: CACHED counts as free)."""
        return self.num_active_pages / self.num_pages

    @property
    def token_usage(self) -> float:
        """Token slots filled in ACTIVE pages / (num_pages * page_size)."""
        filled = sum(p.num_tokens for p in self._pages if p.state is ACTIVE)
        return filled / self.config.num_slots

    def lookup(self, block_hash: bytes) -> int | None:
        """The page id indexed under a block hash, or None."""
        return self._index.get(block_hash)

    def add_listener(self, callback: Callable[[Event], None]) -> None:
        """Call `callback(event)` for every page event from now on."""
        if not callable(callback):
            raise TypeError(f"callback must be callable, got {type(callback).__name__}")
        self._listeners.append(callback)

    def remove_listener(self, callback: Callable[[Event], None]) -> None:
        self._listeners.remove(callback)

    def peek_allocation(self, n: int, revived: Iterable[int] = ()) -> tuple[list[int], list[int]]:
        """The pages an allocation of n would take now, changing nothing: (FREE page ids,
        lowest first; CACHED page ids it would evict, next victim first).

        `revived` names CACHED pages a prefix hit takes back before allocating (they are not
        victims). A write-ahead log records these pages before the allocation happens."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"n must be an int >= 0, got {n!r}")
        from_free = min(n, len(self._free))
        victims: list[int] = []
        if n > from_free:
            keep = set(revived)
            victims = [p for p in self.eviction.order() if p not in keep][: n - from_free]
            if len(victims) < n - from_free:
                raise OutOfPagesError(
                    f"need {n} pages, only {len(self._free)} FREE + {len(self.eviction) - len(keep)} "
                    f"evictable CACHED of {self.num_pages}"
                )
        return heapq.nsmallest(from_free, self._free), victims

    # ---- operations ----------------------------------------------------------------------

    def restore(
        self, pages: list[tuple], release_order: list[int], stats: dict[str, int], clock: int
    ) -> None:
        """Load page metadata saved from a pool with the same config (checkpoint recovery).

        pages[i] = (state, ref_count, token_ids, block_hash, indexed, last_access) of page i;
        release_order = the CACHED page ids in the order they turned CACHED, oldest first
        (what the eviction policy was given; its order() follows from it). Only a fresh pool
        (clock 0, every page FREE, no sequences) accepts it; the caller restores the
        SequenceManager's sequences next and then calls check_invariants()."""
        if self.clock or self._sequences() or len(self._free) != self.num_pages:
            raise ValueError("restore needs a fresh pool (clock 0, every page FREE, no sequences)")
        if len(pages) != self.num_pages:
            raise ValueError(f"pages must describe {self.num_pages} pages, got {len(pages)}")
        self._free = []  # filled in ascending page id order, so already a heap
        for page, (state, ref_count, token_ids, block_hash, indexed, last_access) in zip(
            self._pages, pages
        ):
            page.state, page.ref_count, page.last_access = PageState(state), ref_count, last_access
            page.token_ids, page.block_hash = list(token_ids), block_hash
            if page.state is FREE:
                self._free.append(page.page_id)
            if indexed:
                self._index[block_hash] = page.page_id
        self.eviction.add_all(list(release_order))
        self.stats = PoolStats(**stats)
        self.clock = clock

    def reset_prefix_cache(self) -> bool:
        """Turn every CACHED page FREE and empty the index; refused (False) while any page is ACTIVE."""
        if self.num_active_pages:
            return False
        clock = self._tick()
        for page_id in self.eviction.order():
            self._make_free(self._pages[page_id])
            self._emit(clock, "reset", page_id)
        self.eviction.clear()
        self._index.clear()
        self._publish()
        return True

    # ---- mutators for the SequenceManager (the only caller) -----------------------------

    def _tick(self) -> int:
        self.clock += 1
        return self.clock

    def _allocate(self, n: int, seq_id: Hashable | None = None) -> list[int]:
        """Hand out n writable pages: FREE ones lowest id first, then evict LRU CACHED ones."""
        free, pages = self._free, self._pages
        if n > len(free) + len(self.eviction):
            raise OutOfPagesError(
                f"need {n} pages, only {len(free)} FREE + {len(self.eviction)} CACHED "
                f"of {self.num_pages} (the rest are ACTIVE)"
            )
        from_free = min(n, len(free))
        page_ids = [heapq.heappop(free) for _ in range(from_free)]
        if n > from_free:
            page_ids += self._evict(n - from_free, seq_id)
        clock = self.clock
        for page_id in page_ids:
            page = pages[page_id]
            page.state = ACTIVE
            page.ref_count = 1
            page.last_access = clock
        self.stats.allocations += n
        if self._listeners:
            for page_id in page_ids:
                self._emit(clock, "allocate", page_id, seq_id)
        return page_ids

    def _evict(self, n: int, seq_id: Hashable | None) -> list[int]:
        """Reclaim the next n victims of the eviction policy: their hashes leave the index."""
        index, pages = self._index, self._pages
        victims = self.eviction.pop_victims(n)
        for page_id in victims:
            page = pages[page_id]
            del index[page.block_hash]
            page.token_ids = []
            page.block_hash = None
        self.stats.evictions += n
        if self._listeners:
            for page_id in victims:
                self._emit(self.clock, "evict", page_id, seq_id)
        return victims

    def _lookup_prefix(self, hashes: list[bytes], token_ids: list[int]) -> list[int]:
        """Pages holding the longest verified prefix of `hashes`; stops at the first miss."""
        size, index, pages, hits = self.page_size, self._index, self._pages, []
        for i, block_hash in enumerate(hashes):
            page_id = index.get(block_hash)
            # Collision guard: a hit must hold exactly this block's tokens.
            if page_id is None or pages[page_id].token_ids != token_ids[i * size : (i + 1) * size]:
                break
            hits.append(page_id)
        return hits

    def _acquire(self, page_ids: Iterable[int], seq_id: Hashable | None, kind: str) -> None:
        """One more block table holds each page (prefix hit or fork); CACHED pages revive."""
        pages, eviction, clock = self._pages, self.eviction, self.clock
        for page_id in page_ids:
            page = pages[page_id]
            if page.state is CACHED:
                eviction.remove(page_id)
                page.state = ACTIVE
            page.ref_count += 1
            page.last_access = clock
            if self._listeners:
                self._emit(clock, kind, page_id, seq_id)

    def _release(self, page_ids: Iterable[int], seq_id: Hashable | None = None) -> None:
        """One fewer block table holds each page, in the order given; unheld pages turn
        CACHED (full and indexed, prefix caching on) or FREE."""
        pages, index, clock, listeners, cached = self._pages, self._index, self.clock, self._listeners, []
        for page_id in page_ids:
            page = pages[page_id]
            page.last_access = clock
            page.ref_count -= 1
            if page.ref_count:
                continue
            block_hash = page.block_hash
            if block_hash is not None and index.get(block_hash) == page_id:
                page.state = CACHED
                cached.append(page_id)
                if listeners:
                    self._emit(clock, "cache", page_id, seq_id)
            else:
                self._make_free(page)
                if listeners:
                    self._emit(clock, "free", page_id, seq_id)
        self.eviction.add_all(cached)

    def _write(self, page_id: int, token_ids: list[int], block_hash: bytes | None) -> None:
        """Record tokens written into a page; a full page with a hash enters the index
        unless an equal page is already there (the first one indexed keeps the entry)."""
        page = self._pages[page_id]
        page.token_ids.extend(token_ids)
        page.last_access = self.clock
        if block_hash is not None:
            page.block_hash = block_hash
            self._index.setdefault(block_hash, page_id)

    def _fill(self, page_ids: list[int], token_ids: list[int], hashes: list[bytes], first: int) -> None:
        """Write a prompt into freshly allocated pages: page_ids[i] holds logical block
        first + i; blocks with a hash in `hashes` are full and enter the index."""
        pages, index, size = self._pages, self._index, self.page_size
        for block, page_id in enumerate(page_ids, first):
            page = pages[page_id]
            page.token_ids = token_ids[block * size : (block + 1) * size]
            if block < len(hashes):
                page.block_hash = block_hash = hashes[block]
                index.setdefault(block_hash, page_id)

    def _copy(self, src: int, dst: int, seq_id: Hashable | None = None) -> None:
        """Copy-on-write: dst gets src's K/V slots and tokens; src loses one holder."""
        src_page, dst_page = self._pages[src], self._pages[dst]
        n = src_page.num_tokens
        dst_page.keys[:, :n] = src_page.keys[:, :n]
        dst_page.values[:, :n] = src_page.values[:, :n]
        dst_page.token_ids = list(src_page.token_ids)
        self.stats.cow_copies += 1
        self._emit(self.clock, "cow", dst, seq_id, f"copied from page {src}")
        self._release([src], seq_id)

    def _content_key(self, page_id: int) -> bytes | None:
        return self._pages[page_id].block_hash

    def _make_free(self, page: Page) -> None:
        page.state = FREE
        page.token_ids = []
        page.block_hash = None
        heapq.heappush(self._free, page.page_id)

    def _emit(self, clock: int, kind: str, page_id: int, seq_id=None, detail: str = "") -> None:
        # Held back until the operation is complete (`_publish`): a listener that raises
        # or reads the pool must never see it half changed.
        if self._listeners:
            self._pending.append(Event(clock, kind, page_id, seq_id, detail))

    def _publish(self) -> None:
        """Deliver the events of the operation that just completed, in order."""
        events, self._pending = self._pending, []
        for event in events:
            for callback in self._listeners:
                callback(event)

    def _attach(self, manager: SequenceManager) -> None:
        if self._manager is not None:
            raise ValueError("pool already has a SequenceManager; create one manager per pool")
        self._manager = manager

    def _check_page_id(self, page_id: object) -> int:
        if isinstance(page_id, bool) or not isinstance(page_id, (int, np.integer)):
            raise TypeError(f"page_id must be an int, got {page_id!r}")
        if not 0 <= page_id < self.num_pages:
            raise IndexError(f"page_id must be in [0, {self.num_pages - 1}], got {page_id}")
        return int(page_id)

    # ---- inspection ------------------------------------------------------------------------

    def _sequences(self) -> dict:
        return self._manager.sequences if self._manager is not None else {}

    def check_invariants(self) -> None:
        """Raise AssertionError naming the first broken rule of DESIGN.md."""
        check_invariants(self)

    def snapshot(self) -> PoolSnapshot:
        """Copy out the pool's state as plain numpy arrays and tuples (for plots and APIs)."""
        return take_snapshot(self)

    def __repr__(self) -> str:
        return (
            f"KVCachePool(num_pages={self.num_pages}, page_size={self.page_size}, "
            f"active={self.num_active_pages}, cached={self.num_cached_pages}, "
            f"free={self.num_free_pages}, clock={self.clock})"
        )
