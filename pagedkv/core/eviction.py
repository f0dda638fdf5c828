"""Eviction policies: the ordered set of CACHED pages and which one is reclaimed first.

A page enters the set when its last holder releases it (it becomes CACHED) and leaves it
either because a prefix hit revives it (it becomes ACTIVE again) or because it is evicted
to make room. vLLM v1 keeps the same order in its `FreeKVCacheBlockQueue`: freed blocks
are appended at the tail, a prefix hit unlinks a block from the middle, and allocation
takes from the head, so the least recently *released* block goes first. Requests free
their blocks in reverse order, which puts a sequence's deepest (least shareable) block
ahead of its prefix. pagedkv does exactly that.

All operations are O(1): an `OrderedDict` is a hash map threaded by a doubly linked list,
which is what the linked queue in vLLM is built by hand to give. (A plain dict would not
do: popping its oldest key repeatedly scans the holes earlier pops left behind.) There
is no heap and no stale entry: a page is in the structure at most once.

`MRU` is here only as a contrast for experiments: it keeps old pages and evicts the
freshest. FIFO, LFU, ARC and S3-FIFO live in pagedkv/labs/eviction_policies.py, under the same
interface, and register themselves here. Leaves out: cost-aware policies.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Hashable


class NotEvictableError(ValueError):
    """`take_victim(page_id)` was given a page that is not CACHED in this policy: a request
    holds it (ACTIVE) or it holds no released content. `page_id` names it."""

    def __init__(self, page_id: object, num_evictable: int) -> None:
        super().__init__(
            f"take_victim({page_id!r}): page {page_id!r} is not evictable: it is not CACHED (a "
            "request holds it, or it was never released); only the pages in release_order() can "
            f"be evicted ({num_evictable} now)"
        )
        self.page_id = page_id


class EvictionPolicy(ABC):
    """An ordered set of evictable page ids."""

    def __init__(self) -> None:
        self._pages: OrderedDict[int, None] = OrderedDict()  # page id -> None, oldest release first

    def add(self, page_id: int) -> None:
        """A page became CACHED: it is now the most recently released."""
        if page_id in self._pages:
            raise ValueError(f"page_id {page_id} is already evictable")
        self._pages[page_id] = None

    def add_all(self, page_ids: list[int]) -> None:
        """Several pages became CACHED, oldest release first (one `free`, tail page first)."""
        pages = self._pages
        if not pages.keys().isdisjoint(page_ids):
            raise ValueError(f"some of page_ids {page_ids} are already evictable")
        for page_id in page_ids:  # a plain loop beats OrderedDict.update here (measured)
            pages[page_id] = None

    def remove(self, page_id: int) -> None:
        """A prefix hit revived the page: it is no longer evictable."""
        del self._pages[page_id]

    @abstractmethod
    def pop_victim(self) -> int:
        """Remove and return the page to evict next. Raises KeyError when empty."""

    def pop_victims(self, n: int) -> list[int]:
        """Remove and return the next n victims, in eviction order."""
        if n > len(self._pages):
            raise KeyError(f"{n} victims asked, {len(self._pages)} evictable")
        return [self.pop_victim() for _ in range(n)]

    @abstractmethod
    def order(self) -> list[int]:
        """Evictable page ids, next victim first."""

    def release_order(self) -> list[int]:
        """Evictable page ids in the order they were released, oldest first: what a policy of
        one's own reads to choose a victim (and what checkpoints save)."""
        return list(self._pages)

    def take_victim(self, page_id: int) -> int:
        """Take the evictable page `page_id` out of the set and return it: how a policy of
        one's own ends `pop_victim` once it has chosen (`return self.take_victim(chosen)`)."""
        if page_id not in self._pages:
            raise NotEvictableError(page_id, len(self._pages))
        del self._pages[page_id]
        return page_id

    def attach(self, num_pages: int, content_key: Callable[[int], Hashable]) -> None:
        """Called once by the pool that owns the policy: its size, and content_key(page_id),
        the block hash a CACHED page holds. Policies that remember evicted content (ARC,
        S3-FIFO ghosts, pagedkv/labs/eviction_policies.py) use it; the default ignores it."""
        return None  # an optional hook, deliberately not abstract

    def clear(self) -> None:
        self._pages.clear()

    def __contains__(self, page_id: object) -> bool:
        return page_id in self._pages

    def __len__(self) -> int:
        return len(self._pages)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(order={self.order()})"


class LRUEvictionPolicy(EvictionPolicy):
    """Evict the page released longest ago (vLLM's and SGLang's choice)."""

    def pop_victim(self) -> int:
        return self.pop_victims(1)[0]

    def pop_victims(self, n: int) -> list[int]:
        """The n pages released longest ago, oldest first: the front of the order."""
        if n > len(self._pages):
            raise KeyError(f"{n} victims asked, {len(self._pages)} evictable")
        return [self._pages.popitem(last=False)[0] for _ in range(n)]

    def order(self) -> list[int]:
        return list(self._pages)


class MRUEvictionPolicy(EvictionPolicy):
    """Evict the page released most recently (a contrast to LRU, not an engine's default)."""

    def pop_victim(self) -> int:
        if not self._pages:
            raise KeyError("no evictable page")
        return self._pages.popitem()[0]

    def order(self) -> list[int]:
        return list(reversed(self._pages))


# name -> policy class: "lru" and "mru" here; pagedkv.labs.eviction_policies registers
# FIFO, LFU, ARC and S3-FIFO (a lower layer offers the registry, a higher one fills it).
EVICTION_POLICIES: dict[str, type[EvictionPolicy]] = {"lru": LRUEvictionPolicy, "mru": MRUEvictionPolicy}


def register_eviction_policy(name: str, policy: type[EvictionPolicy]) -> None:
    """Make `CacheConfig(eviction_policy=name)` build `policy()`."""
    EVICTION_POLICIES[name] = policy


def make_eviction_policy(name: str | type) -> EvictionPolicy:
    """The policy a `CacheConfig.eviction_policy` names (a class is called with no arguments)."""
    if isinstance(name, type):
        return name()
    if name not in EVICTION_POLICIES:
        raise ValueError(f"eviction_policy must be one of {sorted(EVICTION_POLICIES)}, got {name!r}")
    return EVICTION_POLICIES[name]()
