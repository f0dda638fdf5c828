"""KVCachePool: the physical pages, their K/V storage, and the verbs that change them.

This is vLLM v1's `BlockPool` (with the K/V tensors its model runner allocates). It owns
the K/V store (one preallocated array for all layers), the metadata of every page (a
`PageTable`: one list per field, page.py; `page(page_id)` is a read-only view), the FREE
pages (free_queue.py), the prefix index (prefix_index.py), the eviction policy over
CACHED pages (eviction.py), counters, a logical clock and the page events (events.py).
It changes them only through public verbs named as in vLLM: `get_new_blocks`, `touch`,
`free_blocks`, `cache_full_blocks`, `get_cached_block`, `find_longest_cache_hit`, plus
`fill_blocks` / `append_token` (record where a page's token ids are, which vLLM's blocks
do not keep) and `copy_block` (the copy of a copy-on-write). The verbs work on a whole
block table at a time, and on a run of consecutive page ids with one slice assignment
per field (docs/design.md, "Data layout"). The pool knows nothing about sequences: the
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

from array import array
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from pagedkv.core.config import CacheConfig
from pagedkv.core.eviction import EvictionPolicy, make_eviction_policy
from pagedkv.core.free_queue import FreeQueue
from pagedkv.core.page import PageState, PageTable
from pagedkv.core.plumbing.events import Event, EventStream
from pagedkv.core.plumbing.validation import check_array, check_instance
from pagedkv.core.pool_queries import OutOfPagesError, PoolQueries
from pagedkv.core.prefix_index import PREFIX_INDEXES, PrefixIndex

FREE, ACTIVE, CACHED = PageState.FREE, PageState.ACTIVE, PageState.CACHED


@dataclass
class PoolStats:
    """Counters since the pool was created (docs/design.md, "Counts and counters")."""

    allocations: int = 0  # pages handed out for writing (FREE or evicted; COW targets too)
    evictions: int = 0  # CACHED pages reclaimed
    prefix_queries: int = 0  # prompt tokens looked up at admission (vLLM: prefix_cache_queries)
    prefix_hits: int = 0  # of those, tokens served by cached pages (vLLM: prefix_cache_hits)
    cow_copies: int = 0  # pages copied before a shared page was written

    @property
    def hit_rate(self) -> float:
        """prefix_hits / prefix_queries (0.0 before any query)."""
        return self.prefix_hits / self.prefix_queries if self.prefix_queries else 0.0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class KVCachePool(PoolQueries):
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
        # Every page's metadata, one list per field. Read it freely (or through
        # `page(page_id)`); change pages only through the verbs below.
        self.free_queue = FreeQueue(range(config.num_pages), config.num_pages)
        self.table = PageTable(config.num_pages, config.page_size, self.free_queue.flags)
        self.prefix_index: PrefixIndex = PREFIX_INDEXES[config.prefix_index](self.table, config.page_size)
        # A radix tree evicts leaves only, so it brings its own policy (SGLang's leaf-first LRU).
        self.eviction: EvictionPolicy = self.prefix_index.eviction_policy() or make_eviction_policy(
            config.eviction_policy
        )
        attach = getattr(self.eviction, "attach", None)  # optional: a learner's policy may not have it
        if attach is not None:
            attach(config.num_pages, self._content_key)
        self.stats = PoolStats()
        self.clock = 0  # logical: one tick per successful operation
        self.events = EventStream()

    def add_listener(self, callback: Callable[[Event], None]) -> None:
        """Call `callback(event)` for every page event from now on (events.py)."""
        self.events.add_listener(callback)

    def remove_listener(self, callback: Callable[[Event], None]) -> None:
        """Stop calling `callback` (ValueError if it was never added)."""
        self.events.remove_listener(callback)

    # ---- one operation: tick, change pages, publish ----------------------------------------

    def tick(self) -> int:
        """Start an operation: advance the logical clock (docs/design.md rule 8) and return it."""
        self.clock += 1
        return self.clock

    def publish(self) -> None:
        """End an operation: deliver its events, in order (listeners never see a pool
        half changed)."""
        if self.events.pending:  # most operations have none: nobody listens
            self.events.publish()

    def get_new_blocks(
        self,
        num_blocks: int,
        seq_id: Hashable | None = None,
        tokens: array | None = None,
        first_block: int = 0,
    ) -> list[int]:
        """Hand out writable pages, ref count 1: FREE ones lowest id first, then the eviction
        policy's victims (docs/design.md rule 1). Raises OutOfPagesError, changing nothing, when FREE +
        CACHED pages are too few. With `tokens`, the pages also record that they hold its
        logical blocks first_block, first_block + 1, ... (`fill_blocks`, in the same pass)."""
        free, table, clock = self.free_queue, self.table, self.clock
        num_free = len(free)
        if num_blocks > num_free and num_blocks > num_free + len(self.eviction):
            raise OutOfPagesError(
                f"need {num_blocks} pages, only {num_free} FREE + {len(self.eviction)} CACHED "
                f"of {self.num_pages} (the rest are ACTIVE)"
            )
        from_free = num_blocks if num_blocks <= num_free else num_free
        page_ids: list[int] = []
        for run in free.popleft_runs(from_free):  # consecutive ids: one slice per field
            lo, hi = run.start, run.stop
            n = hi - lo
            table.ref_count[lo:hi] = [1] * n
            table.last_access[lo:hi] = [clock] * n
            if tokens is not None:
                block = first_block + len(page_ids)
                table.token_source[lo:hi] = [tokens] * n
                table.token_block[lo:hi] = table.page_ids[block : block + n]  # the ints, shared
            else:  # empty until the caller records tokens (a FREE page's fields are stale)
                table.token_source[lo:hi] = [None] * n
            page_ids += table.page_ids[lo:hi]
        if num_blocks > from_free:
            victims = self._evict(num_blocks - from_free, seq_id)  # their hashes are gone
            ref_count, last_access = table.ref_count, table.last_access
            source, token_block = table.token_source, table.token_block
            for block, page_id in enumerate(victims, first_block + len(page_ids)):
                ref_count[page_id] = 1
                last_access[page_id] = clock
                source[page_id] = tokens  # None: empty until the caller records tokens
                token_block[page_id] = block
            page_ids += victims
        self.stats.allocations += num_blocks
        if self.events.listeners:
            for page_id in page_ids:
                self.events.emit(clock, "allocate", page_id, seq_id)
        return page_ids

    def touch(
        self, page_ids: Iterable[int], seq_id: Hashable | None = None, kind: str = "prefix_hit"
    ) -> None:
        """One more block table holds each page (a prefix hit, or `kind="fork"`); a CACHED
        page leaves the eviction policy and turns ACTIVE (docs/design.md rule 5)."""
        ref_count, last_access = self.table.ref_count, self.table.last_access
        eviction, clock, listeners = self.eviction, self.clock, self.events.listeners
        for page_id in page_ids:
            if not ref_count[page_id]:  # CACHED (a FREE page holds no prefix to hit or share)
                eviction.remove(page_id)
            ref_count[page_id] += 1
            last_access[page_id] = clock
            if listeners:
                self.events.emit(clock, kind, page_id, seq_id)

    def free_blocks(self, ordered_page_ids: Iterable[int], seq_id: Hashable | None = None) -> None:
        """One fewer block table holds each page. Pages nobody holds any more turn CACHED
        (full and indexed) or FREE; CACHED ones join the eviction order in the order given,
        so the first page given is evicted first (docs/design.md rule 6)."""
        page_ids = ordered_page_ids if isinstance(ordered_page_ids, list) else list(ordered_page_ids)
        span = self.table.span(page_ids)
        if span is not None and not self.events.listeners:
            lo, hi = span
            # Every page has one holder and no hash (none has one with caching off): all turn FREE.
            unhashed = (
                not self.config.enable_prefix_caching or self.table.block_hash[lo:hi].count(None) == hi - lo
            )
            if unhashed and self.table.ref_count[lo:hi].count(1) == hi - lo:
                self._free_run(lo, hi)
                return
        ref_count, last_access = self.table.ref_count, self.table.last_access
        block_hash, index = self.table.block_hash, self.prefix_index.hash_to_page
        clock, listeners = self.clock, self.events.listeners
        cached, freed = [], []
        for page_id in page_ids:
            last_access[page_id] = clock
            holders = ref_count[page_id] - 1
            ref_count[page_id] = holders
            if holders:
                continue
            digest = block_hash[page_id]
            if digest is not None and index.get(digest) == page_id:
                cached.append(page_id)
                kind = "cache"
            else:
                freed.append(page_id)
                kind = "free"
            if listeners:
                self.events.emit(clock, kind, page_id, seq_id)
        self.table.empty(freed)
        self.free_queue.extend(freed)
        if cached:
            self.eviction.add_all(cached)

    def _free_run(self, lo: int, hi: int) -> None:
        """`free_blocks` for consecutive pages lo .. hi - 1 that all turn FREE: one slice
        assignment per field instead of a loop over the pages."""
        n, table = hi - lo, self.table
        table.ref_count[lo:hi] = [0] * n
        table.last_access[lo:hi] = [self.clock] * n
        self.free_queue.extend_run(lo, hi)  # their token fields go stale: a FREE page holds none

    def fill_blocks(self, page_ids: Sequence[int], tokens: Sequence[int] | array, first_block: int) -> None:
        """Record that freshly allocated pages hold a run of tokens: page_ids[i] holds
        logical block first_block + i of `tokens` (an `array('q')` is kept, not copied: the
        sequence that owns it only ever appends)."""
        if not isinstance(tokens, array):
            tokens = array("q", tokens)
        source, token_block = self.table.token_source, self.table.token_block
        for block, page_id in enumerate(page_ids, first_block):
            source[page_id] = tokens
            token_block[page_id] = block

    def append_token(self, page_id: int, tokens: array, block: int) -> None:
        """Record that a page one block table holds has one more token: the last of
        `tokens`, the writer's token array, in which the page is logical block `block`."""
        table = self.table
        table.token_source[page_id] = tokens
        table.token_block[page_id] = block
        table.last_access[page_id] = self.clock

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
        table = self.table
        n = table.num_tokens(src)
        self.kv_cache[:, :, dst, :n] = self.kv_cache[:, :, src, :n]
        table.token_source[dst], table.token_block[dst] = table.token_source[src], table.token_block[src]
        table.freeze(src)  # its writer moves to dst: src keeps its n tokens for its other holders
        self.stats.cow_copies += 1
        self.events.emit(self.clock, "cow", dst, seq_id, f"copied from page {src}")

    def record_prefix_lookup(self, num_queried_tokens: int, num_hit_tokens: int) -> None:
        """Count one admission's prefix lookup (vLLM: `PrefixCacheStats` queries and hits)."""
        self.stats.prefix_queries += num_queried_tokens
        self.stats.prefix_hits += num_hit_tokens

    def _evict(self, n: int, seq_id: Hashable | None) -> list[int]:
        """Reclaim the next n victims of the eviction policy: their hashes leave the index."""
        victims = self.eviction.pop_victims(n)
        self.prefix_index.remove_all(victims)  # and their hashes; get_new_blocks sets their tokens
        self.stats.evictions += n
        if self.events.listeners:
            for page_id in victims:
                self.events.emit(self.clock, "evict", page_id, seq_id)
        return victims

    def _content_key(self, page_id: int) -> bytes | None:
        return self.table.block_hash[page_id]

    # ---- whole-pool operation ----------------------------------------------------------------

    def reset_prefix_cache(self) -> bool:
        """Turn every CACHED page FREE and empty the index; refused (False) while any page is
        ACTIVE (vLLM v1's `BlockPool.reset_prefix_cache` refuses likewise)."""
        if self.num_active_pages:
            return False
        self.tick()
        cached = self.eviction.order()
        self.table.empty(cached)
        self.free_queue.extend(cached)
        for page_id in cached:
            self.events.emit(self.clock, "reset", page_id)
        self.eviction.clear()
        self.prefix_index.clear()
        self.publish()
        return True

    def __repr__(self) -> str:
        return (
            f"KVCachePool(num_pages={self.num_pages}, page_size={self.page_size}, "
            f"active={self.num_active_pages}, cached={self.num_cached_pages}, "
            f"free={self.num_free_pages}, clock={self.clock})"
        )
