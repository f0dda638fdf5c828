"""The eviction lab: replay a request stream through a pool and measure the prefix hit rate.

`replay` admits each request of a `pagedkv.labs.lab_workloads` stream into a fresh
`KVCachePool` of `cache_tokens` slots, appends its output tokens (so the pages a decode
fills are cached too, as in vLLM), and frees it before the next one arrives. The hit rate
is vLLM's: prompt tokens served from the prefix cache / prompt tokens looked up
(`PoolStats.hit_rate`). No model runs: nothing reads K/V, so bookkeeping is all it takes.

`hit_rate_curves` sweeps policies x workloads x cache sizes; `lru_verdict` says, from a
table of rates, where LRU loses and to what. Any `EvictionPolicy` can be tried, by name or
as an object: `check_policy` exercises an object on a scratch set before it goes near a
pool, so a policy that answers with the wrong type, an unevictable victim or a victim its
own order() does not list first is refused with an error naming it, and the pool it was
meant for is untouched.

`hit_rates_by` splits one replay's hit rate by group (by default the source stream of each
request in a mix). `make_policy("lru+pin", ...)` pins the most reused pages (a quarter of
the cache) under LRU.

Leaves out: overlapping requests (each finishes before the next), hence ACTIVE-page hits.
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pagedkv.core.config import CacheConfig
from pagedkv.core.eviction import EvictionPolicy
from pagedkv.core.hashing import block_hashes
from pagedkv.core.plumbing.validation import check_int
from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.labs.eviction_policies import PinnedLRUEvictionPolicy
from pagedkv.labs.lab_workloads import LabRequest
from pagedkv.labs.policy_check import (
    PolicyRejected,
    check_policy,
    likely_todo,
    reuse_feedback,
    reuse_probe,
    try_policy,
)

# re-exported: notebooks import them from here
__all__ = [
    "PolicyRejected",
    "check_policy",
    "likely_todo",
    "reuse_feedback",
    "reuse_probe",
    "try_policy",
]


@dataclass(frozen=True)
class LabResult:
    hit_tokens: int  # prompt tokens served from the prefix cache
    query_tokens: int  # prompt tokens looked up
    evictions: int  # CACHED pages reclaimed
    num_pages: int

    @property
    def hit_rate(self) -> float:
        return self.hit_tokens / self.query_tokens if self.query_tokens else 0.0


def install_policy(pool: KVCachePool, policy: EvictionPolicy) -> None:
    """Give a fresh pool (nothing CACHED yet) another eviction policy; refused, pool
    unchanged, if the policy misbehaves (`check_policy`) or the pool already caches pages."""
    check_policy(policy)
    if len(pool.eviction) or len(policy):
        raise ValueError("policy can only be installed while no page is CACHED")
    policy.attach(pool.num_pages, lambda page_id: pool.page(page_id).block_hash)
    pool.eviction = policy


def num_pages_for(requests: Sequence[LabRequest], cache_tokens: int, page_size: int) -> int:
    """Pages of a cache of `cache_tokens` slots, checked to hold the longest request."""
    check_int("page_size", page_size, 1, 1 << 16)
    check_int("cache_tokens", cache_tokens, 1)
    if cache_tokens < page_size:
        raise ValueError(f"cache_tokens must be at least one page ({page_size} tokens), got {cache_tokens}")
    longest = max(r.final_len for r in requests)
    if cache_tokens // page_size * page_size < longest:
        raise ValueError(
            f"cache_tokens={cache_tokens} ({cache_tokens // page_size} pages of {page_size}) "
            f"cannot hold the longest request ({longest} tokens)"
        )
    return cache_tokens // page_size


def serve_one_at_a_time(seqs: SequenceManager, requests: Sequence[LabRequest]) -> None:
    """Each request in turn: admit its prompt, append its output tokens, free it. Its pages
    stay CACHED for the requests after it, until evicted."""
    for r in requests:
        seqs.add(r.req_id, r.prompt_token_ids)
        for token in r.output_token_ids:
            seqs.append_slot(r.req_id, token)
        seqs.free(r.req_id)


def replay(
    requests: Sequence[LabRequest],
    cache_tokens: int,
    policy: str | EvictionPolicy = "lru",
    page_size: int = 16,
    prefix_index: str = "hash",
) -> LabResult:
    """Run the stream one request at a time through a pool of `cache_tokens` slots."""
    pool = lab_pool(requests, cache_tokens, policy, page_size, prefix_index)
    serve_one_at_a_time(SequenceManager(pool), requests)
    stats = pool.stats
    return LabResult(stats.prefix_hits, stats.prefix_queries, stats.evictions, pool.config.num_pages)


def lab_pool(
    requests: Sequence[LabRequest],
    cache_tokens: int,
    policy: str | EvictionPolicy,
    page_size: int,
    prefix_index: str = "hash",
) -> KVCachePool:
    """A fresh bookkeeping pool of `cache_tokens` slots for `requests`, with `policy` (a name,
    or an object checked by `check_policy` and copied) installed."""
    if not requests:
        raise ValueError("requests must not be empty")
    num_pages = num_pages_for(requests, cache_tokens, page_size)
    name = policy if isinstance(policy, str) else "lru"
    if not isinstance(policy, str):
        check_policy(policy)
        policy = copy.deepcopy(policy)
    config = CacheConfig.bookkeeping(num_pages, page_size, eviction_policy=name, prefix_index=prefix_index)
    pool = KVCachePool(config)
    if isinstance(policy, EvictionPolicy):
        install_policy(pool, policy)
    return pool


def source(request: LabRequest) -> str:
    """The stream a request comes from: the letters its id starts with ("chat9-t0" -> "chat",
    "zipf3-p2" -> "zipf", "scan11-0" -> "scan")."""
    letters = re.match(r"[a-z]*", request.req_id)
    return letters.group() if letters else ""


def hit_rates_by(
    requests: Sequence[LabRequest],
    cache_tokens: int,
    key: Callable[[LabRequest], str] = source,
    policy: str | EvictionPolicy = "lru",
    page_size: int = 16,
) -> dict[str, float]:
    """`replay`'s run, its hit rate split by group: {key(request): prompt tokens of that
    group's requests served from the prefix cache / their prompt tokens}. With the default
    key, each source stream's share of a mix (how chat fares among the scan's bursts)."""
    pool = lab_pool(requests, cache_tokens, policy, page_size)
    seqs = SequenceManager(pool)
    hits: Counter[str] = Counter()
    looked_up: Counter[str] = Counter()
    for request in requests:
        hits_before, queries_before = pool.stats.prefix_hits, pool.stats.prefix_queries
        serve_one_at_a_time(seqs, [request])
        hits[key(request)] += pool.stats.prefix_hits - hits_before
        looked_up[key(request)] += pool.stats.prefix_queries - queries_before
    return {group: hits[group] / n for group, n in looked_up.items()}


def most_reused_pages(requests: Sequence[LabRequest], budget: int, page_size: int = 16) -> set[bytes]:
    """Block hashes of the (at most) `budget` full prompt pages that recur most often in the
    stream: what an operator who knows the traffic would pin. Counted over the whole stream,
    so it is an optimistic pin list."""
    counts = Counter(h for r in requests for h in block_hashes(r.prompt_token_ids, page_size))
    return {h for h, n in counts.most_common(budget) if n > 1}


def make_policy(
    name: str, requests: Sequence[LabRequest], cache_tokens: int, page_size: int
) -> str | EvictionPolicy:
    """A policy name of the lab, or "lru+pin": LRU pinning the most reused pages, up to a
    quarter of the cache."""
    if name != "lru+pin":
        return name
    budget = cache_tokens // page_size // 4
    return PinnedLRUEvictionPolicy(most_reused_pages(requests, budget, page_size))


def hit_rate_curves(
    workloads: Mapping[str, Sequence[LabRequest]],
    policies: Sequence[str],
    cache_sizes: Sequence[int],
    page_size: int = 16,
) -> dict[str, dict[str, list[float]]]:
    """workload -> policy -> hit rate at each cache size (in tokens), in order. Besides the
    names `make_policy` knows, "leaf-lru" is SGLang's leaf-first LRU: the pool with the
    radix tree as its prefix index (`CacheConfig(prefix_index="radix")`)."""

    def rate(policy: str, requests: Sequence[LabRequest], cache_tokens: int) -> float:
        if policy == "leaf-lru":
            return replay(requests, cache_tokens, "lru", page_size, prefix_index="radix").hit_rate
        chosen = make_policy(policy, requests, cache_tokens, page_size)
        return replay(requests, cache_tokens, chosen, page_size).hit_rate

    return {
        w: {p: [rate(p, reqs, c) for c in cache_sizes] for p in policies} for w, reqs in workloads.items()
    }


def lru_verdict(
    rates: dict[str, dict[str, float]], margin: float = 0.01, best_label: str = "best"
) -> list[str]:
    """One line per workload: does LRU lose (by more than `margin`), and to which policy?
    `best_label` names the best other policy's rate ("best arc 31.3%").

    rates: workload -> policy -> hit rate at one cache size; needs an "lru" entry. LRU is
    compared with policies other than LRU: "leaf-lru" (LRU over the radix tree, equal to it
    on these streams) is left out. With LRU alone, the line says so and gives LRU's rate."""
    lines = []
    for workload, by_policy in rates.items():
        lru = by_policy["lru"]
        others = {p: r for p, r in by_policy.items() if p not in ("lru", "leaf-lru")}
        if not others:
            lines.append(f"{workload}: LRU {lru:.1%}; no other policy ran to compare it with")
            continue
        best = max(others, key=lambda p: others[p])
        winners = [p for p, r in others.items() if r - lru > margin]
        if winners:
            lines.append(
                f"{workload}: LRU loses ({lru:.1%}) to {', '.join(winners)}"
                f" ({best_label} {best} {others[best]:.1%})"
            )
        else:
            lines.append(f"{workload}: LRU {lru:.1%}, {_as_good(lru, best, others[best], margin)}")
    return lines


def _as_good(lru: float, best: str, rate: float, margin: float) -> str:
    """How LRU's rate compares with `rate`, the best other policy's (`best`), when none
    beats LRU by more than `margin`."""
    if lru > rate:
        return f"better than every other policy (the next best: {best} {rate:.1%})"
    if lru == rate:
        return f"as good as the best other policy ({best} {rate:.1%})"
    points = 100 * margin
    return f"within {points:g} point{'' if points == 1 else 's'} of the best other policy ({best} {rate:.1%})"
