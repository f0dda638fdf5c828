"""RadixCache: SGLang's prefix index, a radix tree keyed by runs of token ids.

vLLM names a full page by a chained hash and keeps `block hash -> page id` in a dict;
SGLang keeps the tokens themselves in a radix tree (its `RadixCache`). Each node holds a
run of tokens (`key`, a whole number of pages) and the pages that store their K/V
(`value`, one page id per page); the path from the root spells a prefix. This module is
that tree, page-aligned as SGLang's is when `page_size > 1`:

- `match_prefix(tokens)` walks down as far as whole pages match and returns their page
  ids. A match that ends inside a node *splits* it in two (the size of the tree does not
  change), so the matched part is a node that can be locked on its own.
- `insert(tokens, page_ids)` adds a finished request's pages and returns how many tokens
  were already in the tree: the caller frees its own copies of those (the tree keeps one).
- `inc_lock_ref(node)` / `dec_lock_ref(node)` count the running requests that use the path
  from `node` to the root; locked nodes are `protected`, the rest `evictable`.
- `evict(num_pages)` frees unlocked *leaves*, least recently used first (`last_access`, a
  logical clock ticked by every match and insert), whole nodes at a time as SGLang does,
  and a parent left without children becomes a leaf in turn.
- `extra_key` (cache salt, adapter name) enters every child key, so trees of different
  extra keys never share a node (SGLang's `RadixKey.extra_key`).

How it differs from the hash chain (pagedkv/core/hashing.py and pagedkv/core/prefix_index.py;
notebook 09 compares the two):
- Lookup compares tokens, so no collision guard is needed; a hash index needs one.
- A node is a *run* of pages: a 40-page chat turn that nobody shares is one node, where the
  hash index holds 40 entries. Eviction is node-granular: a leaf goes whole, even when a
  single page was needed, so the tree can evict more pages than the hash chain does.
- The order of victims is last *access* (match or insert), leaves only; vLLM's is release
  order over all CACHED pages. A request releases its pages tail first, so vLLM's LRU is
  leaf-first too, with one exception: pages written after a recomputed copy of a cached
  page (pagedkv/radix/radix_index.py).

Leaves out: SGLang's host (CPU) tier, the C++ tree, KV events, eviction strategies other
than LRU, and page_size 1's token-by-token children (page_size 1 works, one token per page).
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field

from pagedkv.core.plumbing.validation import check_int


@dataclass(eq=False)
class RadixNode:
    key: list[int]  # token ids of this run: len(key) == len(value) * page_size
    value: list[int]  # page ids holding the run, one per page
    parent: RadixNode | None = None
    children: dict[tuple, RadixNode] = field(default_factory=dict)  # (extra key, first page) -> child
    lock_ref: int = 0  # running requests whose path goes through this node
    last_access: int = 0  # logical clock of the last match or insert that touched it
    node_id: int = 0  # creation order (ties in the eviction order; pictures)

    @property
    def is_leaf(self) -> bool:
        return not self.children


@dataclass(frozen=True)
class MatchResult:
    page_ids: list[int]  # pages of the matched prefix, in order
    last_node: RadixNode  # the node where the match ends (lock it while the request runs)

    @property
    def num_pages(self) -> int:
        return len(self.page_ids)


class RadixCache:
    """A page-aligned radix tree from token runs to page ids."""

    def __init__(self, page_size: int = 16, extend_leaves: bool = False) -> None:
        self.page_size = check_int("page_size", page_size, 1, 1 << 16)
        # With extend_leaves, an insert that continues an unlocked leaf lengthens it instead
        # of hanging a one-run child under it: a run written page by page (the pool indexes
        # decode pages as they fill) stays one node, as one SGLang insert of the whole run makes it.
        self.extend_leaves = extend_leaves
        self.reset()

    def reset(self) -> None:
        """Forget everything (the caller frees the pages)."""
        self.clock = 0
        self._next_id = 0
        self.root = self._node([], [], None)
        self.root.lock_ref = 1  # the root is never evicted
        self._evictable = 0  # pages in unlocked nodes
        self._protected = 0  # pages in locked nodes (root excluded)
        self._node_of: dict[int, RadixNode] = {}  # page id -> the node holding it

    # ---- sizes -------------------------------------------------------------------------------

    def total_size(self) -> int:
        """Pages in the tree."""
        return self._evictable + self._protected

    def evictable_size(self) -> int:
        return self._evictable

    def protected_size(self) -> int:
        return self._protected

    @property
    def num_nodes(self) -> int:
        """Nodes below the root."""
        return sum(1 for _ in self.nodes()) - 1

    # ---- match and insert -------------------------------------------------------------------

    def match_prefix(self, token_ids: Sequence[int], extra_key: Hashable = None) -> MatchResult:
        """Pages of the longest whole-page prefix of `token_ids` in the tree. Splits the node
        where the match ends if it ends inside one. Example (page_size 2, tree [1,2,3,4]):
        match_prefix([1, 2, 3, 9]) -> page_ids [p0], and the node [1,2,3,4] is split into
        [1,2] -> [3,4]."""
        self.clock += 1
        key = list(token_ids[: len(token_ids) // self.page_size * self.page_size])
        node, pages = self.root, []
        node.last_access = self.clock
        while key:
            child = node.children.get(self._child_key(key, extra_key))
            if child is None:
                break
            n = self._match_len(child.key, key)
            if n < len(child.key):
                child = self._split(child, n)  # the unmatched rest keeps its last access
            child.last_access = self.clock
            pages += child.value
            node, key = child, key[n:]
        return MatchResult(pages, node)

    def insert(self, token_ids: Sequence[int], page_ids: Sequence[int], extra_key: Hashable = None) -> int:
        """Add the whole pages of `token_ids`, stored in `page_ids` (one per page); return
        the number of tokens that were in the tree already (their pages in `page_ids` are
        duplicates the caller frees)."""
        size = self.page_size
        key = list(token_ids[: len(token_ids) // size * size])
        if len(page_ids) < len(key) // size:
            raise ValueError(
                f"page_ids must hold one page per {size} tokens: {len(key) // size} needed, "
                f"got {len(page_ids)}"
            )
        self.clock += 1
        values = list(page_ids[: len(key) // size])
        node, prefix = self.root, 0
        node.last_access = self.clock
        while key:
            child = node.children.get(self._child_key(key, extra_key))
            if child is None and self.extend_leaves and node.is_leaf and not node.lock_ref:
                node.key, node.value = node.key + key, node.value + values
                self._evictable += len(values)
                self._node_of.update(dict.fromkeys(values, node))
                break
            if child is None:
                leaf = self._node(key, values, node)
                node.children[self._child_key(key, extra_key)] = leaf
                self._evictable += len(values)
                self._node_of.update(dict.fromkeys(values, leaf))
                break
            n = self._match_len(child.key, key)
            if n < len(child.key):
                child = self._split(child, n)
            child.last_access = self.clock
            prefix += n
            node, key, values = child, key[n:], values[n // size :]
        return prefix

    # ---- locks and eviction -----------------------------------------------------------------

    def inc_lock_ref(self, node: RadixNode) -> None:
        """A running request uses the path root..node: protect it from eviction."""
        while node is not self.root:
            if node.lock_ref == 0:
                self._evictable -= len(node.value)
                self._protected += len(node.value)
            node.lock_ref += 1
            node = self._parent(node)

    def dec_lock_ref(self, node: RadixNode) -> None:
        """The request no longer uses the path root..node."""
        while node is not self.root:
            if node.lock_ref <= 0:
                raise ValueError(f"node {node.node_id} is not locked")
            node.lock_ref -= 1
            if node.lock_ref == 0:
                self._protected -= len(node.value)
                self._evictable += len(node.value)
            node = self._parent(node)

    def evict(self, num_pages: int) -> list[int]:
        """Free unlocked leaves, least recently accessed first, until at least `num_pages`
        pages are freed or nothing is evictable; return the freed page ids, victims in order
        (each leaf's pages tail first)."""
        check_int("num_pages", num_pages, 0)
        heap = [(n.last_access, n.node_id, n) for n in self.nodes() if n.is_leaf and not n.lock_ref]
        heapq.heapify(heap)
        freed: list[int] = []
        while len(freed) < num_pages and heap:
            _, _, leaf = heapq.heappop(heap)
            freed += reversed(leaf.value)
            self._evictable -= len(leaf.value)
            for page_id in leaf.value:
                del self._node_of[page_id]
            parent = self._parent(leaf)
            del parent.children[next(k for k, c in parent.children.items() if c is leaf)]
            if parent.is_leaf and not parent.lock_ref:
                heapq.heappush(heap, (parent.last_access, parent.node_id, parent))
        return freed

    # ---- page-level verbs (the tree as the prefix index of a KVCachePool, radix_index.py) ---

    def lookup(self, token_ids: Sequence[int], extra_key: Hashable = None) -> list[int]:
        """`match_prefix(...).page_ids` without splitting a node or touching the clock."""
        key = list(token_ids[: len(token_ids) // self.page_size * self.page_size])
        node, pages = self.root, []
        while key:
            child = node.children.get(self._child_key(key, extra_key))
            if child is None:
                break
            n = self._match_len(child.key, key)
            pages += child.value[: n // self.page_size]
            if n < len(child.key):
                break
            node, key = child, key[n:]
        return pages

    def node_of(self, page_id: int) -> RadixNode | None:
        """The node holding a page, or None if the page is not in the tree."""
        return self._node_of.get(page_id)

    def path_to(self, page_id: int) -> tuple[list[int], list[int], Hashable]:
        """(token ids, page ids, extra key) of the prefix that ends with `page_id`."""
        node = self._node_of[page_id]
        end = node.value.index(page_id) + 1
        tokens, pages = node.key[: end * self.page_size], node.value[:end]
        extra = self._extra(node)
        while node.parent is not self.root:
            node = self._parent(node)
            tokens, pages = node.key + tokens, node.value + pages
        return tokens, pages, extra

    def touch(self, page_id: int) -> None:
        """The page was used now: its node and every ancestor get the next clock value."""
        self.clock += 1
        node: RadixNode | None = self._node_of[page_id]
        while node is not None:
            node.last_access = self.clock
            node = node.parent

    def remove_leaf_page(self, page_id: int) -> None:
        """Drop the last page of a leaf (a page-granular eviction); an emptied leaf goes."""
        node = self._node_of.get(page_id)
        if node is None or not node.is_leaf or node.value[-1] != page_id or node.lock_ref:
            raise ValueError(f"page_id {page_id} is not the last page of an unlocked leaf")
        extra = self._extra(node)
        first_key = self._child_key(node.key, extra)
        node.value.pop()
        node.key = node.key[: -self.page_size]
        del self._node_of[page_id]
        self._evictable -= 1
        if not node.value:
            del self._parent(node).children[first_key]

    # ---- inspection -------------------------------------------------------------------------

    def nodes(self) -> Iterator[RadixNode]:
        """Every node, root first, depth first, children in creation order."""
        stack = [self.root]
        while stack:
            node = stack.pop()
            yield node
            stack += sorted(node.children.values(), key=lambda c: c.node_id, reverse=True)

    def page_ids(self) -> list[int]:
        """Every page id the tree holds."""
        return [p for node in self.nodes() for p in node.value]

    def check(self) -> None:
        """Raise AssertionError if the tree breaks its own rules."""
        evictable = protected = 0
        for node in self.nodes():
            if node is self.root:
                continue
            assert node.key and len(node.key) == len(node.value) * self.page_size, node.node_id
            assert self._parent(node).children.get(self._child_key(node.key, self._extra(node))) is node
            locks = sum(c.lock_ref for c in node.children.values())
            assert node.lock_ref >= locks, f"node {node.node_id}: lock_ref below its children's"
            if node.lock_ref:
                protected += len(node.value)
            else:
                evictable += len(node.value)
        assert (evictable, protected) == (self._evictable, self._protected), "sizes drifted"
        pages = self.page_ids()
        assert len(pages) == len(set(pages)), "a page is in the tree twice"
        assert set(pages) == set(self._node_of), "page map and tree differ"
        assert all(self._node_of[p].value.count(p) == 1 for p in pages), "page map is stale"

    def __repr__(self) -> str:
        return (
            f"RadixCache(page_size={self.page_size}, nodes={self.num_nodes}, "
            f"pages={self.total_size()}, evictable={self._evictable})"
        )

    # ---- internals --------------------------------------------------------------------------

    def _node(self, key: list[int], value: list[int], parent: RadixNode | None) -> RadixNode:
        self._next_id += 1
        return RadixNode(key, value, parent, last_access=self.clock, node_id=self._next_id - 1)

    @staticmethod
    def _parent(node: RadixNode) -> RadixNode:
        assert node.parent is not None, "the root has no parent"
        return node.parent

    def _child_key(self, key: Sequence[int], extra_key: Hashable) -> tuple:
        return (extra_key, tuple(key[: self.page_size]))

    def _extra(self, node: RadixNode) -> Hashable:
        return next(k for k, c in self._parent(node).children.items() if c is node)[0]

    def _match_len(self, a: Sequence[int], b: Sequence[int]) -> int:
        """Tokens of the longest common whole-page prefix of a and b."""
        size, n = self.page_size, 0
        while n < min(len(a), len(b)) and a[n : n + size] == b[n : n + size]:
            n += size
        return n

    def _split(self, child: RadixNode, n: int) -> RadixNode:
        """Cut `child` after n tokens: a new node takes the first part, child keeps the rest."""
        size, parent = self.page_size, self._parent(child)
        extra = self._extra(child)
        head = self._node(child.key[:n], child.value[: n // size], parent)
        head.lock_ref, head.last_access = child.lock_ref, child.last_access
        parent.children[self._child_key(child.key, extra)] = head
        self._node_of.update(dict.fromkeys(head.value, head))
        child.key, child.value, child.parent = child.key[n:], child.value[n // size :], head
        head.children[self._child_key(child.key, extra)] = child
        return head
