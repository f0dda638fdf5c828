"""FreeQueue: the FREE pages of a pool, handed out lowest page id first.

A FREE page is empty: no tokens, no block hash, no holder. Allocation takes FREE pages
before it evicts any CACHED page (docs/design.md rule 1), and among FREE pages the lowest
id first, so a heatmap of a fresh pool fills from the left and a run is reproducible.

vLLM v1's `FreeKVCacheBlockQueue` is a doubly linked list that holds free *and* cached
but unreferenced blocks together; allocation pops its head and evicts lazily when the head
block still has a hash. Its `BlockPool.free_blocks` puts blocks without a hash at the head
and cached ones at the tail, so it too takes free blocks first (older vLLM appended every
freed block at the tail). pagedkv splits that queue in two: this one for empty pages and
the eviction policy (eviction.py) for CACHED pages. labs/free_queue_contrast.py runs both.

The queue is one flag byte per page (1 = FREE) and the lowest page id that may be FREE.
Taking n pages finds the runs of set flags with `bytearray.find` (a C scan) and clears
each run with one slice assignment, so a prompt's pages cost a few scans, not one step per
page; pages come back in any order (a sequence frees its pages tail first, copy-on-write
frees a source page mid-sequence) by setting their flags. `SwapSpace` uses the same queue
for its host pages.

Leaves out: removal from the middle (a FREE page only ever leaves by being allocated).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


class FreeQueue:
    """FREE page ids; `popleft_n` hands out the lowest ids first."""

    def __init__(self, page_ids: Iterable[int] = (), num_pages: int | None = None) -> None:
        ids = list(page_ids)
        # One byte per page, 1 = FREE; the pool's PageTable reads it for page states.
        self.flags = bytearray(num_pages if num_pages is not None else max(ids, default=-1) + 1)
        self._count = 0
        self._lowest = len(self.flags)  # no FREE page has a lower id
        # Every page id once: what it hands out are slices of this list, so handing out a
        # page makes no new int object (Python ints above 256 are objects of their own).
        self._page_ids = list(range(len(self.flags)))
        self.extend(ids)

    def __len__(self) -> int:
        return self._count

    def popleft_n(self, n: int) -> list[int]:
        """Remove and return the n lowest page ids, lowest first.

        Example: queue [0, 3, 5, 9], popleft_n(2) -> [0, 3]; the queue keeps [5, 9]."""
        if n > self._count:
            raise ValueError(f"n must be <= {self._count} FREE pages, got {n}")
        page_ids: list[int] = []
        for run in self._runs(n):  # consecutive ids: one slice assignment clears each run
            self.flags[run.start : run.stop] = bytes(len(run))
            page_ids += self._page_ids[run.start : run.stop]
            self._lowest = run.stop
        self._count -= n
        return page_ids

    def peek_n(self, n: int) -> list[int]:
        """The page ids `popleft_n(n)` would return, removing nothing."""
        return [page_id for run in self._runs(min(n, self._count)) for page_id in run]

    def _runs(self, n: int) -> list[range]:
        """The n lowest FREE ids (n <= len(self)) as runs of consecutive ids, changing nothing.

        Example: queue [0, 1, 2, 5, 9], _runs(4) -> [range(0, 3), range(5, 6)]."""
        flags, start, runs = self.flags, self._lowest, []
        while n:
            start = flags.find(1, start)
            stop = flags.find(0, start, start + n)  # -1: the run covers all n
            stop = start + n if stop < 0 else stop
            runs.append(range(start, stop))
            n -= stop - start
            start = stop
        return runs

    def append(self, page_id: int) -> None:
        """A page became FREE (its tokens and hash already dropped)."""
        self.extend([page_id])

    def extend(self, page_ids: Iterable[int]) -> None:
        """Several pages became FREE."""
        flags, count, lowest = self.flags, self._count, self._lowest
        for page_id in page_ids:
            flags[page_id] = 1
            count += 1
            if page_id < lowest:
                lowest = page_id
        self._count, self._lowest = count, lowest

    def page_ids(self) -> list[int]:
        """Every FREE page id, lowest first (a copy)."""
        return np.flatnonzero(np.frombuffer(self.flags, dtype=np.uint8)).tolist()

    def __contains__(self, page_id: object) -> bool:
        return isinstance(page_id, int) and 0 <= page_id < len(self.flags) and self.flags[page_id] == 1

    def reset(self, page_ids: Iterable[int]) -> None:
        """Replace the contents (checkpoint recovery)."""
        self.flags[:] = bytes(len(self.flags))
        self._count, self._lowest = 0, len(self.flags)
        self.extend(page_ids)

    def __repr__(self) -> str:
        return f"FreeQueue({self.page_ids()})"
