"""FreeQueue: the FREE pages of a pool, handed out lowest page id first.

A FREE page is empty: no tokens, no block hash, no holder. Allocation takes FREE pages
before it evicts any CACHED page (docs/design.md rule 1), and among FREE pages the lowest
id first, so a heatmap of a fresh pool fills from the left and a run is reproducible.

vLLM v1's `FreeKVCacheBlockQueue` is a doubly linked list that holds free *and* cached
but unreferenced blocks together, ordered by release; allocation pops its head and evicts
lazily when the head block still has a hash. pagedkv splits that queue in two: this one
for empty pages and the eviction policy (eviction.py) for CACHED pages, so a cached
prefix is never reclaimed while an untouched page is free.

A heap keeps "lowest id first" at O(log n) per page: pages come back in any order (a
sequence frees its pages tail first, copy-on-write frees a source page mid-sequence).
`SwapSpace` uses the same queue for its host pages.

Leaves out: removal from the middle (a FREE page only ever leaves by being allocated).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable


class FreeQueue:
    """FREE page ids; `popleft_n` hands out the lowest ids first."""

    def __init__(self, page_ids: Iterable[int] = ()) -> None:
        self._heap = sorted(page_ids)  # a sorted list is already a heap

    def __len__(self) -> int:
        return len(self._heap)

    def popleft_n(self, n: int) -> list[int]:
        """Remove and return the n lowest page ids, lowest first.

        Example: queue [0, 3, 5, 9], popleft_n(2) -> [0, 3]; the queue keeps [5, 9]."""
        if n > len(self._heap):
            raise ValueError(f"n must be <= {len(self._heap)} FREE pages, got {n}")
        heap, pop = self._heap, heapq.heappop
        return [pop(heap) for _ in range(n)]

    def append(self, page_id: int) -> None:
        """A page became FREE (its tokens and hash already dropped)."""
        heapq.heappush(self._heap, page_id)

    def extend(self, page_ids: Iterable[int]) -> None:
        """Several pages became FREE."""
        heap, push = self._heap, heapq.heappush
        for page_id in page_ids:
            push(heap, page_id)

    def peek_n(self, n: int) -> list[int]:
        """The page ids `popleft_n(n)` would return, removing nothing."""
        return heapq.nsmallest(n, self._heap)

    def page_ids(self) -> list[int]:
        """Every FREE page id, lowest first (a copy)."""
        return sorted(self._heap)

    def reset(self, page_ids: Iterable[int]) -> None:
        """Replace the contents (checkpoint recovery)."""
        self._heap = sorted(page_ids)

    def __repr__(self) -> str:
        return f"FreeQueue({self.page_ids()})"
