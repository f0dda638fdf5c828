"""The hit-rate experiment against the plain reference pool (pagedkv/exercises/reference_pool.py)."""

from __future__ import annotations

from collections import Counter

import pytest

from pagedkv.engine.request import Request
from pagedkv.exercises.reference_pool import ReferencePool
from pagedkv.labs.experiments import (
    evicted_prefix_pages,
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


def test_evicted_prefix_pages_counted_by_hand():
    # As above: request 4 evicts page 1 (request 0's own page), request 5 page 2 (request 1's);
    # the common page is hit each time, so it is never in the LRU order when a victim is taken.
    common = list(range(16))
    requests = [Request(f"r{i}", common + [100 + 17 * i + k for k in range(17)], 1) for i in range(6)]
    assert evicted_prefix_pages(requests, 6, 16) == (2, 0)
    assert evicted_prefix_pages(requests, 6, 16, tail_first=False) == (2, 0)
    # Two system prompts of one page each, then 1 own token, in 2 pages: b evicts a's prompt
    # page (0), the second a evicts b's (1).
    a, b = list(range(16)), list(range(50, 66))
    aba = [Request("a1", a + [200], 1), Request("b", b + [201], 1), Request("a2", a + [202], 1)]
    assert evicted_prefix_pages(aba, 2, 16) == (2, 2)
    assert evicted_prefix_pages(aba, 2, 0) == (2, 0)  # no system prompt: no page of one


@pytest.mark.parametrize("tail_first", [True, False])
def test_evicted_prefix_pages_count_the_same_evictions_as_the_pool_stats(tail_first):
    requests = popular_system_prompts(num_requests=150, num_prompts=6, length=32, seed=1)
    for num_pages in (10, 24):
        stats = prefix_pool_stats(requests, [num_pages], ["lru"], tail_first=tail_first)
        total, of_prefix = evicted_prefix_pages(requests, num_pages, 32, tail_first)
        assert total == stats[num_pages, "lru"].evictions and 0 <= of_prefix <= total
    with pytest.raises(ValueError, match="prefix_len must be"):
        evicted_prefix_pages(requests, 10, -1)
