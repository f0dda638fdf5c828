"""BROKEN ON PURPOSE: a naive paged KV cache with the classic mistakes of first implementations.

Do not use this module to cache anything. It exists for notebook 08_common_mistakes, which
runs it next to pagedkv on the same requests and shows each mistake's symptom. Each mistake
can be switched on alone (`NaiveKVCache(..., mistakes={"leak"})`), so one symptom is seen
at a time; the default is all of them:

- `page_per_token`: a page per token instead of one per `page_size` tokens;
- `no_cached_eviction`: new pages come only from the free list; a released full page goes
  CACHED, not back to the free list, and is never evicted, so the pool "runs out" while full
  of reusable pages;
- `one_stamp_per_release`: LRU stamps pages with one clock reading per `free()`: all pages of
  a request tie, the tie is broken by page id, so the *first* (most shareable) page is
  evicted first; the fix is the tail-first order within a release;
- `stale_heap`: the eviction heap is never cleaned: a page revived by a prefix hit keeps its
  old entry and gets another at its next release, so the heap grows without bound;
- `leak`: `free()` forgets the block table but never returns its pages;
- `naive_attention` (a function, not a flag): "attention" as a sum of k·v products, with
  no query and no softmax.

What it gets right, so the symptoms stay apart: block tables, chained block hashes, prefix
lookup. No engine ships these mistakes; each fix is a rule pagedkv follows (notebook 08 says
which). Leaves out: K/V storage (only the bookkeeping is broken here).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Hashable, Iterable

import numpy as np

from pagedkv.core.hashing import block_hashes
from pagedkv.core.pool import OutOfPagesError

# the mistake flags, in the order notebook 08 teaches them
MISTAKE_FLAGS = ("page_per_token", "leak", "no_cached_eviction", "one_stamp_per_release", "stale_heap")
MISTAKES = frozenset(MISTAKE_FLAGS)


class NaiveKVCache:
    """A paged KV cache's bookkeeping with the mistakes named in `mistakes` (BROKEN ON PURPOSE)."""

    def __init__(
        self,
        num_pages: int,
        page_size: int,
        mistakes: Iterable[str] = MISTAKES,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.mistakes = frozenset(mistakes)
        unknown = self.mistakes - MISTAKES
        if unknown:
            raise ValueError(f"mistakes must be among {sorted(MISTAKES)}, got {sorted(unknown)}")
        self.num_pages, self.page_size, self.clock = num_pages, page_size, clock
        self.free_list = list(range(num_pages))  # heap of FREE page ids
        self.tokens: list[list[int]] = [[] for _ in range(num_pages)]  # page id -> tokens
        self.ref = [0] * num_pages  # page id -> block tables holding it
        self.block_hash: list[bytes | None] = [None] * num_pages
        self.index: dict[bytes, int] = {}  # block hash -> CACHED or ACTIVE page
        self.stamp = [0.0] * num_pages  # page id -> when it was last released
        self.lru: list[tuple[float, int]] = []  # heap of (stamp, page id): eviction candidates
        self.tables: dict[Hashable, list[int]] = {}  # seq id -> block table
        self.ticks = 0  # logical clock, used when one_stamp_per_release is off

    # ---- what callers see --------------------------------------------------------------------

    @property
    def num_free_pages(self) -> int:
        return len(self.free_list)

    @property
    def num_cached_pages(self) -> int:
        return sum(1 for p in range(self.num_pages) if self.ref[p] == 0 and self.block_hash[p])

    def add(self, seq_id: Hashable, token_ids: list[int]) -> int:
        """Admit a prompt; returns the tokens served by prefix hits. OutOfPagesError if the
        pool cannot give the pages (nothing changes then)."""
        hashes = block_hashes(token_ids, self.page_size)
        hits = []
        for h in hashes[: (len(token_ids) - 1) // self.page_size]:  # the last token is computed
            page = self.index.get(h)
            if page is None:
                break
            hits.append(page)
        rest = token_ids[len(hits) * self.page_size :]
        per_page = 1 if "page_per_token" in self.mistakes else self.page_size
        new = self._take(-(-len(rest) // per_page))
        for page in hits:
            self.ref[page] += 1  # revived; with stale_heap its old LRU entry stays behind
        for k, page in enumerate(new):
            self.tokens[page] = rest[k * per_page : (k + 1) * per_page]
            self.ref[page] = 1
            block = len(hits) + k
            if per_page == self.page_size and len(self.tokens[page]) == self.page_size:
                self.block_hash[page] = hashes[block]
                self.index.setdefault(hashes[block], page)
        self.tables[seq_id] = hits + new
        return len(hits) * self.page_size

    def free(self, seq_id: Hashable) -> None:
        """Finish a sequence (with `leak`: its pages are never given back)."""
        table = self.tables.pop(seq_id)
        if "leak" in self.mistakes:
            return  # the block table is gone, the ref counts stay: these pages are lost
        self.ticks += 1
        one_stamp = "one_stamp_per_release" in self.mistakes
        now = self.clock() if one_stamp else float(self.ticks)
        for k, page in enumerate(reversed(table)):  # tail first
            self.ref[page] -= 1
            if self.ref[page]:
                continue
            # Tail first: the k-th page from the tail gets a stamp k / (len + 1) later. With
            # one_stamp, every page of the release gets the same stamp: they tie.
            self.stamp[page] = now if one_stamp else now + k / (len(table) + 1)
            if self.block_hash[page] is not None:
                heapq.heappush(self.lru, (self.stamp[page], page))
            else:
                self.tokens[page] = []
                heapq.heappush(self.free_list, page)
        if "stale_heap" not in self.mistakes and len(self.lru) > 2 * self.num_pages:
            self.compact()  # lazy deletion is fine only while the heap stays bounded

    # ---- the broken parts ------------------------------------------------------------------------

    def _take(self, n: int) -> list[int]:
        free = len(self.free_list)
        if "no_cached_eviction" in self.mistakes:
            reusable = free  # only the free list counts: a CACHED page is never taken
        else:
            reusable = free + self.num_cached_pages
        if n > reusable:
            raise OutOfPagesError(f"need {n} pages, {reusable} reusable of {self.num_pages}")
        pages = [heapq.heappop(self.free_list) for _ in range(min(n, free))]
        while len(pages) < n:
            pages.append(self._evict())
        return pages

    def _evict(self) -> int:
        while True:  # stale entries (revived or re-released pages) are skipped
            stamp, page = heapq.heappop(self.lru)
            key = self.block_hash[page]
            if self.ref[page] == 0 and key and stamp == self.stamp[page]:
                break
        del self.index[key]
        self.block_hash[page], self.tokens[page] = None, []
        return page

    def compact(self) -> None:
        """Drop stale LRU entries (revived or re-released pages)."""
        self.lru = [
            (s, p) for s, p in self.lru if self.ref[p] == 0 and self.block_hash[p] and s == self.stamp[p]
        ]
        heapq.heapify(self.lru)

    def lru_order(self) -> list[int]:
        """CACHED pages, next victim first."""
        live = {(s, p) for s, p in self.lru if self.ref[p] == 0 and self.block_hash[p] and s == self.stamp[p]}
        return [p for _, p in sorted(live)]


def lost_pages(cache: NaiveKVCache) -> list[int]:
    """A recount of ref counts: the pages whose ref count differs from the number of block
    tables holding them (a leaked page keeps ref count 1 with no block table holding it)."""
    held = [page for table in cache.tables.values() for page in table]
    return [page for page in range(cache.num_pages) if cache.ref[page] != held.count(page)]


def naive_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """BROKEN ON PURPOSE: "attention" as the sum over positions of k * v. It ignores the query
    and has no softmax, so every query gets the same answer.
    q: [T, H, D], k and v: [L, H, D] (one K/V head per query head) -> [T, H, D]."""
    summed = (k * v).sum(axis=0)  # [H, D]
    return np.broadcast_to(summed, q.shape).copy()


def pagedkv_cache(num_pages: int, page_size: int):
    """The real thing for a side-by-side run: a `SequenceManager` on a pool with tiny K/V
    (only the bookkeeping is compared)."""
    from pagedkv.core.config import CacheConfig
    from pagedkv.core.pool import KVCachePool
    from pagedkv.core.sequence import SequenceManager

    config = CacheConfig(num_pages=num_pages, page_size=page_size, num_layers=1, num_kv_heads=1, head_dim=2)
    return SequenceManager(KVCachePool(config))


def serve_one_at_a_time(cache, prompts: Iterable[list[int]]) -> dict[str, list[int]]:
    """Admit and finish each prompt in turn on a `NaiveKVCache` or a pagedkv `SequenceManager`;
    per request: `available` pages (FREE + CACHED), of them `free` and `cached`, `refused`
    (0/1), prefix-hit `hits` tokens and `eviction_entries` (entries the eviction structure
    holds)."""
    keys = ("available", "free", "cached", "refused", "hits", "eviction_entries")
    out: dict[str, list[int]] = {key: [] for key in keys}
    for i, tokens in enumerate(prompts):
        try:
            out["hits"].append(cache.add(f"r{i}", tokens))
            cache.free(f"r{i}")
            out["refused"].append(0)
        except OutOfPagesError:
            out["hits"].append(0)
            out["refused"].append(1)
        counts = cache if isinstance(cache, NaiveKVCache) else cache.pool
        out["free"].append(counts.num_free_pages)
        out["cached"].append(counts.num_cached_pages)
        out["available"].append(counts.num_free_pages + counts.num_cached_pages)
        out["eviction_entries"].append(
            len(cache.lru if isinstance(cache, NaiveKVCache) else cache.pool.eviction)
        )
    return out


def lru_steps(cache, first: list[int], other: list[int], again: list[int]) -> dict[str, object]:
    """Notebook 08's LRU test, step by step, on a `NaiveKVCache` or a pagedkv `SequenceManager`:
    `request_A` (`first`) runs and finishes; `other` runs and finishes, taking every FREE page
    and evicting the rest it needs; `request_B` (`again`, starting with `first`) arrives.

    Returns `pages_a` (request_A's block table), `free` and `lru_order` (FREE pages and the
    CACHED ones, next victim first, once request_A finished), `other_pages` (pages `other`
    needed), `evicted` (those of them that were CACHED, in the order taken) and `hits`
    (request_B's prefix-hit tokens)."""
    naive = isinstance(cache, NaiveKVCache)
    counts = cache if naive else cache.pool

    def table(seq_id: str) -> list[int]:
        return list(cache.tables[seq_id] if naive else cache.block_table(seq_id))

    cache.add("request_A", first)
    steps: dict[str, object] = {"pages_a": table("request_A")}
    cache.free("request_A")
    order = cache.lru_order() if naive else cache.pool.eviction.order()
    steps.update(free=counts.num_free_pages, lru_order=order)
    cache.add("other", other)
    taken = table("other")
    steps.update(other_pages=len(taken), evicted=[p for p in taken if p in order])
    cache.free("other")
    steps["hits"] = cache.add("request_B", again)
    return steps
