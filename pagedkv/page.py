"""Page and PageState: the metadata of one physical page of the KV cache.

A page is vLLM's `KVCacheBlock`: a fixed number of token slots (`page_size`) of K/V storage
for every layer, a reference count, the token ids written so far, and — once the page is
full and prefix caching is on — the chained block hash that names its whole prefix.

The K/V themselves live in the pool's one preallocated array; `Page.keys` / `Page.values`
are numpy *views* into it, so writing through a view writes the pool's storage. (The
views are made on access: building two per page up front costs more than the whole
bookkeeping of a large pool's lifetime.)

Leaves out: vLLM's doubly-linked free-queue pointers (`prev_free_block`/`next_free_block`);
pagedkv keeps FREE pages in the free queue (free_queue.py) and CACHED pages in the
eviction policy (eviction.py) instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np


class PageState(IntEnum):
    """Every page is in exactly one of these states (the int values are the heatmap codes)."""

    FREE = 0  # empty, on the free list
    ACTIVE = 1  # ref_count >= 1: held by at least one block table
    CACHED = 2  # ref_count == 0, full and hashed: reusable by a prefix hit, evictable


@dataclass(slots=True, eq=False)
class Page:
    page_id: int
    kv_cache: np.ndarray = field(repr=False)  # the pool's store [layers, 2, num_pages, ...]
    state: PageState = PageState.FREE
    ref_count: int = 0
    token_ids: list[int] = field(default_factory=list)  # tokens written, in slot order
    block_hash: bytes | None = None  # set when the page fills (prefix caching on)
    last_access: int = 0  # logical clock of the last operation that touched the page

    @property
    def keys(self) -> np.ndarray:
        """This page's keys, a view: [num_layers, page_size, kv_heads, head_dim]."""
        return self.kv_cache[:, 0, self.page_id]

    @property
    def values(self) -> np.ndarray:
        """This page's values, a view: [num_layers, page_size, kv_heads, head_dim]."""
        return self.kv_cache[:, 1, self.page_id]

    @property
    def num_tokens(self) -> int:
        """Slots of this page holding a token."""
        return len(self.token_ids)

    def __repr__(self) -> str:
        digest = self.block_hash.hex()[:8] if self.block_hash is not None else None
        return (
            f"Page(page_id={self.page_id}, state={self.state.name}, ref_count={self.ref_count}, "
            f"num_tokens={self.num_tokens}, block_hash={digest}, last_access={self.last_access})"
        )
