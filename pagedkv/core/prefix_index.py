"""PrefixIndex: block hash -> page id, and the longest verified prefix of a prompt.

A full page enters the index under its chained block hash the moment it fills
(docs/design.md rule 4); admission walks a prompt's block hashes through the index and
stops at the first miss (docs/design.md rule 5). Because the hashes are chained, a hit on block i means
blocks 0..i all match, so a prefix is found without a tree.

vLLM v1 keeps the same map in `BlockPool.cached_block_hash_to_block` and walks it in
`find_longest_cache_hit`; SGLang gets the same answer from a radix tree keyed by token
ids. Two deliberate differences from vLLM:

- One page per hash. vLLM maps a hash to every block holding it; here the first page
  indexed keeps the entry and a later duplicate is not indexed (docs/design.md, "Duplicate
  full pages"), so the pictures show one page per prefix.
- The collision guard. A hit must hold exactly the block's token ids, compared against
  the page, so even a hash collision could never serve the wrong K/V. vLLM trusts sha256.

The index also names the pages: `insert_all` gives a full page its block hash and
`remove_all` (eviction) takes it away, so a page carries a hash exactly while it is full
and its content may be indexed.

Leaves out: multiple KV-cache groups (vLLM's hybrid models index one map per group) and
eviction bookkeeping (which page goes first is the eviction policy's job, eviction.py).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from pagedkv.core.hashing import TOKEN_BYTES, token_bytes
from pagedkv.core.page import PageTable

if TYPE_CHECKING:
    from pagedkv.core.eviction import EvictionPolicy


class PrefixIndex:
    """The prefix cache's map from block hash to the page holding that block."""

    def __init__(self, table: PageTable, page_size: int) -> None:
        self._table = table  # the pool's page metadata: hashes, and tokens for the collision guard
        self._page_size = page_size
        # block hash -> page id (vLLM: `cached_block_hash_to_block`). Read it freely;
        # change it only through the methods below.
        self.hash_to_page: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self.hash_to_page)

    def get(self, block_hash: bytes | None) -> int | None:
        """The page indexed under `block_hash`, or None."""
        return self.hash_to_page.get(block_hash) if block_hash is not None else None

    def holds_page(self, page_id: int) -> bool:
        """Whether the page is the one indexed under its own hash (by page id)."""
        digest = self._table.block_hash[page_id]
        return digest is not None and self.hash_to_page.get(digest) == page_id

    def insert_all(
        self, page_ids: Sequence[int], block_hashes: Sequence[bytes], parent: int | None = None
    ) -> None:
        """Full pages get their block hashes and enter the index; a hash already indexed
        keeps its page (first one wins). (`parent`, the page before them, is for the radix
        index, radix_index.py; a chained hash names its parent already.)

        Example: {h1: 4} and insert_all([7, 8], [h1, h2]) -> {h1: 4, h2: 8}; pages 7 and 8
        both carry their hashes (7 is a duplicate, not indexed)."""
        page_hash, index = self._table.block_hash, self.hash_to_page
        for page_id, block_hash in zip(page_ids, block_hashes):
            page_hash[page_id] = block_hash
            index.setdefault(block_hash, page_id)

    def remove_all(self, page_ids: Sequence[int]) -> None:
        """Evicted pages leave the index and lose their hashes (each was CACHED, so indexed)."""
        page_hash, index = self._table.block_hash, self.hash_to_page
        for page_id in page_ids:
            del index[page_hash[page_id]]  # type: ignore[arg-type]  # a CACHED page has a hash
            page_hash[page_id] = None

    def find_longest_cache_hit(
        self, block_hashes: Sequence[bytes], token_ids: Sequence[int] | array
    ) -> list[int]:
        """Pages holding the longest verified prefix of `block_hashes`, block order.

        Stops at the first miss. Example: index {h0: 3, h1: 5}, hashes [h0, h1, h2] ->
        [3, 5]; hashes [h0, hx, h2] -> [3] (a chained h2 cannot match after a miss)."""
        data, width = token_bytes(token_ids), TOKEN_BYTES * self._page_size  # width: bytes a page holds
        hits: list[int] = []
        for i, block_hash in enumerate(block_hashes):
            page_id = self.hash_to_page.get(block_hash)
            # Collision guard: a hit must hold exactly this block's tokens.
            if page_id is None or self._table.tokens(page_id) != data[i * width : (i + 1) * width]:
                break
            hits.append(page_id)
        return hits

    def items(self) -> Iterator[tuple[bytes, int]]:
        """(block hash, page id) pairs, in insertion order."""
        return iter(list(self.hash_to_page.items()))

    def eviction_policy(self) -> EvictionPolicy | None:
        """An index that decides eviction itself returns its policy (the radix tree gives up
        leaves only); None lets `CacheConfig.eviction_policy` decide."""
        return None

    def clear(self) -> None:
        self.hash_to_page.clear()

    def __repr__(self) -> str:
        return f"PrefixIndex({len(self.hash_to_page)} blocks)"


# name -> index class: "hash" here (vLLM's chained block hashes); pagedkv.radix registers
# "radix" (SGLang's tree). `CacheConfig(prefix_index=name)` picks one.
PREFIX_INDEXES: dict[str, type[PrefixIndex]] = {"hash": PrefixIndex}


def register_prefix_index(name: str, index: type[PrefixIndex]) -> None:
    """Make `CacheConfig(prefix_index=name)` build `index(page_table, page_size)`."""
    PREFIX_INDEXES[name] = index
