"""A refused admission carries its numbers as fields, and so does the scheduler's record of it.

Oracles: the pool's own counts read at the moment of the refusal (num_free_pages,
num_cached_pages), the prefix hits a probe finds, and page arithmetic worked out by hand.
"""

from __future__ import annotations

import pytest

from pagedkv import CacheConfig, KVCachePool, OutOfPagesError, SequenceManager
from pagedkv.engine.scheduler import Scheduler


def _seqs(num_pages: int = 5) -> SequenceManager:
    config = CacheConfig(num_pages=num_pages, page_size=4, num_layers=1, num_kv_heads=1, head_dim=2)
    return SequenceManager(KVCachePool(config))


def test_a_refused_admission_carries_the_pools_counts():
    seqs = _seqs()
    seqs.add("a", list(range(1, 9)))  # 8 tokens: 2 full pages
    seqs.free("a")  # both CACHED
    seqs.add("b", [50, 51, 52])  # 1 page (b stays): 2 FREE, 2 CACHED
    seqs.add("c", [60, 61, 62, 63, 64])  # the 2 FREE pages
    seqs.free("c")  # c's full page CACHED, its partial one FREE: 1 FREE, 3 CACHED
    prompt = list(range(1, 9)) + list(range(100, 109))  # a's 8 tokens, then 9 more: 17 tokens
    free, cached = seqs.pool.num_free_pages, seqs.pool.num_cached_pages
    own = len(seqs.plan_add("probe", prompt).hits)
    assert (free, cached, own) == (1, 3, 2)
    with pytest.raises(OutOfPagesError) as caught:
        seqs.add("d", prompt)
    err = caught.value
    # 17 tokens fill ceil(17 / 4) = 5 pages; 2 are a's CACHED pages (hits): 3 new ones, and only
    # 1 FREE + 1 evictable CACHED (c's page) are there for them
    assert (err.tokens, err.pages_needed, err.free, err.evictable, err.own_hits) == (
        17,
        3,
        free,
        cached - own,
        own,
    )
    assert str(err) == (
        "prompt of 17 tokens needs 3 new pages; 1 FREE + 1 evictable CACHED"
        " (+ 2 CACHED that are its own hits)"
    )
    assert (seqs.pool.num_free_pages, seqs.pool.num_cached_pages) == (free, cached)  # nothing changed


def test_other_refusals_carry_no_counts():
    seqs = _seqs(num_pages=1)
    seqs.add("a", [1, 2, 3, 4])
    with pytest.raises(OutOfPagesError) as caught:
        seqs.append_slot("a", 5)
    err = caught.value
    assert (err.tokens, err.pages_needed, err.free, err.evictable, err.own_hits) == (None,) * 5


def test_the_schedulers_refusal_carries_the_counts_of_the_pool_at_that_step():
    seqs = _seqs(num_pages=3)
    sched = Scheduler(seqs, max_num_seqs=2, max_num_batched_tokens=16)
    sched.add_request("x", list(range(1, 10)), 4)  # 9 tokens: 3 pages, the whole pool
    sched.add_request("y", [70, 71], 1)
    sched.step()
    refusal = sched.head_refused
    # y (2 tokens) needs 1 page; x holds all 3, none FREE or CACHED
    assert (seqs.pool.num_free_pages, seqs.pool.num_cached_pages) == (0, 0)
    assert refusal.req_id == "y"
    assert (refusal.tokens, refusal.pages_needed, refusal.free, refusal.evictable, refusal.own_hits) == (
        2,
        1,
        seqs.pool.num_free_pages,
        seqs.pool.num_cached_pages,
        0,
    )
    assert refusal.reason == "prompt of 2 tokens needs 1 new page; 0 FREE + 0 evictable CACHED"
