"""The hit-rate experiment against the plain reference pool (pagedkv/exercises/reference_pool.py)."""

from __future__ import annotations

from collections import Counter

import pytest

from pagedkv.engine.request import Request
from pagedkv.exercises.reference_pool import ReferencePool
from pagedkv.labs.experiments import (
    first_eviction,
    popular_system_prompts,
    prefix_hit_rates,
    prefix_pool_stats,
)


def test_the_workload_follows_its_description():
    requests = popular_system_prompts(num_requests=2000, num_prompts=4, length=32, seed=3)
    firsts = Counter(tuple(r.prompt_token_ids[:32]) for r in requests)
    assert len(firsts) == 4  # four system prompts of 32 tokens
    shares = sorted(firsts.values(), reverse=True)
    expected = [1 / k / sum(1 / j for j in range(1, 5)) for k in range(1, 5)]  # Zipf: 1/k
    assert all(abs(n / 2000 - p) < 0.03 for n, p in zip(shares, expected, strict=True))
    assert popular_system_prompts(50, seed=3) == popular_system_prompts(50, seed=3)


@pytest.mark.parametrize("page_size, pool_sizes", [(4, (40, 96, 256)), (16, (10, 24, 64))])
def test_hit_rates_equal_the_reference_pool(page_size, pool_sizes):
    requests = popular_system_prompts(num_requests=150, num_prompts=6, length=40, seed=1)
    rates = prefix_hit_rates(requests, pool_sizes, policies=("lru", "mru"), page_size=page_size)
    for (num_pages, policy), rate in rates.items():
        reference = ReferencePool(num_pages, page_size, policy=policy)
        for r in requests:
            reference.add(r.req_id, list(r.prompt_token_ids))
            reference.free_seq(r.req_id)
        stats = reference.stats
        assert rate == stats["prefix_hits"] / stats["prefix_queries"], (num_pages, policy)
        counted = prefix_pool_stats(requests, [num_pages], [policy], page_size)[num_pages, policy]
        assert counted.evictions == stats["evictions"], (num_pages, policy)
    system_share = 40 * len(requests) / sum(len(r.prompt_token_ids) for r in requests)
    assert all(rate <= system_share for rate in rates.values())  # only system prompts repeat


class HeadFirstReferencePool(ReferencePool):
    """The reference pool, releasing a sequence's pages head first (its free_seq goes tail first)."""

    def free_seq(self, seq) -> None:
        self.tables[seq] = self.tables[seq][::-1]
        super().free_seq(seq)


@pytest.mark.parametrize("policy", ["lru", "mru"])
def test_head_first_release_equals_the_reference_pool_and_costs_lru_hits(policy):
    requests = popular_system_prompts(num_requests=150, num_prompts=6, length=40, seed=1)
    head = prefix_pool_stats(requests, (10, 24), [policy], tail_first=False)
    tail = prefix_pool_stats(requests, (10, 24), [policy])
    for num_pages in (10, 24):
        reference = HeadFirstReferencePool(num_pages, 16, policy=policy)
        for r in requests:
            reference.add(r.req_id, list(r.prompt_token_ids))
            reference.free_seq(r.req_id)
        counted = head[num_pages, policy]
        assert counted.prefix_hits == reference.stats["prefix_hits"], num_pages
        assert counted.evictions == reference.stats["evictions"], num_pages
        if policy == "lru":  # head first, a system prompt's first page goes before its own pages
            assert counted.prefix_hits < tail[num_pages, policy].prefix_hits, num_pages


def test_bad_arguments():
    with pytest.raises(ValueError, match="requests must not be empty"):
        prefix_hit_rates([])
    with pytest.raises(ValueError, match="num_prompts must be in"):
        popular_system_prompts(num_prompts=0)
    requests = popular_system_prompts(num_requests=20)
    with pytest.raises(ValueError, match=r"pool_sizes: 4 pages of 16 slots cannot hold"):
        prefix_hit_rates(requests, pool_sizes=(64, 4))


@pytest.mark.parametrize("policy", ["lru", "mru"])
def test_first_eviction_counted_by_hand(policy):
    # Each prompt: a common 16-token page, an own 16-token page, 1 more token (a partial page).
    # Request 0 takes 3 pages and leaves 2 CACHED; each later one hits the common page, takes
    # 2 and leaves 1 more CACHED. In 6 pages, FREE pages run 4, 3, 2, 1 before requests 1-4:
    # request 4 needs 2 and is the first to evict, after 3 hits of 16 tokens.
    common = list(range(16))
    requests = [Request(f"r{i}", common + [100 + 17 * i + k for k in range(17)], 1) for i in range(6)]
    assert first_eviction(requests, 6, policy) == (4, 3 * 16)
    assert first_eviction(requests[:4], 6, policy) == (4, 3 * 16)  # never evicts: all hits
