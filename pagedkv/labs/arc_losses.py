"""Which of ARC's lists a lost prefix hit was evicted from.

`arc_lost_hits` replays a stream with ARC. Before each request it walks the prompt's full
pages from the first, as a prefix lookup does. If the walk stops at content ARC evicted
earlier (and has not cached again since), the request lost hits to that eviction: the
tally counts such requests by the list (T1: seen once, T2: revived) the content left.
`lru_lost_lookups` counts the same requests under LRU, for comparison.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence

from pagedkv.core.eviction import LRUEvictionPolicy
from pagedkv.core.hashing import block_hashes
from pagedkv.core.sequence import SequenceManager
from pagedkv.labs.eviction_policies import ARCEvictionPolicy
from pagedkv.labs.hit_rate_lab import lab_pool, serve_one_at_a_time
from pagedkv.labs.lab_workloads import LabRequest


class _TracedARC(ARCEvictionPolicy):
    """ARC that remembers, per evicted block hash, the list it left ("T1" or "T2"), and
    counts in `tally` the ghosts that came back ("B1 ghost back", "B2 ghost back"), and in
    `p_moves` how far they moved p in all ("p grown", "p shrunk"); `p_top` is the largest p."""

    def __init__(self) -> None:
        super().__init__()
        self.evicted_from: dict[Hashable, str] = {}
        self.seen: set[Hashable] = set()
        self.p_moves = {"p grown": 0.0, "p shrunk": 0.0}
        self.p_top = 0.0

    def _enter(self, page_id: int) -> None:
        key, p = self._key(page_id), self.p
        if page_id not in self._frequent:  # as ARC's _enter reads its ghosts
            if key in self._b1.keys:
                self.tally["B1 ghost back"] += 1
            elif key in self._b2.keys:
                self.tally["B2 ghost back"] += 1
        self.seen.add(key)
        self.evicted_from.pop(key, None)  # cached again
        super()._enter(page_id)
        if self.p > p:
            self.p_moves["p grown"] += self.p - p
            self.p_top = max(self.p_top, self.p)
        elif self.p < p:
            self.p_moves["p shrunk"] += p - self.p

    def pop_victim(self) -> int:
        recent = bool(self._pages) and self._from_t1(len(self._t1), len(self._t2))
        page_id = super().pop_victim()
        self.evicted_from[self._key(page_id)] = "T1" if recent else "T2"
        return page_id


class _TracedLRU(LRUEvictionPolicy):
    """LRU that remembers the block hashes it has seen cached, and those it evicted (and has
    not cached again since), each marked "LRU" in `evicted_from`."""

    def __init__(self) -> None:
        super().__init__()
        self.evicted_from: dict[Hashable, str] = {}
        self.seen: set[Hashable] = set()
        self.content_key: Callable[[int], Hashable] = lambda page_id: page_id

    def attach(self, num_pages: int, content_key: Callable[[int], Hashable]) -> None:
        self.content_key = content_key

    def add(self, page_id: int) -> None:
        super().add(page_id)
        self._cached([page_id])

    def add_all(self, page_ids: list[int]) -> None:
        super().add_all(page_ids)
        self._cached(page_ids)

    def _cached(self, page_ids: list[int]) -> None:
        for page_id in page_ids:
            key = self.content_key(page_id)
            self.seen.add(key)
            self.evicted_from.pop(key, None)  # cached again

    def pop_victims(self, n: int) -> list[int]:
        victims = super().pop_victims(n)
        for page_id in victims:
            self.evicted_from[self.content_key(page_id)] = "LRU"
        return victims


def lru_lost_lookups(requests: Sequence[LabRequest], cache_tokens: int, page_size: int = 16) -> int:
    """Replay with LRU. Return how many requests' lookups stopped at content LRU had evicted
    (the count `arc_lost_hits` makes for ARC)."""
    lost, _ = _replay(requests, cache_tokens, _TracedLRU(), page_size)
    return lost["LRU"]


def _replay(
    requests: Sequence[LabRequest],
    cache_tokens: int,
    policy: _TracedARC | _TracedLRU,
    page_size: int,
) -> tuple[Counter[str], _TracedARC | _TracedLRU]:
    """Serve `requests` one at a time in a lab pool under a copy of `policy`. Before each, walk
    its prompt's full pages as a lookup does and count, by `lost_at`'s list, the requests whose
    walk stops at evicted content. Returns the counts and the policy the pool ran."""
    pool = lab_pool(requests, cache_tokens, policy, page_size)
    traced = pool.eviction  # lab_pool installs a copy
    assert isinstance(traced, (_TracedARC, _TracedLRU))
    seqs = SequenceManager(pool)
    lost: Counter[str] = Counter()
    for request in requests:
        where = lost_at(block_hashes(request.prompt_token_ids, page_size), traced.seen, traced.evicted_from)
        if where is not None:
            lost[where] += 1
        serve_one_at_a_time(seqs, [request])
    return lost, traced


def lost_at(hashes: Sequence[Hashable], seen: set, evicted_from: dict) -> str | None:
    """The list ("T1"/"T2") of the evicted page where a lookup of `hashes` stops, or None if
    it stops at content never cached (or does not stop)."""
    for key in hashes:
        if key in evicted_from:
            return evicted_from[key]
        if key not in seen:
            return None
    return None


def arc_lost_hits(
    requests: Sequence[LabRequest], cache_tokens: int, page_size: int = 16
) -> tuple[Counter[str], dict[str, float], float]:
    """Replay with ARC. Return (requests whose lookup stopped at content ARC had evicted, by
    the list it left: {"T1": n, "T2": n}; ARC's `tally` with the p moves and "p at the end";
    the largest p)."""
    lost, arc = _replay(requests, cache_tokens, _TracedARC(), page_size)
    assert isinstance(arc, _TracedARC)
    return lost, {**arc.tally, **arc.p_moves, "p at the end": arc.p}, arc.p_top


def lost_hits_text(
    lost: Counter[str], tally: Mapping[str, float], p_top: float, pages: int, lru_lost: int
) -> str:
    """Five numbered lines, one step each: how far the B1 ghosts that came back grew p, and the
    B2 ghosts shrank it (the moves p made, after the cap at `pages` and the floor at 0); how high
    p rose and where it ended; where ARC's victims came from; where lost lookups stopped, with
    LRU's count (`lru_lost_lookups`)."""
    t = Counter(tally)  # a count never made reads 0
    b1, b2, grown, shrunk = t["B1 ghost back"], t["B2 ghost back"], t["p grown"], t["p shrunk"]
    victims = t["evicted from T1"] + t["evicted from T2"]
    cut = lost["T1"] + lost["T2"]
    return (
        f"1. B1 ghosts back: {b1:.0f}; they grew p by {grown:.0f} pages in all,"
        f" about {round(grown / b1) if b1 else 0} each\n"
        f"2. B2 ghosts back: {b2:.0f}; they shrank p by {shrunk:.0f} pages in all,"
        f" about {round(shrunk / b2) if b2 else 0} each\n"
        f"3. p rose to {p_top:.0f} of {pages} pages; it ended at {t['p at the end']:.0f}"
        f" = {grown:.0f} - {shrunk:.0f}\n"
        f"4. ARC's victims: {victims:.0f}, of them {t['evicted from T2']:.0f} from T2 (revived)\n"
        f"5. lookups stopped at content ARC evicted: {cut} (under LRU: {lru_lost});"
        f" {lost['T2']} of the {cut} at content T2 gave up"
    )
