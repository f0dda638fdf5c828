"""A step that preempts names the request the pool could not serve and what it asked for.

Oracles: the block tables and token counts before and after the step (the asker's pages
grow, the victim's go), the pool's counts before it, and page arithmetic worked out by hand.
"""

from __future__ import annotations

from pagedkv import CacheConfig, KVCachePool, SequenceManager
from pagedkv.engine.scheduler import Scheduler
from pagedkv.engine.scheduler_output import PageShortfall


def _scheduler(num_pages: int, page_size: int, budget: int) -> Scheduler:
    config = CacheConfig(num_pages=num_pages, page_size=page_size, num_layers=1, num_kv_heads=1, head_dim=2)
    return Scheduler(SequenceManager(KVCachePool(config)), max_num_seqs=2, max_num_batched_tokens=budget)


def test_a_decode_short_of_a_page_names_the_asker_not_the_victim():
    sched = _scheduler(num_pages=4, page_size=2, budget=16)
    sched.add_request("a", [1, 2, 3], 4)
    sched.add_request("b", [5, 6, 7], 4)
    for _ in range(2):  # step 1: both prompts, 2 pages each; step 2: their 4th tokens, no page
        assert not sched.step().preempted
    seqs = sched.manager
    # a's 4 tokens fill its 2 pages: its 5th needs a 3rd, and every page is ACTIVE
    assert seqs.get("a").num_tokens == 4 and len(seqs.block_table("a")) == 2
    assert sched.pool.num_free_pages + sched.pool.num_cached_pages == 0
    rec = sched.step()
    assert rec.preempted == (("b", "recompute"),)  # the last of the running list
    assert rec.short_of_pages == (PageShortfall("a", 5, 5, 1),)
    assert len(seqs.block_table("a")) == 3 and "b" not in seqs  # a's pages grew, b's went


def test_a_prompt_chunk_short_of_pages_names_itself_when_it_is_the_victim():
    sched = _scheduler(num_pages=6, page_size=4, budget=8)
    sched.add_request("chat", [1, 2, 3, 4, 5], 10)
    sched.add_request("long", list(range(10, 27)), 2)  # 17 tokens, in chunks
    for _ in range(2):  # chat's prompt, then decodes; long's tokens 1-3, then 4-10
        assert not sched.step().preempted
    seqs, pool = sched.manager, sched.pool
    assert seqs.get("long").num_tokens == 10 and len(seqs.block_table("long")) == 3
    assert (pool.num_free_pages, pool.num_cached_pages) == (1, 0)
    rec = sched.step()
    # the budget less chat's decode is 7 tokens, long's 11-17: they fill pages 4 and 5 of
    # long, 2 new pages, and only 1 is FREE; long is the last of the running list
    assert rec.preempted == (("long", "recompute"),)
    assert rec.short_of_pages == (PageShortfall("long", 11, 17, 2),)
    assert "long" not in seqs and rec.decode == ("chat",)
