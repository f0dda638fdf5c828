"""PageState, PageTable and Page: the metadata of the physical pages of the KV cache.

A page is vLLM's `KVCacheBlock`: a fixed number of token slots (`page_size`) of K/V storage
for every layer, a reference count, the token ids written so far, and — once the page is
full and prefix caching is on — the chained block hash that names its whole prefix.

`PageTable` keeps that metadata for every page of a pool as parallel lists indexed by page
id (a structure of arrays, as vLLM's model runner keeps its block tables): `ref_count[7]`
is page 7's ref count. `Page` is a read-only view of one page (`pool.page(7)`), for
reading, printing and pictures.

A page's state is not stored: it follows from whether a block table holds the page (its
ref count) and whether it is on the free queue (its flag byte there), so it can never
disagree with them.

A page's token ids are a window into immutable bytes, the encoding block hashes digest
(`token_bytes`: int64 little-endian, 8 bytes a token): `token_data[p]` holds them and
`token_block[p]` says which page-sized block of it is page p's. The pages a prompt fills
all point into that prompt's one encoding, so admission copies no tokens per page; nothing
can change under a page, because bytes never change in place: a copy-on-write copies the
two fields, a decode append gives the page bytes of its own, and a FREE page holds `b""`.
NOTE: a page could instead hold its own slice of the bytes; on this project's machine that
cost about 8 us per 32-page prompt against 1 us for two stores per page, a fifth of all
`bench ops` bookkeeping. The price of sharing: a prompt's encoding (8 bytes a token) lives
until the last of its pages lets go of it.

The K/V themselves live in the pool's one preallocated array; `Page.keys` / `Page.values`
are numpy *views* into it, so writing through a view writes the pool's storage.

Leaves out: vLLM's doubly-linked free-queue pointers (`prev_free_block`/`next_free_block`);
pagedkv keeps FREE pages in the free queue (free_queue.py) and CACHED pages in the
eviction policy (eviction.py) instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum

import numpy as np

from pagedkv.core.hashing import TOKEN_BYTES, token_ids_of


class PageState(IntEnum):
    """Every page is in exactly one of these states (the int values are the heatmap codes)."""

    FREE = 0  # empty, on the free queue
    ACTIVE = 1  # ref_count >= 1: held by at least one block table
    CACHED = 2  # ref_count == 0, full and hashed: reusable by a prefix hit, evictable


FREE, ACTIVE, CACHED = PageState.FREE, PageState.ACTIVE, PageState.CACHED


class PageTable:
    """The metadata of every page, one list per field, indexed by page id.

    Read the lists freely; only the pool's verbs write them (with the prefix index, which
    names full pages, and checkpoint recovery)."""

    __slots__ = (
        "block_hash",
        "free_flags",
        "last_access",
        "page_bytes",
        "ref_count",
        "token_block",
        "token_data",
    )

    def __init__(self, num_pages: int, page_size: int, free_flags: bytearray) -> None:
        self.page_bytes = TOKEN_BYTES * page_size  # bytes of a full page's token ids
        self.free_flags = free_flags  # the free queue's: 1 for a FREE page
        self.ref_count: list[int] = [0] * num_pages  # block tables holding the page
        self.token_data: list[bytes] = [b""] * num_pages  # `token_bytes` holding its tokens
        self.token_block: list[int] = [0] * num_pages  # which page-sized block of token_data
        self.block_hash: list[bytes | None] = [None] * num_pages  # set when the page fills
        self.last_access: list[int] = [0] * num_pages  # logical clock of the last operation on it

    def __len__(self) -> int:
        return len(self.ref_count)

    def state(self, page_id: int) -> PageState:
        """ACTIVE if a block table holds the page, else FREE if it is on the free queue, else CACHED."""
        if self.ref_count[page_id]:
            return ACTIVE
        return FREE if self.free_flags[page_id] else CACHED

    def states(self) -> np.ndarray:
        """Every page's state code (`PageState` values), page id order, as int8."""
        held = np.array(self.ref_count) > 0
        free = np.frombuffer(bytes(self.free_flags), dtype=np.uint8).astype(bool)
        return np.where(held, int(ACTIVE), np.where(free, int(FREE), int(CACHED))).astype(np.int8)

    def tokens(self, page_id: int) -> bytes:
        """The `token_bytes` of the tokens a page holds, slot order.

        Example: page_size 2, token_data token_bytes([5, 6, 7]), token_block 1 -> token_bytes([7])."""
        start = self.token_block[page_id] * self.page_bytes
        return self.token_data[page_id][start : start + self.page_bytes]

    def num_tokens(self, page_id: int) -> int:
        """Slots of the page holding a token."""
        return len(self.tokens(page_id)) // TOKEN_BYTES

    def token_ids(self, page_id: int) -> list[int]:
        """The token ids a page holds, in slot order (a new list)."""
        return token_ids_of(self.tokens(page_id))

    def clear(self, page_ids: Iterable[int]) -> None:
        """The pages lost their content (they turned FREE, or were evicted): no tokens, no hash."""
        for page_id in page_ids:
            self.token_data[page_id] = b""
            self.token_block[page_id] = 0
            self.block_hash[page_id] = None


class Page:
    """A read-only view of one page's metadata and K/V (the pool's `page(page_id)`)."""

    __slots__ = ("_kv_cache", "_page_id", "_table")
    _kv_cache: np.ndarray
    _page_id: int
    _table: PageTable

    def __init__(self, table: PageTable, kv_cache: np.ndarray, page_id: int) -> None:
        object.__setattr__(self, "_table", table)
        object.__setattr__(self, "_kv_cache", kv_cache)
        object.__setattr__(self, "_page_id", page_id)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(
            f"a Page is a read-only view: change pages through the pool's verbs, not {name!r}"
        )

    @property
    def page_id(self) -> int:
        return self._page_id

    @property
    def state(self) -> PageState:
        return self._table.state(self.page_id)

    @property
    def ref_count(self) -> int:
        return self._table.ref_count[self.page_id]

    @property
    def block_hash(self) -> bytes | None:
        return self._table.block_hash[self.page_id]

    @property
    def last_access(self) -> int:
        return self._table.last_access[self.page_id]

    @property
    def num_tokens(self) -> int:
        """Slots of this page holding a token."""
        return self._table.num_tokens(self.page_id)

    @property
    def token_ids(self) -> list[int]:
        """The tokens written, in slot order (a copy)."""
        return self._table.token_ids(self.page_id)

    @property
    def keys(self) -> np.ndarray:
        """This page's keys, a view: [num_layers, page_size, kv_heads, head_dim]."""
        return self._kv_cache[:, 0, self.page_id]

    @property
    def values(self) -> np.ndarray:
        """This page's values, a view: [num_layers, page_size, kv_heads, head_dim]."""
        return self._kv_cache[:, 1, self.page_id]

    def __repr__(self) -> str:
        digest = self.block_hash.hex()[:8] if self.block_hash is not None else None
        return (
            f"Page(page_id={self.page_id}, state={self.state.name}, ref_count={self.ref_count}, "
            f"num_tokens={self.num_tokens}, block_hash={digest}, last_access={self.last_access})"
        )
