"""KVCachePool: the physical pages, their K/V storage, and the verbs that change them.

This is vLLM v1's `BlockPool` (with the K/V tensors its model runner allocates). It owns
the K/V store (one preallocated array for all layers), the metadata of every page (a
`PageTable`, one list per field, page.py; `page(page_id)` is a read-only view), the FREE
pages (free_queue.py), the prefix index (prefix_index.py), the eviction policy over
CACHED pages (eviction.py), counters, a logical clock and the page events (events.py).

It changes pages only through verbs named as in vLLM, each over a whole block table at
a time: `get_new_blocks`, `touch`, `free_blocks`, `cache_full_blocks`, plus `fill_blocks`
/ `append_token` (the token ids a page holds, which vLLM's blocks do not keep) and
`copy_block` (the copy of a copy-on-write). It answers, changing nothing: the counts,
`usage`, `get_cached_block`, `find_longest_cache_hit`, `peek_allocation`. The pool knows
nothing about sequences: the `SequenceManager` decides what to call, together with the
block-table change that justifies it, between `tick()` and `publish()`.

Faithful to vLLM: LRU eviction in release order; CACHED pages count as free in `usage`
(`kv_cache_usage_perc`); blocks are indexed when they fill, before their K/V are
computed, on the promise that the step that filled them computes them (`SequenceManager`).
Deliberately different (docs/design.md, "Deliberately different"): FREE pages are used
before any CACHED page is evicted; one page per hash; the K/V of all layers are stacked
into one array [layers, 2, ...] so the store can be a single file-backed memmap.

Leaves out: KV-cache groups (vLLM's hybrid models keep one block pool per group) and the
null block vLLM reserves as page 0.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from pagedkv.core.config import CacheConfig
from pagedkv.core.eviction import EvictionPolicy, make_eviction_policy
from pagedkv.core.free_queue import FreeQueue
from pagedkv.core.hashing import TOKEN_BYTES, token_bytes
from pagedkv.core.page import Page, PageTable
from pagedkv.core.plumbing.events import Event, EventStream
from pagedkv.core.plumbing.validation import check_array, check_instance, check_int
from pagedkv.core.prefix_index import PREFIX_INDEXES, PrefixIndex


class OutOfPagesError(MemoryError):
    """The pool cannot provide the pages an operation needs; nothing was changed.

    A refused admission (`SequenceManager.add`) carries the numbers its message prints, so a
    caller reads fields, not words: `tokens` it was added with, `pages_needed` (new pages),
    `free`, `evictable` (CACHED pages it may evict) and `own_hits` (CACHED pages that are its
    own prefix hits, not evictable for it). Other refusals leave them None."""

    def __init__(self, message: str, counts: tuple[int, int, int, int, int] | None = None) -> None:
        super().__init__(message)
        fields: tuple[int | None, ...] = counts or (None,) * 5  # in the order the names are given
        self.tokens, self.pages_needed, self.free, self.evictable, self.own_hits = fields


@dataclass(slots=True)
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
        self.free_queue = FreeQueue(range(config.num_pages), config.num_pages)
        # Every page's metadata, one list per field: read it freely, write it only by the verbs.
        self.table = PageTable(config.num_pages, config.page_size, self.free_queue.flags)
        self.prefix_index: PrefixIndex = PREFIX_INDEXES[config.prefix_index](self.table, config.page_size)
        # A radix tree evicts leaves only, so it brings its own policy (SGLang's leaf-first LRU).
        self.eviction: EvictionPolicy = self.prefix_index.eviction_policy() or make_eviction_policy(
            config.eviction_policy
        )
        attach = getattr(self.eviction, "attach", None)  # optional: a learner's policy may not have it
        if attach is not None:
            attach(config.num_pages, self.table.block_hash.__getitem__)
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
        """End an operation: deliver its events, in order (listeners never see a pool half changed)."""
        if self.events.pending:
            self.events.publish()

    def _emit(self, kind: str, page_ids: Iterable[int], seq_id: Hashable | None, detail: str = "") -> None:
        if self.events.listeners:  # nobody listens most of the time: then nothing is built
            for page_id in page_ids:
                self.events.emit(self.clock, kind, page_id, seq_id, detail)

    # ---- the verbs -------------------------------------------------------------------------

    def get_new_blocks(
        self,
        num_blocks: int,
        seq_id: Hashable | None = None,
        tokens: array | None = None,
        first_block: int = 0,
    ) -> list[int]:
        """Hand out writable pages, ref count 1: FREE ones lowest id first, then the eviction
        policy's victims (docs/design.md rule 1); with `tokens`, page i holds their logical
        block first_block + i (`fill_blocks`). Raises OutOfPagesError, changing nothing, when
        FREE + CACHED pages are too few."""
        num_free, num_cached = len(self.free_queue), len(self.eviction)
        if num_blocks > num_free + num_cached:
            raise OutOfPagesError(
                f"need {num_blocks} pages, only {num_free} FREE + {num_cached} CACHED "
                f"of {self.num_pages} (the rest are ACTIVE)"
            )
        page_ids = self.free_queue.popleft_n(min(num_blocks, num_free))
        if num_blocks > num_free:
            page_ids += self._evict(num_blocks - num_free, seq_id)
        ref_count, last_access, clock = self.table.ref_count, self.table.last_access, self.clock
        for page_id in page_ids:  # each page is empty: FREE, or emptied by its eviction
            ref_count[page_id] = 1
            last_access[page_id] = clock
        if tokens is not None:
            self.fill_blocks(page_ids, tokens, first_block)
        self.stats.allocations += num_blocks
        self._emit("allocate", page_ids, seq_id)
        return page_ids

    def touch(
        self, page_ids: Sequence[int], seq_id: Hashable | None = None, kind: str = "prefix_hit"
    ) -> None:
        """One more block table holds each page (a prefix hit, or `kind="fork"`); a CACHED
        page leaves the eviction policy and turns ACTIVE (docs/design.md rule 5)."""
        ref_count, last_access = self.table.ref_count, self.table.last_access
        for page_id in page_ids:
            if not ref_count[page_id]:  # CACHED (a FREE page holds no prefix to hit or share)
                self.eviction.remove(page_id)
            ref_count[page_id] += 1
            last_access[page_id] = self.clock
        self._emit(kind, page_ids, seq_id)

    def free_blocks(self, ordered_page_ids: Iterable[int], seq_id: Hashable | None = None) -> None:
        """One fewer block table holds each page. A page nobody holds any more turns CACHED
        if the prefix index maps its hash to it (`PrefixIndex.holds_page`), else FREE (its
        tokens and hash dropped); CACHED ones join the eviction order in the order given, so
        the first page given is evicted first (docs/design.md rule 6)."""
        table, clock, listeners = self.table, self.clock, self.events.listeners
        ref_count, last_access, block_hash = table.ref_count, table.last_access, table.block_hash
        index = self.prefix_index.hash_to_page  # block hash -> the one page indexed under it
        cached: list[int] = []
        freed: list[int] = []
        for page_id in ordered_page_ids:
            ref_count[page_id] -= 1
            last_access[page_id] = clock
            if ref_count[page_id]:
                continue  # another block table still holds it
            digest = block_hash[page_id]
            if digest is not None and index.get(digest) == page_id:
                cached.append(page_id)
                kind = "cache"
            else:
                freed.append(page_id)
                kind = "free"
            if listeners:
                self.events.emit(clock, kind, page_id, seq_id)
        table.clear(freed)
        self.free_queue.extend(freed)
        self.eviction.add_all(cached)

    def fill_blocks(self, page_ids: Sequence[int], tokens: Sequence[int] | array, first_block: int) -> None:
        """Record the token ids fresh pages hold: page_ids[i] holds logical block
        first_block + i of `tokens` (a partial last block holds what there is)."""
        data = token_bytes(tokens)  # immutable: every page points into it, none copies it
        for block, page_id in enumerate(page_ids, first_block):
            self.table.token_data[page_id] = data
            self.table.token_block[page_id] = block

    def append_token(self, page_id: int, token_id: int) -> None:
        """Record one more token in a page its writer holds alone (in the next free slot)."""
        table = self.table
        table.token_data[page_id] = table.tokens(page_id) + token_id.to_bytes(TOKEN_BYTES, "little")
        table.token_block[page_id] = 0  # the page's own bytes now: block 0 of them
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
        n = self.table.num_tokens(src)
        self.kv_cache[:, :, dst, :n] = self.kv_cache[:, :, src, :n]
        self.table.token_data[dst] = self.table.token_data[src]  # bytes: shared, never changed
        self.table.token_block[dst] = self.table.token_block[src]
        self.stats.cow_copies += 1
        self._emit("cow", [dst], seq_id, f"copied from page {src}")

    def record_prefix_lookup(self, num_queried_tokens: int, num_hit_tokens: int) -> None:
        """Count one admission's prefix lookup (vLLM: `PrefixCacheStats` queries and hits)."""
        self.stats.prefix_queries += num_queried_tokens
        self.stats.prefix_hits += num_hit_tokens

    def _evict(self, n: int, seq_id: Hashable | None) -> list[int]:
        """Reclaim the next n victims of the eviction policy: they leave the index and lose
        their content."""
        victims = self.eviction.pop_victims(n)
        self.prefix_index.remove_all(victims)
        self.table.clear(victims)
        self.stats.evictions += n
        self._emit("evict", victims, seq_id)
        return victims

    def reset_prefix_cache(self) -> bool:
        """Turn every CACHED page FREE and empty the index; refused (False) while any page is
        ACTIVE (vLLM v1's `BlockPool.reset_prefix_cache` refuses likewise)."""
        if self.num_active_pages:
            return False
        self.tick()
        cached = self.eviction.order()
        self.table.clear(cached)
        self.free_queue.extend(cached)
        self._emit("reset", cached, None)
        self.eviction.clear()
        self.prefix_index.clear()
        self.publish()
        return True

    # ---- queries: they change nothing --------------------------------------------------------

    def page(self, page_id: int) -> Page:
        """A read-only view of one page's metadata and K/V."""
        return Page(self.table, self.kv_cache, check_int("page_id", page_id, 0, self.num_pages - 1))

    @property
    def pages(self) -> list[Page]:
        """A view of every page, page id order (for reading; the verbs use `table`)."""
        return [Page(self.table, self.kv_cache, page_id) for page_id in range(self.num_pages)]

    def ref_count(self, page_id: int) -> int:
        """How many block tables hold the page."""
        return self.table.ref_count[check_int("page_id", page_id, 0, self.num_pages - 1)]

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
        held = [page_id for page_id, holders in enumerate(self.table.ref_count) if holders]
        return sum(map(self.table.num_tokens, held)) / self.config.num_slots

    def get_cached_block(self, block_hash: bytes) -> int | None:
        """The page id indexed under a block hash, or None (vLLM: `get_cached_block`)."""
        return self.prefix_index.get(block_hash)

    def find_longest_cache_hit(
        self, block_hashes: Sequence[bytes], token_ids: Sequence[int] | array
    ) -> list[int]:
        """Pages holding the longest verified prefix of a prompt's block hashes (docs/design.md rule 5)."""
        return self.prefix_index.find_longest_cache_hit(block_hashes, token_ids)

    def peek_allocation(self, n: int, revived: Iterable[int] = ()) -> tuple[list[int], list[int]]:
        """The pages `get_new_blocks(n)` would take now, changing nothing: (FREE page ids,
        lowest first; CACHED page ids it would evict, next victim first).

        `revived` names CACHED pages a prefix hit takes back before allocating (they are not
        victims). A write-ahead log records these pages before the allocation happens."""
        n = check_int("n", n, 0)
        from_free = min(n, len(self.free_queue))
        keep = set(revived)
        victims = (
            [p for p in self.eviction.order() if p not in keep][: n - from_free] if n > from_free else []
        )
        if len(victims) < n - from_free:
            raise OutOfPagesError(
                f"need {n} pages, only {len(self.free_queue)} FREE + "
                f"{len(self.eviction) - len(keep)} evictable CACHED of {self.num_pages}"
            )
        return self.free_queue.peek_n(from_free), victims

    def __repr__(self) -> str:
        return (
            f"KVCachePool(num_pages={self.num_pages}, page_size={self.page_size}, "
            f"active={self.num_active_pages}, cached={self.num_cached_pages}, "
            f"free={self.num_free_pages}, clock={self.clock})"
        )
