"""Eviction policies beside LRU, for the eviction lab: FIFO, LFU, ARC and S3-FIFO.

Each one is an `EvictionPolicy` (pagedkv/core/eviction.py), so it plugs into `KVCachePool` by
name (`CacheConfig(eviction_policy="s3fifo")`) and every picture and check keeps working.
What each policy sees is what the pool tells every policy: a page turns CACHED (`add`,
`add_all`), a prefix hit revives a CACHED page (`remove`), the pool needs a victim
(`pop_victim(s)`). So "an access" here is a *revival by a prefix hit*; a hit on a page
that is ACTIVE (shared by a running sequence) is not seen, because that page is not
evictable anyway. Frequencies live as long as the page holds its content and are
forgotten when the page is evicted.

- `FIFOEvictionPolicy`: evict the content cached first; a hit does not move it.
- `LFUEvictionPolicy`: evict the page revived least often (ties: released longest ago).
  No ageing, on purpose: the lab shows what that costs when popularity shifts.
- `ARCEvictionPolicy` (Megiddo & Modha, FAST'03): two LRU lists, T1 (seen once) and T2
  (revived at least once), and ghost lists B1/B2 of recently evicted block hashes. Content
  that comes back while its hash is a ghost enters T2 and moves the target size p of T1.
- `S3FIFOEvictionPolicy` (Yang et al., SOSP'23): a small FIFO S (10 % of the pool), a main FIFO M
  and a ghost FIFO G. New content enters S; at the head of S, content revived while in S moves to M,
  the rest is evicted and remembered in G; content that returns while in G enters M. M is a FIFO with
  second chances (up to 3). At each eviction from S, G keeps as many hashes as M holds pages, at least
  one (simplified: the paper's G holds as many as M can, `ghost_share=0.9`).

Adapted to a page pool, and said so: the policies order *pages*; content is named by its
block hash (`attach` gives the policy a way to read it), which is what ghosts remember.
Pages that are ACTIVE keep their place in FIFO/S3-FIFO queues but are skipped when a
victim is chosen. SGLang's leaf-first LRU is the radix tree's own eviction
(`LeafLRUEvictionPolicy` in pagedkv/radix/radix_index.py, "leaf-lru" in `bench eviction`); on the
lab's streams it equals LRU, because a request releases its pages tail first.

`PinnedLRUEvictionPolicy`: LRU that keeps pinned content (by block hash) until nothing else is evictable.

Leaves out: cost-aware policies (by recompute cost per byte), TinyLFU admission, LFU ageing.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Iterable

from pagedkv.core.eviction import EvictionPolicy, register_eviction_policy


class FIFOEvictionPolicy(EvictionPolicy):
    """Evict the content that was cached first; hits do not move it."""

    def __init__(self) -> None:
        super().__init__()
        self._born: OrderedDict[int, None] = OrderedDict()  # page id -> None, first cached first

    def add(self, page_id: int) -> None:
        super().add(page_id)
        self._born.setdefault(page_id, None)

    def add_all(self, page_ids: list[int]) -> None:
        super().add_all(page_ids)
        for page_id in page_ids:
            self._born.setdefault(page_id, None)

    def pop_victim(self) -> int:
        for page_id in self._born:  # ACTIVE pages keep their place and are skipped
            if page_id in self._pages:
                del self._born[page_id], self._pages[page_id]
                return page_id
        raise KeyError("no evictable page")

    def order(self) -> list[int]:
        return [p for p in self._born if p in self._pages]

    def clear(self) -> None:
        super().clear()
        self._born.clear()


class LFUEvictionPolicy(EvictionPolicy):
    """Evict the page revived least often; among equals, the one released longest ago."""

    def __init__(self) -> None:
        super().__init__()
        self._count: dict[int, int] = {}  # page id -> 1 + prefix-hit revivals (while it holds content)
        self._buckets: dict[int, OrderedDict[int, None]] = {}  # count -> evictable pages, oldest first

    def add(self, page_id: int) -> None:
        super().add(page_id)
        count = self._count.setdefault(page_id, 1)
        self._buckets.setdefault(count, OrderedDict())[page_id] = None

    def add_all(self, page_ids: list[int]) -> None:
        super().add_all(page_ids)
        for page_id in page_ids:
            count = self._count.setdefault(page_id, 1)
            self._buckets.setdefault(count, OrderedDict())[page_id] = None

    def remove(self, page_id: int) -> None:
        super().remove(page_id)
        self._drop(page_id)
        self._count[page_id] += 1  # a prefix hit: the only reason the pool calls remove

    def _drop(self, page_id: int) -> None:
        count = self._count[page_id]
        bucket = self._buckets[count]
        del bucket[page_id]
        if not bucket:
            del self._buckets[count]

    def pop_victim(self) -> int:
        if not self._pages:
            raise KeyError("no evictable page")
        count = min(self._buckets)
        page_id = next(iter(self._buckets[count]))
        self._drop(page_id)
        del self._pages[page_id], self._count[page_id]
        return page_id

    def order(self) -> list[int]:
        return [p for count in sorted(self._buckets) for p in self._buckets[count]]

    def clear(self) -> None:
        super().clear()
        self._count.clear()
        self._buckets.clear()


class _Ghosts:
    """A bounded FIFO of block hashes of evicted content (ARC's B1/B2, S3-FIFO's G)."""

    def __init__(self) -> None:
        self.keys: OrderedDict[Hashable, None] = OrderedDict()

    def remember(self, key: Hashable, limit: int) -> None:
        self.keys.pop(key, None)
        self.keys[key] = None
        while len(self.keys) > limit:
            self.keys.popitem(last=False)

    def take(self, key: Hashable) -> bool:
        """True (and forget it) if `key` is a ghost."""
        return self.keys.pop(key, False) is None


class _GhostPolicy(EvictionPolicy):
    """A policy that remembers evicted content by its block hash (needs `attach`)."""

    def __init__(self) -> None:
        super().__init__()
        self._key: Callable[[int], Hashable] = lambda page_id: page_id
        self._capacity = 1

    def attach(self, num_pages: int, content_key: Callable[[int], Hashable]) -> None:
        self._capacity = max(1, num_pages)
        self._key = content_key


class _QueuedGhostPolicy(_GhostPolicy):
    """A ghost policy that files each page becoming evictable into its own queues (`_enter`)."""

    def _enter(self, page_id: int) -> None:
        raise NotImplementedError

    def add(self, page_id: int) -> None:
        super().add(page_id)
        self._enter(page_id)

    def add_all(self, page_ids: list[int]) -> None:
        super().add_all(page_ids)
        for page_id in page_ids:
            self._enter(page_id)


class ARCEvictionPolicy(_QueuedGhostPolicy):
    """Adaptive replacement: balance recency (T1) against frequency (T2) by ghost hits. `tally`
    counts victims and prefix-hit revivals by the list the page sat in, and ghost hits by list."""

    def __init__(self) -> None:
        super().__init__()
        self._frequent: set[int] = set()  # pages revived at least once since cached (T2)
        self._t1: OrderedDict[int, None] = OrderedDict()  # evictable, seen once, LRU first
        self._t2: OrderedDict[int, None] = OrderedDict()  # evictable, revived, LRU first
        self._b1, self._b2 = _Ghosts(), _Ghosts()
        self.p = 0.0  # target number of T1 pages
        self.tally: Counter[str] = Counter()  # "evicted from T1", "revived from T2", "B1 ghost back", ...

    def _enter(self, page_id: int) -> None:
        if page_id not in self._frequent:
            key = self._key(page_id)
            back = "B1" if self._b1.take(key) else "B2" if self._b2.take(key) else ""
            if back == "B1":  # recency would have kept it: grow T1's share
                self.p = min(self._capacity, self.p + max(len(self._b2.keys) / max(len(self._b1.keys), 1), 1))
            elif back == "B2":  # frequency would have kept it: shrink T1's share
                self.p = max(0.0, self.p - max(len(self._b1.keys) / max(len(self._b2.keys), 1), 1))
            if back:  # its content came back while a ghost: it goes to T2
                self.tally[f"{back} ghost back"] += 1
                self._frequent.add(page_id)
        (self._t2 if page_id in self._frequent else self._t1)[page_id] = None

    def remove(self, page_id: int) -> None:
        super().remove(page_id)
        self.tally["revived from T2" if self._t2.pop(page_id, 0) is None else "revived from T1"] += 1
        self._t1.pop(page_id, None)
        self._frequent.add(page_id)

    def _from_t1(self, t1: int, t2: int) -> bool:
        return t1 > 0 and (t1 > self.p or t2 == 0)

    def pop_victim(self) -> int:
        if not self._pages:
            raise KeyError("no evictable page")
        recent = self._from_t1(len(self._t1), len(self._t2))
        page_id = (self._t1 if recent else self._t2).popitem(last=False)[0]
        (self._b1 if recent else self._b2).remember(self._key(page_id), self._capacity)
        self.tally["evicted from T1" if recent else "evicted from T2"] += 1
        del self._pages[page_id]
        self._frequent.discard(page_id)
        return page_id

    def queues(self) -> dict[str, object]:
        """T1 and T2 (page ids, oldest first), B1 and B2 (block hashes, oldest first), and p."""
        b1, b2 = list(self._b1.keys), list(self._b2.keys)
        return {"T1": list(self._t1), "T2": list(self._t2), "B1": b1, "B2": b2, "p": self.p}

    def order(self) -> list[int]:
        t1, t2, out = list(self._t1), list(self._t2), []
        i = j = 0
        while i < len(t1) or j < len(t2):
            if self._from_t1(len(t1) - i, len(t2) - j):
                out.append(t1[i])
                i += 1
            else:
                out.append(t2[j])
                j += 1
        return out

    def clear(self) -> None:
        super().clear()
        for part in (self._frequent, self._t1, self._t2, self.tally):
            part.clear()
        self._b1, self._b2, self.p = _Ghosts(), _Ghosts(), 0.0


class S3FIFOEvictionPolicy(_QueuedGhostPolicy):
    """Small FIFO for new content, main FIFO with second chances, ghost FIFO of hashes."""

    SMALL_SHARE = 0.1  # the paper's size of S
    MAX_FREQ = 3  # the paper's 2-bit counter

    def __init__(self, ghost_share: float | None = None) -> None:
        super().__init__()
        self.ghost_share = ghost_share  # None: G's bound is M's pages now; else this share of the pool
        self._small: OrderedDict[int, None] = OrderedDict()  # pages with content in S, oldest first
        self._main: OrderedDict[int, None] = OrderedDict()  # pages with content in M, oldest first
        self._freq: dict[int, int] = {}  # page id -> revivals, capped at MAX_FREQ
        self._ghosts = _Ghosts()

    def _enter(self, page_id: int) -> None:
        if page_id in self._freq:  # revived earlier: it keeps its place in its queue
            return
        self._freq[page_id] = 0
        queue = self._main if self._ghosts.take(self._key(page_id)) else self._small
        queue[page_id] = None

    def remove(self, page_id: int) -> None:
        super().remove(page_id)
        self._freq[page_id] = min(self._freq[page_id] + 1, self.MAX_FREQ)

    def _evict(self, small: OrderedDict, main: OrderedDict, freq: dict, forget: bool) -> int:
        """One eviction on (copies of) the queues; `forget` records ghosts (real pops only)."""
        evictable = self._pages
        while True:
            in_small = next((p for p in small if p in evictable), None)
            in_main = next((p for p in main if p in evictable), None)
            if in_small is not None and (len(small) >= self.SMALL_SHARE * self._capacity or in_main is None):
                del small[in_small]
                if freq[in_small] > 0:  # reused while in S: promote to M
                    freq[in_small] = 0
                    main[in_small] = None
                    continue
                if forget:
                    bound = int(self.ghost_share * self._capacity) if self.ghost_share else len(main) or 1
                    self._ghosts.remember(self._key(in_small), bound)
                return in_small
            if freq[in_main] > 0:  # second chance: back to the tail of M
                freq[in_main] -= 1
                main.move_to_end(in_main)
                continue
            assert in_main is not None, "pop_victim checks that something is evictable"
            del main[in_main]
            return in_main

    def pop_victim(self) -> int:
        if not self._pages:
            raise KeyError("no evictable page")
        page_id = self._evict(self._small, self._main, self._freq, forget=True)
        del self._pages[page_id], self._freq[page_id]
        return page_id

    def queues(self) -> dict[str, list]:
        """S and M (page ids, head first) and G (block hashes, oldest first), as they are."""
        return {"S": list(self._small), "M": list(self._main), "G": list(self._ghosts.keys)}

    def order(self) -> list[int]:
        small, main, freq = OrderedDict(self._small), OrderedDict(self._main), dict(self._freq)
        saved, out = self._pages, []
        self._pages = OrderedDict(saved)  # the simulation pops from a copy of the evictable set
        try:
            while self._pages:
                page_id = self._evict(small, main, freq, forget=False)
                del self._pages[page_id]
                out.append(page_id)
        finally:
            self._pages = saved
        return out

    def clear(self) -> None:
        super().clear()
        self._small.clear()
        self._main.clear()
        self._freq.clear()
        self._ghosts = _Ghosts()


class PinnedLRUEvictionPolicy(_GhostPolicy):
    """LRU that evicts a pinned page (its block hash is in `pinned`) only when nothing else
    is evictable: "pin the system prompts", as users of vLLM have asked for."""

    def __init__(self, pinned: Iterable[Hashable] = ()) -> None:
        super().__init__()
        self.pinned = set(pinned)  # block hashes of pinned content

    def pop_victim(self) -> int:
        for page_id in self._pages:
            if self._key(page_id) not in self.pinned:
                del self._pages[page_id]
                return page_id
        if not self._pages:
            raise KeyError("no evictable page")
        return self._pages.popitem(last=False)[0]

    def order(self) -> list[int]:
        pinned = [p for p in self._pages if self._key(p) in self.pinned]
        return [p for p in self._pages if self._key(p) not in self.pinned] + pinned


LAB_POLICIES: dict[str, type[EvictionPolicy]] = {
    "fifo": FIFOEvictionPolicy,
    "lfu": LFUEvictionPolicy,
    "arc": ARCEvictionPolicy,
    "s3fifo": S3FIFOEvictionPolicy,
}
for _name, _policy in LAB_POLICIES.items():
    register_eviction_policy(_name, _policy)
