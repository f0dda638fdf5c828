"""SwapSpace: host-side pages that hold a preempted sequence's K/V until it resumes.

vLLM v0 kept such an area in CPU memory (`--swap-space`, GiB per GPU): preemption by swap
copied a sequence group's blocks GPU -> CPU, and the blocks came back before it ran again.
Here the swap space is a numpy array shaped like the pool's K/V, with page ids ("swap
slots") of its own handed out lowest first. As in v0, the scheduler only *decides*: it
takes swap slots (`allocate`) and lists (page, swap slot) pairs in its `SchedulerOutput`;
the model runner copies them (`copy_out`, `copy_in`) before it computes the step, so a
page freed by a preemption still holds its K/V when it is copied out. Whole pages are
copied both ways; on resume only the pages the prefix cache did not cover come back (v0
copied every block back).

Leaves out: asynchronous copies (a GPU engine issues them on a separate CUDA stream so they
overlap compute), swapped blocks shared between the sequences of a group, swapping to disk.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from pagedkv.core.free_queue import FreeQueue
from pagedkv.core.plumbing.validation import check_instance, check_int
from pagedkv.core.pool import KVCachePool


class SwapSpace:
    """`num_pages` host pages for the K/V of one pool's pages."""

    def __init__(self, pool: KVCachePool, num_pages: int) -> None:
        check_instance("pool", pool, KVCachePool)
        num_pages = check_int("swap_space_pages", num_pages, 0, 1 << 24)
        cfg = pool.config
        self.pool = pool
        self.kv_cache = np.zeros(
            (cfg.num_layers, 2, num_pages, *cfg.kv_shape[3:]), dtype=cfg.dtype
        )  # [layers, 2, swap_pages, page_size, kv_heads, head_dim]
        self.page_bytes = cfg.kv_bytes // cfg.num_pages  # one page, every layer, K and V
        self.free_queue = FreeQueue(range(num_pages))  # swap slots, lowest id first

    @property
    def num_pages(self) -> int:
        return self.kv_cache.shape[2]

    @property
    def num_free_pages(self) -> int:
        return len(self.free_queue)

    def allocate(self, n: int) -> list[int] | None:
        """Take `n` swap slots (lowest first), or None, taking nothing, if fewer are free."""
        if n > len(self.free_queue):
            return None
        return self.free_queue.popleft_n(n)

    def free(self, swap_slots: Iterable[int]) -> None:
        """Give swap slots back (the lowest is handed out first again)."""
        self.free_queue.extend(swap_slots)

    def copy_out(self, pairs: Iterable[tuple[int, int]]) -> None:
        """Copy each (pool page, swap slot) pair's K/V, every layer, to the swap space."""
        pages, slots = _columns(pairs)
        self.kv_cache[:, :, slots] = self.pool.kv_cache[:, :, pages]

    def copy_in(self, pairs: Iterable[tuple[int, int]]) -> None:
        """Copy each (swap slot, pool page) pair's K/V, every layer, back into the pool."""
        slots, pages = _columns(pairs)
        self.pool.kv_cache[:, :, pages] = self.kv_cache[:, :, slots]

    def __repr__(self) -> str:
        return f"SwapSpace(num_pages={self.num_pages}, num_free_pages={self.num_free_pages})"


def _columns(pairs: Iterable[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """[(1, 5), (2, 6)] -> ([1, 2], [5, 6])."""
    pairs = list(pairs)
    return [a for a, _ in pairs], [b for _, b in pairs]
