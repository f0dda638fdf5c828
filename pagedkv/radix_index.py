"""RadixPrefixIndex: SGLang's radix tree as the prefix index of a `KVCachePool`.

`CacheConfig(prefix_index="radix")` makes the pool find prefix hits in a `RadixCache`
(token runs, compared token by token) instead of `PrefixIndex`'s dict of chained block
hashes; sequences, attention, the scheduler, snapshots and pictures do not change, because
this class answers the same verbs: `find_longest_cache_hit`, `insert_all`, `remove_all`,
`holds`, `get`, `items`, `clear`. Its eviction policy, `LeafLRUEvictionPolicy`, is
SGLang's: only a page at the end of a leaf may go, least recently used leaf first.

How it fits the pool, and where that differs from SGLang itself:
- Pages enter the tree when they fill, as they enter the hash index (docs/design.md
  rule 4); SGLang inserts a request's pages after its prefill and when it finishes.
- Ref counts protect pages, so the tree's own lock counts stay at zero here: a CACHED page
  is evictable, an ACTIVE one is not; SGLang locks the path of each running request.
- The pool asks for exactly the pages it needs, so a leaf gives up pages one at a time,
  tail first. SGLang frees whole leaves (`RadixCache.evict`), which can free more.
- A block's parent must be in the tree for the block to be indexed. The hash chain can
  index a block whose parent page is a non-indexed duplicate whose original was evicted
  (an orphan no lookup reaches until the parent is cached again); the tree cannot. This
  is the one case where the two indexes can give different hit tokens.
- The root's children are keyed by the first block's hash, which folds in the extra key
  (the pool hands indexes block hashes, not extra keys): trees of different extra keys
  never share a node, as SGLang's `RadixKey.extra_key` guarantees.

Leaves out: checkpoints (`KVCachePool.restore` rebuilds a hash index only).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence

from .eviction import EvictionPolicy
from .page import Page
from .radix_cache import RadixCache, RadixNode


class RadixPrefixIndex:
    """The pool's prefix index as a radix tree over token runs (one page per tree page)."""

    def __init__(self, pages: Sequence[Page], page_size: int) -> None:
        self._pages = pages  # the pool's pages: their token ids are the tree's keys
        self._page_size = page_size
        self.tree = RadixCache(page_size)
        self._map: dict[bytes, int] = {}  # block hash -> page id, for the pages in the tree

    def __len__(self) -> int:
        return len(self._map)

    def get(self, block_hash: bytes | None) -> int | None:
        """The page in the tree holding the block with this hash, or None."""
        return self._map.get(block_hash) if block_hash is not None else None

    def holds(self, page: Page) -> bool:
        """Whether `page` is in the tree (a duplicate of a page in the tree is not)."""
        return self.tree.node_of(page.page_id) is not None

    def find_longest_cache_hit(self, block_hashes: Sequence[bytes], token_ids: Sequence[int]) -> list[int]:
        """Pages of the longest whole-page prefix of `token_ids` in the tree, looking at no
        more blocks than `block_hashes` names. Changes nothing (no split, no clock)."""
        if not block_hashes:
            return []
        return self.tree.lookup(token_ids[: len(block_hashes) * self._page_size], block_hashes[0])

    def insert_all(self, block_hashes: Sequence[bytes], page_ids: Sequence[int], parent: int | None = None) -> None:
        """Add full pages that continue the prefix ending with page `parent` (None: they
        start a prompt). Pages whose prefix is in the tree already are not added."""
        if not page_ids:
            return
        if parent is None:
            tokens, pages, extra = [], [], block_hashes[0]
        else:
            anchor = self._map.get(self._pages[parent].block_hash)  # parent or its original
            if anchor is None:
                return  # the parent's content left the tree: no path to hang these pages on
            tokens, pages, extra = self.tree.path_to(anchor)
        for page_id in page_ids:
            tokens = tokens + self._pages[page_id].token_ids
        self.tree.insert(tokens, pages + list(page_ids), extra)
        for block_hash, page_id in zip(block_hashes, page_ids):
            if self.tree.node_of(page_id) is not None:
                self._map[block_hash] = page_id

    def remove_all(self, block_hashes: Sequence[bytes | None]) -> None:
        """Drop evicted pages, in eviction order: each is the last page of a leaf by then."""
        for block_hash in block_hashes:
            assert block_hash is not None, "an evicted page had no hash"
            self.tree.remove_leaf_page(self._map.pop(block_hash))

    def items(self) -> Iterator[tuple[bytes, int]]:
        """(block hash, page id) pairs of the pages in the tree."""
        return iter(list(self._map.items()))

    def clear(self) -> None:
        self.tree.reset()
        self._map.clear()

    def check(self) -> None:
        """The tree's own rules, and the hash map naming exactly the tree's pages."""
        self.tree.check()
        assert sorted(self._map.values()) == sorted(self.tree.page_ids()), "hash map != tree"

    def eviction_policy(self) -> LeafLRUEvictionPolicy:
        return LeafLRUEvictionPolicy(self.tree)

    def __repr__(self) -> str:
        return f"RadixPrefixIndex({self.tree.num_nodes} nodes, {len(self._map)} pages)"


class LeafLRUEvictionPolicy(EvictionPolicy):
    """SGLang's eviction over the tree: the last page of the least recently used leaf.

    A page's release and a prefix hit on it count as uses (SGLang touches a path when a
    request matches it and when it inserts at the end); a leaf's pages go tail first, and a
    parent whose children are all gone becomes a leaf."""

    def __init__(self, tree: RadixCache) -> None:
        super().__init__()
        self.tree = tree

    def add(self, page_id: int) -> None:
        super().add(page_id)
        self.tree.touch(page_id)

    def add_all(self, page_ids: list[int]) -> None:
        super().add_all(page_ids)
        for page_id in page_ids:  # tail first: a parent is never older than its children
            self.tree.touch(page_id)

    def remove(self, page_id: int) -> None:
        super().remove(page_id)
        self.tree.touch(page_id)

    def order(self) -> list[int]:
        evictable = self._pages
        left: dict[RadixNode, int] = {}  # node -> pages not yet given up
        children: dict[RadixNode, int] = {}  # node -> children not yet gone
        heap: list[tuple[int, int, RadixNode]] = []
        for node in self.tree.nodes():
            left[node], children[node] = len(node.value), len(node.children)
            if node.is_leaf and node.value and node.value[-1] in evictable:
                heap.append((node.last_access, node.node_id, node))
        heapq.heapify(heap)
        out = []
        while heap:
            entry = heapq.heappop(heap)
            node = entry[2]
            left[node] -= 1
            out.append(node.value[left[node]])
            if left[node]:
                if node.value[left[node] - 1] in evictable:
                    heapq.heappush(heap, entry)
                continue
            parent = node.parent
            children[parent] -= 1
            if parent is not self.tree.root and not children[parent] and parent.value[-1] in evictable:
                heapq.heappush(heap, (parent.last_access, parent.node_id, parent))
        return out

    def pop_victim(self) -> int:
        return self.pop_victims(1)[0]

    def pop_victims(self, n: int) -> list[int]:
        victims = self.order()[:n]
        if len(victims) < n:
            raise KeyError(f"{n} victims asked, {len(victims)} evictable")
        for page_id in victims:
            del self._pages[page_id]
        return victims
