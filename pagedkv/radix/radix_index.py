"""RadixPrefixIndex: SGLang's radix tree as the prefix index of a `KVCachePool`.

`CacheConfig(prefix_index="radix")` makes the pool find prefix hits in a `RadixCache`
(token runs, compared token by token) instead of `PrefixIndex`'s dict of chained block
hashes; sequences, attention, the scheduler, snapshots and pictures do not change, because
this class answers the same verbs: `find_longest_cache_hit`, `insert_all`, `remove_all`,
`holds_page`, `get`, `items`, `clear`. Its eviction policy, `LeafLRUEvictionPolicy`, is
SGLang's: only a page at the end of a leaf may go, least recently used leaf first.

How it fits the pool, and where that differs from SGLang itself:
- Pages enter the tree when they fill, as they enter the hash index (docs/design.md
  rule 4); SGLang inserts a request's pages after its prefill and when it finishes.
- Ref counts protect pages, so the tree's own lock counts stay at zero here: a CACHED page
  is evictable, an ACTIVE one is not; SGLang locks the path of each running request.
- The pool asks for exactly the pages it needs, so a leaf gives up pages one at a time,
  tail first. SGLang frees whole leaves (`RadixCache.evict`), which can free more.
- An insert that continues a leaf lengthens it (`extend_leaves`), so a run written page by
  page is one node; SGLang adds a child per insert (a node per chat turn, say).
- A block is indexed only if its parent *page* is in the tree. A sequence that recomputed
  a cached page (an identical prompt recomputes the page of its last token, rule 5) holds
  a copy the index does not keep; the hash chain still indexes what the sequence writes
  after the copy (its hash chains through the copy's equal hash), and LRU may later evict
  the original parent and leave those pages orphaned. The tree keeps them out instead, so
  every CACHED page stays evictable leaf-first. This, and the leaf-first order it allows,
  are where the two indexes can serve different hit tokens (tests/test_radix_index.py).
- The root's children are keyed by the first block's hash, which folds in the extra key
  (the pool hands indexes block hashes, not extra keys): trees of different extra keys
  never share a node, as SGLang's `RadixKey.extra_key` guarantees.

Leaves out: checkpoints (`restore_pool` rebuilds a hash index only).
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Hashable, Sequence

from pagedkv.core.eviction import EvictionPolicy
from pagedkv.core.page import PageTable
from pagedkv.core.prefix_index import PrefixIndex, register_prefix_index
from pagedkv.radix.radix_cache import RadixCache, RadixNode


class RadixPrefixIndex(PrefixIndex):
    """The pool's prefix index as a radix tree over token runs (one page per tree page).

    `hash_to_page` (from PrefixIndex, with `len`, `get` and `items`) names exactly the
    pages in the tree; the pool's release loop reads it as it reads PrefixIndex's, and it
    changes only with the tree, by the methods below."""

    def __init__(self, table: PageTable, page_size: int) -> None:
        super().__init__(table, page_size)  # its table: the pages' token ids are the tree's keys
        self.tree = RadixCache(page_size, extend_leaves=True)

    def holds_page(self, page_id: int) -> bool:
        """Whether the page is in the tree."""
        return self.tree.node_of(page_id) is not None

    def find_longest_cache_hit(
        self, block_hashes: Sequence[bytes], token_ids: Sequence[int] | array
    ) -> list[int]:
        """Pages of the longest whole-page prefix of `token_ids` in the tree, looking at no
        more blocks than `block_hashes` names. Changes nothing (no split, no clock)."""
        if not block_hashes:
            return []
        return self.tree.lookup(list(token_ids[: len(block_hashes) * self._page_size]), block_hashes[0])

    def insert_all(
        self, page_ids: Sequence[int], block_hashes: Sequence[bytes], parent: int | None = None
    ) -> None:
        """Full pages get their block hashes and go into the tree if they continue the
        prefix ending with page `parent` (None: they start a prompt). Pages whose prefix is
        in the tree already are not added (they keep their hashes, as duplicates do)."""
        if not page_ids:
            return
        for page_id, block_hash in zip(page_ids, block_hashes):
            self._table.block_hash[page_id] = block_hash
        tokens: list[int]
        pages: list[int]
        extra: Hashable
        if parent is None:
            tokens, pages, extra = [], [], block_hashes[0]
        else:
            if self.tree.node_of(parent) is None:
                # The parent is a recomputed copy of a page in the tree (or its content is
                # gone): hanging these pages under the original would make a CACHED page
                # the parent of pages its holders do not hold, so it could not be evicted.
                return
            tokens, pages, extra = self.tree.path_to(parent)
        for page_id in page_ids:
            tokens = tokens + self._table.token_ids(page_id)
        self.tree.insert(tokens, pages + list(page_ids), extra)
        for block_hash, page_id in zip(block_hashes, page_ids):
            if self.tree.node_of(page_id) is not None:
                self.hash_to_page[block_hash] = page_id

    def remove_all(self, page_ids: Sequence[int]) -> None:
        """Evicted pages leave the tree and lose their hashes, in eviction order: each is
        the last page of a leaf by then."""
        page_hash = self._table.block_hash
        for page_id in page_ids:
            self.tree.remove_leaf_page(page_id)
            del self.hash_to_page[page_hash[page_id]]  # type: ignore[arg-type]  # CACHED: hashed
            page_hash[page_id] = None

    def clear(self) -> None:
        self.tree.reset()
        super().clear()

    def check(self) -> None:
        """The tree's own rules, and the hash map naming exactly the tree's pages."""
        self.tree.check()
        assert sorted(self.hash_to_page.values()) == sorted(self.tree.page_ids()), "hash map != tree"

    def eviction_policy(self) -> LeafLRUEvictionPolicy:
        return LeafLRUEvictionPolicy(self.tree)

    def __repr__(self) -> str:
        return f"RadixPrefixIndex({self.tree.num_nodes} nodes, {len(self.hash_to_page)} pages)"


class LeafLRUEvictionPolicy(EvictionPolicy):
    """SGLang's eviction over the tree: the last page of the least recently used leaf.

    A page is used when it is released or revived by a prefix hit, and using a page uses
    its whole prefix, as a request that matches or inserts a path touches every node on it
    in SGLang. Times are kept per page (SGLang splits a node where a match ends, so its
    node times are page-exact too). A leaf's pages go tail first, and a parent whose
    children are all gone becomes a leaf."""

    def __init__(self, tree: RadixCache) -> None:
        super().__init__()
        self.tree = tree
        self._time: dict[int, int] = {}  # page id -> last use of it or of a page below it
        self._now = 0

    def _use(self, page_id: int) -> None:
        now, time, size = self._now, self._time, self.tree.page_size
        node = self.tree.node_of(page_id)
        assert node is not None, f"page {page_id} is not in the tree"
        end = node.value.index(page_id) + 1
        while node.parent is not None:  # up to the root, which holds no page
            for p in reversed(node.value[:end]):
                if time.get(p) == now:  # this prefix was used in this same call already
                    return
                time[p] = now
            node = node.parent
            end = len(node.key) // size

    def add(self, page_id: int) -> None:
        super().add(page_id)
        self._now += 1
        self._use(page_id)

    def add_all(self, page_ids: list[int]) -> None:
        super().add_all(page_ids)
        self._now += 1
        for page_id in page_ids:
            self._use(page_id)

    def remove(self, page_id: int) -> None:
        super().remove(page_id)
        self._now += 1
        self._use(page_id)

    def order(self) -> list[int]:
        evictable, time = self._pages, self._time
        left: dict[RadixNode, int] = {}  # node -> pages not yet given up
        children: dict[RadixNode, int] = {}  # node -> children not yet gone
        heap: list[tuple[int, int, RadixNode]] = []
        for node in self.tree.nodes():
            left[node], children[node] = len(node.value), len(node.children)
            if node.is_leaf and node.value and node.value[-1] in evictable:
                heap.append((time[node.value[-1]], node.node_id, node))
        heapq.heapify(heap)
        out = []
        while heap:
            node = heapq.heappop(heap)[2]
            left[node] -= 1
            out.append(node.value[left[node]])
            if left[node]:
                tail = node.value[left[node] - 1]
                if tail in evictable:
                    heapq.heappush(heap, (time[tail], node.node_id, node))
                continue
            parent = node.parent
            assert parent is not None, "the root is never a victim"
            children[parent] -= 1
            if parent is not self.tree.root and not children[parent] and parent.value[-1] in evictable:
                heapq.heappush(heap, (time[parent.value[-1]], parent.node_id, parent))
        return out

    def pop_victim(self) -> int:
        return self.pop_victims(1)[0]

    def pop_victims(self, n: int) -> list[int]:
        victims = self.order()[:n]
        if len(victims) < n:
            raise KeyError(f"{n} victims asked, {len(victims)} evictable")
        for page_id in victims:
            del self._pages[page_id], self._time[page_id]
        return victims

    def clear(self) -> None:
        super().clear()
        self._time.clear()


register_prefix_index("radix", RadixPrefixIndex)
