"""SwapSpace: host-side pages that hold a preempted sequence's K/V until it resumes.

vLLM v0 kept such an area in CPU memory (`--swap-space`, GiB per GPU): preemption by swap
copied a sequence group's blocks GPU -> CPU, and the blocks came back before it ran again.
Here the swap space is a numpy array shaped like the pool's K/V, with page ids of its own
handed out lowest first. `swap_out` copies whole pages, the partial last one included, as
v0 did; `swap_in` copies back only the positions it is given — the Scheduler asks for the
tokens the prefix cache did not cover when it re-admitted the sequence (v0 copied every
block back).

Leaves out: asynchronous copies (a GPU engine issues them on a separate CUDA stream so they
overlap compute), swapped blocks shared between the sequences of a group, swapping to disk.
"""

from __future__ import annotations

import numpy as np

from .attention import AttentionEngine
from .free_queue import FreeQueue
from .pool import KVCachePool
from .slot_mapping import slot_mapping
from .validation import check_instance, check_int


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
        self.free_queue = FreeQueue(range(num_pages))  # host pages, lowest id first
        self._engine = AttentionEngine(pool)

    @property
    def num_pages(self) -> int:
        return self.kv_cache.shape[2]

    @property
    def num_free_pages(self) -> int:
        return len(self.free_queue)

    def swap_out(self, block_table: list[int]) -> list[int] | None:
        """Copy these pool pages' K/V (whole pages) to host pages; return the host page ids in
        block order, or None, copying nothing, when too few host pages are free."""
        if len(block_table) > len(self.free_queue):
            return None
        host_pages = self.free_queue.popleft_n(len(block_table))
        self.kv_cache[:, :, host_pages] = self.pool.kv_cache[:, :, block_table]
        return host_pages

    def swap_in(self, host_pages: list[int], start: int, slots: np.ndarray) -> None:
        """Copy the K/V of positions start, start + 1, ... (one per slot) of a sequence swapped
        out to `host_pages` back into the pool at `slots`; then release the host pages."""
        positions = np.arange(start, start + len(slots))
        host_slots = slot_mapping(host_pages, self.pool.page_size, positions)
        flat = self.kv_cache.reshape(self.kv_cache.shape[0], 2, -1, *self.kv_cache.shape[4:])
        for layer in range(flat.shape[0]):  # flat: [layers, 2, swap_pages * page_size, kv_heads, head_dim]
            self._engine.write(layer, slots, flat[layer, 0, host_slots], flat[layer, 1, host_slots])
        for host_page in host_pages:
            self.free_queue.append(host_page)

    def __repr__(self) -> str:
        return f"SwapSpace(num_pages={self.num_pages}, num_free_pages={self.num_free_pages})"
