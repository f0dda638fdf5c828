"""Where ARC loses the prefix hits LRU makes, token by token.

`arc_beside_lru` replays a stream with LRU and with ARC side by side, one request at a time.
Before each request it walks the prompt's full pages from the first, as a prefix lookup
does, in ARC's pool. If the walk stops at content ARC evicted earlier (and has not cached
again since), the request lost hits to that eviction: the list it left (T1: seen once, T2:
revived) is the cause. The prompt tokens LRU hits and ARC misses are split by that cause;
the tokens ARC hits and LRU misses are its gains. Neither engine keeps such a split: vLLM
counts only the totals (`prefix_cache_queries`, `prefix_cache_hits`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping, Sequence

from pagedkv.core.hashing import block_hashes
from pagedkv.core.sequence import SequenceManager
from pagedkv.labs.eviction_policies import ARCEvictionPolicy
from pagedkv.labs.hit_rate_lab import lab_pool, serve_one_at_a_time
from pagedkv.labs.lab_workloads import LabRequest


class _TracedARC(ARCEvictionPolicy):
    """ARC that remembers, per evicted block hash, the list it left ("T1" or "T2"), and
    counts in `p_moves` how far the ghosts that came back (ARC's own `tally`: "B1 ghost
    back", "B2 ghost back") moved p in all ("p grown", "p shrunk"); `p_top` is the largest p."""

    def __init__(self) -> None:
        super().__init__()
        self.evicted_from: dict[Hashable, str] = {}
        self.seen: set[Hashable] = set()
        self.p_moves = {"p grown": 0.0, "p shrunk": 0.0}
        self.p_top = 0.0

    def _enter(self, page_id: int) -> None:
        key, p = self._key(page_id), self.p
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


def lost_at(hashes: Sequence[Hashable], seen: set, evicted_from: dict) -> str | None:
    """The list ("T1"/"T2") of the evicted page where a lookup of `hashes` stops, or None if
    it stops at content never cached (or does not stop)."""
    for key in hashes:
        if key in evicted_from:
            return evicted_from[key]
        if key not in seen:
            return None
    return None


def arc_beside_lru(
    requests: Sequence[LabRequest], cache_tokens: int, page_size: int = 16
) -> tuple[Counter[str], dict[str, float], float]:
    """Replay `requests` with LRU and with ARC side by side, request by request, and split the
    prompt tokens LRU hits and ARC does not by where ARC's lookup stopped (`lost_at`): "T2",
    "T1" or "other" (anywhere else); "gain" counts the tokens ARC hits and LRU does not, and
    "<key> requests" the requests in each. So T2 + T1 + other - gain is LRU's hit tokens minus
    ARC's. Also returns ARC's `tally` with the p moves and "p at the end", and the largest p."""
    pools = {name: lab_pool(requests, cache_tokens, policy, page_size) for name, policy in
             (("lru", "lru"), ("arc", _TracedARC()))}  # fmt: skip
    arc = pools["arc"].eviction  # lab_pool installs a copy
    assert isinstance(arc, _TracedARC)
    seqs = {name: SequenceManager(pool) for name, pool in pools.items()}
    split: Counter[str] = Counter()
    for request in requests:
        where = lost_at(block_hashes(request.prompt_token_ids, page_size), arc.seen, arc.evicted_from)
        hits = {}
        for name, pool in pools.items():
            before = pool.stats.prefix_hits
            serve_one_at_a_time(seqs[name], [request])
            hits[name] = pool.stats.prefix_hits - before
        lost = hits["lru"] - hits["arc"]
        key = "gain" if lost < 0 else where or "other"
        if lost:
            split[key] += abs(lost)
            split[f"{key} requests"] += 1
    return split, {**arc.tally, **arc.p_moves, "p at the end": arc.p}, arc.p_top


def p_steps_text(tally: Mapping[str, float], p_top: float, pages: int) -> str:
    """Four numbered lines, one step each: how far the B1 ghosts that came back grew p, and the
    B2 ghosts shrank it (the moves p made, after the cap at `pages` and the floor at 0); how high
    p rose and where it ended; where ARC's victims came from."""
    t = Counter(tally)  # a count never made reads 0
    b1, b2, grown, shrunk = t["B1 ghost back"], t["B2 ghost back"], t["p grown"], t["p shrunk"]
    victims = t["evicted from T1"] + t["evicted from T2"]
    return (
        f"1. B1 ghosts back: {b1:.0f}; they grew p by {grown:.0f} pages in all (after the cap),"
        f" about {round(grown / b1) if b1 else 0} each\n"
        f"2. B2 ghosts back: {b2:.0f}; they shrank p by {shrunk:.0f} pages in all,"
        f" about {round(shrunk / b2) if b2 else 0} each\n"
        f"3. p rose to {p_top:.0f} of {pages} pages; it ended at {t['p at the end']:.0f}"
        f" = {grown:.0f} - {shrunk:.0f}\n"
        f"4. ARC's victims: {victims:.0f}, of them {t['evicted from T2']:.0f} from T2 (revived)"
    )


def loss_split_text(split: Mapping[str, int], prompt_tokens: int) -> str:
    """Lines 5 to 8 after `p_steps_text`: `arc_beside_lru`'s split in requests, in tokens, then
    in points (1 point: 1 % of `prompt_tokens`). The "other" cause shows only if not 0."""
    s = Counter(split)
    causes = [c for c in ("T2", "T1", "other") if c != "other" or s[c]]
    net = sum(s[c] for c in causes) - s["gain"]

    def pts(tokens: int) -> str:
        return f"{100 * tokens / prompt_tokens:.1f}"

    name = {"T2": "T2 gave up", "T1": "T1 gave up", "other": "neither"}
    requests = sum(s[c + " requests"] for c in causes)
    return "\n".join(
        [
            f"5. requests where ARC hits fewer prompt tokens than LRU: {requests}; their lookup stopped"
            " at content " + ", ".join(f"{name[c]}: {s[c + ' requests']}" for c in causes),
            "6. prompt tokens they lose, at content " + ", ".join(f"{name[c]}: {s[c]:,}" for c in causes),
            f"7. requests where ARC hits more: {s['gain requests']}, gaining {s['gain']:,} tokens",
            f"8. net: {' + '.join(f'{s[c]:,}' for c in causes)} - {s['gain']:,} = {net:,} tokens"
            f" of {prompt_tokens:,}: {pts(net)} points = "
            + " + ".join(f"{pts(s[c])} ({c})" for c in causes)
            + f" - {pts(s['gain'])} (gains)",
        ]
    )
