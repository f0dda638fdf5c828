"""The read-only queries of a `KVCachePool`: pages, counts, usage, prefix lookups.

`KVCachePool` (pool.py) inherits them; none changes anything. The counts come from the
free queue and the eviction policy, a page's fields from the page table (page.py), so they
answer in O(1) except `token_usage` and `pages`, which walk every page.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from pagedkv.core.page import Page
from pagedkv.core.plumbing.validation import check_int

if TYPE_CHECKING:
    import numpy as np

    from pagedkv.core.config import CacheConfig
    from pagedkv.core.eviction import EvictionPolicy
    from pagedkv.core.free_queue import FreeQueue
    from pagedkv.core.page import PageTable
    from pagedkv.core.prefix_index import PrefixIndex


class OutOfPagesError(MemoryError):
    """The pool cannot provide the pages an operation needs; nothing was changed."""


class PoolQueries:
    """What a pool answers without changing: the base class of `KVCachePool`."""

    config: CacheConfig
    num_pages: int
    kv_cache: np.ndarray
    table: PageTable
    free_queue: FreeQueue
    eviction: EvictionPolicy
    prefix_index: PrefixIndex

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
        table = self.table
        filled = sum(table.num_tokens(pid) for pid, holders in enumerate(table.ref_count) if holders)
        return filled / self.config.num_slots

    def get_cached_block(self, block_hash: bytes) -> int | None:
        """The page id indexed under a block hash, or None (vLLM: `get_cached_block`)."""
        return self.prefix_index.get(block_hash)

    lookup = get_cached_block  # the name notebooks use

    def find_longest_cache_hit(self, block_hashes: Sequence[bytes], token_ids: Sequence[int]) -> list[int]:
        """Pages holding the longest verified prefix of a prompt's block hashes (docs/design.md rule 5)."""
        return self.prefix_index.find_longest_cache_hit(block_hashes, token_ids)

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
