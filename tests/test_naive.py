"""The broken-on-purpose cache of notebook 08: each mistake shows its symptom, and with no
mistake switched on its bookkeeping agrees with pagedkv's on the same requests (the oracle)."""

from __future__ import annotations

import numpy as np
import pytest

from pagedkv import dense_attention
from pagedkv.labs.naive import (
    MISTAKES,
    NaiveKVCache,
    lost_pages,
    lru_steps,
    naive_attention,
    pagedkv_cache,
    serve_one_at_a_time,
)

SYSTEM = list(b"System: answer in one sentence. ")


def _requests(n=40, seed=0):
    rng = np.random.default_rng(seed)
    return [SYSTEM + rng.integers(97, 123, 8).tolist() for _ in range(n)]


def test_without_mistakes_it_serves_like_pagedkv():
    fixed = serve_one_at_a_time(NaiveKVCache(32, 4, mistakes=()), _requests())
    real = serve_one_at_a_time(pagedkv_cache(32, 4), _requests())
    assert fixed["refused"] == real["refused"] == [0] * 40
    assert fixed["hits"] == real["hits"] and fixed["available"] == real["available"]


@pytest.mark.parametrize("mistake", ["leak", "no_cached_eviction"])
def test_a_pool_that_never_reclaims_refuses_requests(mistake):
    broken = serve_one_at_a_time(NaiveKVCache(32, 4, mistakes={mistake}), _requests())
    assert sum(broken["refused"]) > 20


def test_no_cached_eviction_keeps_every_page_cached_while_the_leak_loses_them():
    # Worked by hand: the first request takes 10 pages (8 of the system prompt, 2 of its own),
    # each later one 2 more; after 12 requests 10 + 11 * 2 = 32 pages are used up.
    expected_free = [max(32 - 10 - 2 * i, 0) for i in range(40)]
    stuck = serve_one_at_a_time(NaiveKVCache(32, 4, mistakes={"no_cached_eviction"}), _requests())
    leaky = serve_one_at_a_time(NaiveKVCache(32, 4, mistakes={"leak"}), _requests())
    assert stuck["free"] == leaky["free"] == leaky["available"] == expected_free
    assert stuck["cached"] == [32 - f for f in expected_free] and set(stuck["available"]) == {32}
    assert leaky["cached"] == [0] * 40


def test_a_page_per_token_uses_a_page_for_every_token():
    cache = NaiveKVCache(64, 4, mistakes={"page_per_token"})
    cache.add("a", list(range(10)))
    assert 64 - cache.num_free_pages == 10


def test_one_stamp_per_release_evicts_the_head_page_first():
    wall = NaiveKVCache(12, 4, mistakes={"one_stamp_per_release"}, clock=lambda: 5.0)
    logical = NaiveKVCache(12, 4, mistakes=())
    for cache in (wall, logical):
        cache.add("A", list(range(18)))
        cache.free("A")
    real = pagedkv_cache(12, 4)
    real.add("A", list(range(18)))
    real.free("A")
    assert logical.lru_order() == real.pool.eviction.order() == [3, 2, 1, 0]
    assert wall.lru_order() == [0, 1, 2, 3]


def test_lru_steps_counts_each_step_of_notebook_08s_test():
    # 18 tokens: pages 0-3 full, page 4 partial (FREE once released): 12 - 4 = 8 FREE. The
    # other request's 40 tokens need 10 pages: 8 FREE + 2 evicted, the first 2 of the order.
    first, other = list(range(18)), list(range(100, 140))
    wall = lru_steps(
        NaiveKVCache(12, 4, mistakes={"one_stamp_per_release"}, clock=lambda: 5.0), first, other, first + [7]
    )
    real = lru_steps(pagedkv_cache(12, 4), first, other, first + [7])
    for steps, order, hits in ((wall, [0, 1, 2, 3], 0), (real, [3, 2, 1, 0], 8)):
        assert steps["pages_a"] == [0, 1, 2, 3, 4] and steps["free"] == 8 and steps["other_pages"] == 10
        assert steps["lru_order"] == order and steps["evicted"] == order[:2] and steps["hits"] == hits


def test_a_heap_that_is_never_compacted_grows_with_every_release():
    popular = [SYSTEM + [33]] * 100
    stale = serve_one_at_a_time(NaiveKVCache(32, 4, mistakes={"stale_heap"}), popular)
    kept = serve_one_at_a_time(NaiveKVCache(32, 4, mistakes=()), popular)
    assert stale["eviction_entries"][-1] == 8 * 100
    assert max(kept["eviction_entries"]) <= 2 * 32


def test_naive_attention_ignores_the_query():
    rng = np.random.default_rng(0)
    k, v = rng.standard_normal((2, 6, 1, 4))
    q1, q2 = rng.standard_normal((2, 1, 1, 4))
    assert np.array_equal(naive_attention(q1, k, v), naive_attention(q2, k, v))
    assert not np.allclose(naive_attention(q1, k, v), dense_attention(q1, k, v, causal=True))


def test_unknown_mistakes_are_refused():
    with pytest.raises(ValueError, match="mistakes must be among"):
        NaiveKVCache(4, 4, mistakes={"typo"})
    assert "leak" in MISTAKES


@pytest.mark.parametrize(
    ("mistakes", "lost"),
    [({"leak"}, list(range(10))), ({"no_cached_eviction"}, []), ((), [])],
)
def test_the_recount_finds_the_leaked_pages_after_one_request(mistakes, lost):
    # Worked by hand: one 40-token request fills pages 0 to 9 of 4; the leak keeps all 10.
    cache = NaiveKVCache(32, 4, mistakes=mistakes)
    cache.add("r1", _requests(1)[0])
    cache.free("r1")
    assert lost_pages(cache) == lost
