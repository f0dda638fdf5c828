"""Cache-aware routing: N replicas, each one pool, and a router that picks one per request.

Data parallelism serves a model from N replicas, each with its own KV cache, so a prompt
prefix cached on one replica is a miss on the others. Three routers:

- `round_robin`: replica i mod N (SGLang router's `round_robin` policy);
- `least_loaded`: the replica with the fewest requests in flight (running + waiting);
- `prefix_aware`: SGLang router's `cache_aware` policy. When the load is imbalanced —
  (max - min) > `balance_abs_threshold` *and* max > `balance_rel_threshold` x min — take
  the least loaded replica; otherwise take the replica with the longest cached prefix of
  the prompt if it covers more than `cache_threshold` of it, else the replica with the
  most FREE pages (SGLang: the smallest tree, the most room to cache). Defaults are those
  of the first `Router` class of SGLang's router package, `sglang_router` (0.5, 32, 1.0001);
  its later `RouterArgs` (`sglang_router/router_args.py`) defaults to 0.3, 64, 1.5.

Deliberately different: SGLang's router keeps an *approximate* radix tree of the prompts
it sent to each worker; here the router asks each replica's prefix index (`pool.get_cached_block`
over the prompt's block hashes), i.e. the exact cache state, as KV-event-driven routers
(vLLM production-stack, Dynamo) do. Replicas are bookkeeping-only Schedulers stepped in
lock step, one decode step per tick; requests arrive by a Poisson process in ticks.
Leaves out: network latency, heterogeneous replicas, tree eviction on the router side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pagedkv.core.config import CacheConfig
from pagedkv.core.hashing import block_hashes
from pagedkv.core.plumbing.validation import check_int
from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.engine.scheduler import Scheduler
from pagedkv.labs.serving import poisson_arrivals
from pagedkv.labs.workloads import Request, distinct_prefixes

ROUTERS = ("round_robin", "least_loaded", "prefix_aware")


@dataclass(frozen=True)
class RouterConfig:
    router: str = "prefix_aware"  # one of ROUTERS
    cache_threshold: float = 0.5  # prefix_aware: least share of the prompt cached to follow the cache
    balance_abs_threshold: int = 32  # prefix_aware: imbalanced if max - min load exceeds this ...
    balance_rel_threshold: float = 1.0001  # ... and max load exceeds this x min load

    def __post_init__(self) -> None:
        if self.router not in ROUTERS:
            raise ValueError(f"router must be one of {ROUTERS}, got {self.router!r}")
        if not 0 <= self.cache_threshold <= 1:
            raise ValueError(f"cache_threshold must be in [0, 1], got {self.cache_threshold!r}")
        check_int("balance_abs_threshold", self.balance_abs_threshold, 0)
        if not self.balance_rel_threshold >= 1:
            raise ValueError(f"balance_rel_threshold must be >= 1, got {self.balance_rel_threshold!r}")


class Replica:
    """One pool, its SequenceManager and a bookkeeping-only Scheduler."""

    def __init__(self, num_pages: int, page_size: int, max_num_seqs: int) -> None:
        self.pool = KVCachePool(CacheConfig.bookkeeping(num_pages, page_size))
        self.seqs = SequenceManager(self.pool)
        self.scheduler = Scheduler(
            self.seqs, max_num_seqs=max_num_seqs, max_num_batched_tokens=num_pages * page_size
        )

    @property
    def load(self) -> int:
        """Requests in flight: running + waiting (what SGLang's router counts per worker)."""
        return len(self.scheduler.running) + len(self.scheduler.waiting)

    def cached_prefix_tokens(self, hashes: Sequence[bytes]) -> int:
        """Tokens of the prompt's leading full pages this replica's prefix index holds."""
        n = 0
        for block_hash in hashes:
            if self.pool.get_cached_block(block_hash) is None:
                break
            n += 1
        return n * self.pool.page_size


def valve_open(replicas: list[Replica], config: RouterConfig) -> bool:
    """True if prefix-aware routing's safety valve decides: the loads (requests in flight)
    differ by more than both thresholds, so the request goes to the least loaded replica."""
    if config.router != "prefix_aware":
        return False
    loads = [r.load for r in replicas]
    high, low = max(loads), min(loads)
    return high - low > config.balance_abs_threshold and high > config.balance_rel_threshold * low


def route(replicas: list[Replica], request: Request, config: RouterConfig, counter: int) -> tuple[int, bool]:
    """(the replica index the router sends `request` to, whether prefix-aware routing's safety
    valve chose it); `counter`: requests routed so far."""
    if config.router == "round_robin":
        return counter % len(replicas), False
    least = int(np.argmin([r.load for r in replicas]))  # ties: the lowest index
    if config.router == "least_loaded":
        return least, False
    if valve_open(replicas, config):
        return least, True
    pool = replicas[0].pool
    hashes = block_hashes(request.prompt_token_ids, pool.page_size, algo=pool.config.prefix_caching_hash_algo)
    matched = [r.cached_prefix_tokens(hashes) for r in replicas]
    best = int(np.argmax(matched))
    if matched[best] > config.cache_threshold * request.prompt_len:
        return best, False
    return int(np.argmax([r.pool.num_free_pages for r in replicas])), False


def choose(replicas: list[Replica], request: Request, config: RouterConfig, counter: int) -> int:
    """The replica index the router sends `request` to (`counter`: requests routed so far)."""
    return route(replicas, request, config, counter)[0]


def simulate(
    requests: Sequence[Request],
    num_replicas: int,
    config: RouterConfig = RouterConfig(),
    *,
    num_pages: int = 256,
    page_size: int = 16,
    max_num_seqs: int = 32,
    arrival_rate: float = 1.0,
    seed: int = 0,
    sent: list[int] | None = None,
) -> dict:
    """Route the requests, arriving `arrival_rate` per tick (Poisson), over `num_replicas`
    replicas; return the prefix hit rate in tokens, load imbalance, per-replica counts and
    how many requests the safety valve sent (`by_valve`, 0 but for prefix-aware routing).
    `sent`, if given, receives each request's replica index, in request order."""
    check_int("num_replicas", num_replicas, 1, 1024)
    if not requests:
        raise ValueError("requests must not be empty")
    arrivals = poisson_arrivals(len(requests), arrival_rate, seed)
    replicas = [Replica(num_pages, page_size, max_num_seqs) for _ in range(num_replicas)]
    routed = [0] * num_replicas
    by_valve = 0  # requests prefix-aware routing sent by its safety valve, not by the cache
    peak = mean = 0.0  # sums over the ticks while requests still arrive
    most_running = [0] * num_replicas  # per replica: the most requests running at once
    tick = nxt = 0
    while nxt < len(requests) or any(r.scheduler.has_unfinished for r in replicas):
        while nxt < len(requests) and arrivals[nxt] <= tick:
            r = requests[nxt]
            k, valve = route(replicas, r, config, nxt)
            by_valve += valve
            replicas[k].scheduler.add_request(r.req_id, r.prompt_token_ids, r.max_new_tokens, seed=r.seed)
            routed[k] += 1
            nxt += 1
            if sent is not None:
                sent.append(k)
        if nxt < len(requests):  # the steady state: the drain at the end says nothing
            loads = [r.load for r in replicas]
            peak, mean = peak + max(loads), mean + float(np.mean(loads))
        for k, replica in enumerate(replicas):
            if replica.scheduler.has_unfinished:
                replica.scheduler.step()
                most_running[k] = max(most_running[k], len(replica.scheduler.running))
        tick += 1
    queries = sum(r.pool.stats.prefix_queries for r in replicas)
    hits = sum(r.pool.stats.prefix_hits for r in replicas)
    return {
        "router": config.router,
        "num_replicas": num_replicas,
        "hit_rate": hits / queries if queries else 0.0,
        "imbalance": peak / mean if mean else 1.0,  # busiest replica's load / the mean load
        "routed": routed,
        "preemptions": sum(r.scheduler.stats.preemptions for r in replicas),
        "preempted_per_replica": [r.scheduler.stats.preemptions for r in replicas],
        "by_valve": by_valve,
        "most_running": most_running,
        "ticks": tick,
    }


def prefixes_per_replica(
    requests: Sequence[Request], num_replicas: int, prefix_len: int, **options
) -> list[int]:
    """How many distinct prompt prefixes of `prefix_len` tokens (e.g. system prompts) each
    replica was sent, in one `simulate(requests, num_replicas, **options)` run."""
    return replica_counts(requests, num_replicas, prefix_len, **options)["prompts"]


def replica_counts(requests: Sequence[Request], num_replicas: int, prefix_len: int, **options) -> dict:
    """Per replica, in one `simulate(requests, num_replicas, **options)` run: the requests it
    was sent (`routed`), the distinct prefixes of `prefix_len` tokens among them (`prompts`),
    the preemptions it made (`preempted`) and the most requests it ran at once (`most_running`)."""
    sent: list[int] = []
    out = simulate(requests, num_replicas, sent=sent, **options)
    per_replica = [[r for k, r in zip(sent, requests) if k == i] for i in range(num_replicas)]
    return {
        "routed": out["routed"],
        "prompts": [distinct_prefixes(mine, prefix_len) for mine in per_replica],
        "preempted": out["preempted_per_replica"],
        "most_running": out["most_running"],
    }
