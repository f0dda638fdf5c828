"""Small experiments the notebooks run: the prefix-cache hit rate against pool size.

`popular_system_prompts` builds the workload: Alpaca-like requests (short instructions with
the prompt lengths of the Alpaca dataset the vLLM paper uses, mean about 19 tokens; see
`pagedkv.labs.workloads`), each starting with one of a few system prompts. Popularity follows a
Zipf law, as request popularity usually does: the k-th prompt is picked with probability
proportional to 1/k, so a few prompts make up most of the traffic.

`prefix_pool_stats` admits the requests one at a time into pools of several sizes, each
request finishing before the next arrives, and reports the share of prompt tokens served
from the prefix cache (`PoolStats.hit_rate`, vLLM's prefix-cache hit rate) and the
evictions for each eviction policy (and, for contrast, with each request's pages released
head first instead of tail first: `release`); `prefix_hit_rates` keeps the hit rates alone;
`first_eviction` says how many requests one pool serves before it first evicts;
`evicted_prefix_pages` says how many evictions took a system prompt's page. It is
bookkeeping only: no model runs, so the pages hold no real K/V, which is fine because
nothing reads them. vLLM measures the same rate on real traffic
(`vllm:prefix_cache_hits` / `vllm:prefix_cache_queries`).

Leaves out: requests that overlap in time (each is freed before the next), and output tokens.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from pagedkv.core.config import CacheConfig
from pagedkv.core.plumbing.validation import check_int
from pagedkv.core.pool import KVCachePool, PoolStats
from pagedkv.core.sequence import SequenceManager
from pagedkv.labs.workloads import Request, alpaca_like, with_system_prompt


def popular_system_prompts(
    num_requests: int = 400, num_prompts: int = 8, length: int = 64, seed: int = 0
) -> list[Request]:
    """Alpaca-like requests, each after one of `num_prompts` system prompts of `length`
    tokens; the k-th prompt is picked with probability proportional to 1/k."""
    check_int("num_requests", num_requests, 1, 1 << 20)
    check_int("num_prompts", num_prompts, 1, 1 << 16)
    check_int("length", length, 1, 1 << 16)
    popularity = 1 / np.arange(1, num_prompts + 1)
    picks = np.random.default_rng(seed).choice(
        num_prompts, size=num_requests, p=popularity / popularity.sum()
    )
    return [
        with_system_prompt([r], length, seed=int(k))[0]  # the seed names the system prompt
        for r, k in zip(alpaca_like(num_requests, seed=seed), picks, strict=True)
    ]


def prefix_pool_stats(
    requests: Sequence[Request],
    pool_sizes: Sequence[int] = (16, 32, 64, 128),
    policies: Sequence[str] = ("lru", "mru"),
    page_size: int = 16,
    tail_first: bool = True,
) -> dict[tuple[int, str], PoolStats]:
    """(num_pages, eviction policy) -> the pool's counters (`PoolStats`: prefix hits and
    queries, evictions, ...) after the requests were admitted and freed one after another,
    each releasing its pages tail first (`tail_first=False`: head first, for contrast)."""
    if not requests:
        raise ValueError("requests must not be empty")
    longest = max(len(r.prompt_token_ids) for r in requests)
    for num_pages in pool_sizes:
        if num_pages * page_size < longest:
            raise ValueError(
                f"pool_sizes: {num_pages} pages of {page_size} slots cannot hold the longest "
                f"prompt ({longest} tokens)"
            )
    stats = {}
    for num_pages in pool_sizes:
        for policy in policies:
            config = CacheConfig(num_pages=num_pages, page_size=page_size, eviction_policy=policy)
            pool = KVCachePool(config)
            seqs = SequenceManager(pool)
            for r in requests:
                seqs.add(r.req_id, r.prompt_token_ids)
                release(seqs, r.req_id, tail_first)
            stats[num_pages, policy] = pool.stats
    return stats


def release(seqs: SequenceManager, seq_id: Hashable, tail_first: bool = True) -> None:
    """Finish `seq_id`: `SequenceManager.free` (tail first, docs/design.md rule 6), or with
    `tail_first=False` the same release head first, its first page first in the LRU order."""
    if tail_first:
        seqs.free(seq_id)
        return
    seq = seqs.get(seq_id)
    del seqs.sequences[seq_id]
    seqs.pool.tick()
    seqs.pool.free_blocks(seq.block_table, seq_id)  # head first: the first page is evicted first
    seqs.pool.publish()


def first_eviction(
    requests: Sequence[Request], num_pages: int, policy: str = "lru", page_size: int = 16
) -> tuple[int, int]:
    """(requests served before the pool's first eviction, their prefix hits in tokens), with
    the requests admitted and freed one after another as in `prefix_pool_stats`.

    Until a pool first evicts, every policy has kept every page, so these hits do not depend
    on the policy. (len(requests), all hits) if the pool never evicts."""
    pool = KVCachePool(CacheConfig(num_pages=num_pages, page_size=page_size, eviction_policy=policy))
    seqs = SequenceManager(pool)
    for i, r in enumerate(requests):
        hits_before = pool.stats.prefix_hits
        seqs.add(r.req_id, r.prompt_token_ids)
        if pool.stats.evictions:
            return i, hits_before
        seqs.free(r.req_id)
    return len(requests), pool.stats.prefix_hits


def evicted_prefix_pages(
    requests: Sequence[Request],
    num_pages: int,
    prefix_len: int,
    tail_first: bool = True,
    page_size: int = 16,
) -> tuple[int, int]:
    """(evictions, those whose page held a block of some request's first `prefix_len` tokens,
    its system prompt) in an LRU pool of `num_pages`, the requests admitted and released one
    after another as in `prefix_pool_stats` (`tail_first`: as `release`). A page counts by
    what it held when it was evicted; whole pages only (`prefix_len // page_size` per request)."""
    check_int("prefix_len", prefix_len, 0)
    pool = KVCachePool(CacheConfig(num_pages=num_pages, page_size=page_size, eviction_policy="lru"))
    seqs = SequenceManager(pool)
    victims: list[int] = []
    pool.events.add_listener(lambda e: victims.append(e.page_id) if e.kind == "evict" else None)
    in_prefix: set[int] = set()  # pages holding a block of a system prompt now
    evictions = prefix_evictions = 0
    for r in requests:
        victims.clear()
        seqs.add(r.req_id, r.prompt_token_ids)
        evictions += len(victims)
        prefix_evictions += sum(p in in_prefix for p in victims)
        table = seqs.block_table(r.req_id)
        in_prefix.difference_update(table)
        in_prefix.update(table[: prefix_len // page_size])
        release(seqs, r.req_id, tail_first)
    return evictions, prefix_evictions


def prefix_hit_rates(
    requests: Sequence[Request],
    pool_sizes: Sequence[int] = (16, 32, 64, 128),
    policies: Sequence[str] = ("lru", "mru"),
    page_size: int = 16,
) -> dict[tuple[int, str], float]:
    """(num_pages, eviction policy) -> share of prompt tokens that were prefix hits, with
    the requests admitted and freed one after another (`prefix_pool_stats`'s hit rates)."""
    stats = prefix_pool_stats(requests, pool_sizes, policies, page_size)
    return {key: s.hit_rate for key, s in stats.items()}
