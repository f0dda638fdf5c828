"""TightRun's views (notebook 05b, section 6), checked against a plain Scheduler run of the
same two requests: its pool's counts, its block tables and its page events, step by step."""

import pytest

from pagedkv import KVCachePool, SequenceManager, TinyLM
from pagedkv.engine.scheduler import Scheduler
from pagedkv.labs.tight_prefill import PAIR, TightRun


@pytest.fixture(scope="module")
def model():
    return TinyLM.pretrained()


@pytest.fixture(scope="module")
def tight(model):
    return TightRun(model)


@pytest.fixture(scope="module")
def plain(model):
    """The same run, stepped by hand: per step the pool's events, (FREE, CACHED) before and
    after, block tables and token counts after, and the waiting head's prefix hits after."""
    pool = KVCachePool(model.cache_config(num_pages=12, page_size=4))
    sched = Scheduler(SequenceManager(pool), model, max_num_seqs=2, max_num_batched_tokens=8)
    for req_id, (text, new) in PAIR.items():
        sched.add_request(req_id, model.encode(text), new)
    seen: list = []
    pool.add_listener(seen.append)
    prompt = model.encode(PAIR["long2"][0])
    steps = {}
    while sched.has_unfinished:
        before = (pool.num_free_pages, pool.num_cached_pages)
        tables = {r: sched.manager.block_table(r) for r in PAIR if r in sched.manager}
        rec = sched.step()
        hits = len(sched.manager.plan_add("probe", prompt).hits)
        steps[rec.step] = {
            "rec": rec,
            "events": [(e.kind, e.page_id, e.seq_id) for e in seen],
            "before": before,
            "after": (pool.num_free_pages, pool.num_cached_pages),
            "tables_before": tables,
            "tables": {r: sched.manager.block_table(r) for r in PAIR if r in sched.manager},
            "tokens": {r: sched.manager.get(r).num_tokens for r in PAIR if r in sched.manager},
            "hits": hits,
        }
        seen.clear()
    return steps


def test_table_rows_are_the_pools_counts_and_every_row_holds_the_12_pages(tight, plain):
    rows = tight.table_rows()
    for label, free, cached, long2, chat2, what in rows:
        last = int(str(label).split()[-1])
        step = plain[last]
        assert (free, cached) == step["after"]
        assert (long2, chat2) == tuple(len(step["tables"].get(r, [])) for r in ("long2", "chat2"))
        assert free + cached + long2 + chat2 == 12
        assert what.split(": ", 1)[-1].startswith(step["rec"].decision)
    # the folded row: steps 9 to 24 only decode chat2, which finishes at 24 after 4 evictions;
    # labelled as the pool after its last step
    folded = [r for r in rows if r[0] == "after 24"]
    assert folded and folded[0][5].startswith("steps 9-24: decode chat2")
    assert folded[0][5].endswith("4 CACHED pages evicted")
    assert sum(plain[s]["rec"].evicted_pages for s in range(9, 25)) == 4
    assert all(not plain[s]["rec"].prefill for s in range(9, 25))


def test_holds_is_the_block_table_after_the_step(tight, plain):
    table = plain[7]["tables"]["long2"]
    assert plain[7]["tokens"]["long2"] == 39 and len(table) == 10
    assert tight.holds(7, "long2") == (
        f"after step 7: long2 holds pages {table}, its tokens 1-39\n"
        f"  its last page, {table[-1]}, is partial: tokens 37-39"
    )


def test_preempted_names_the_asker_and_the_victim_of_the_record(tight, plain):
    # step 6: long2 (34 tokens, 9 pages) asks for 7 tokens (8 less chat2's decode): 35-41 fill
    # pages 10 and 11, 2 new pages; only 1 page is FREE and none CACHED
    assert plain[5]["tokens"]["long2"] == 34 and len(plain[5]["tables"]["long2"]) == 9
    assert plain[6]["before"] == (1, 0) and plain[6]["rec"].preempted == (("long2", "recompute"),)
    assert tight.preempted(6).startswith(
        "step 6: long2 needs 2 new pages for its tokens 35-41; 1 FREE, 0 CACHED"
    )
    # step 8: chat2's 8 tokens fill its 2 pages, its 9th needs a 3rd; no page FREE or CACHED
    assert plain[7]["tokens"]["chat2"] == 8 and len(plain[7]["tables"]["chat2"]) == 2
    assert plain[8]["before"] == (0, 0) and plain[8]["rec"].preempted == (("long2", "recompute"),)
    line = tight.preempted(8)
    assert line.startswith("step 8: chat2 needs 1 new page for its token 9; 0 FREE, 0 CACHED")
    assert line.endswith("the running list is ['chat2', 'long2']: its last, long2, is preempted (recompute)")


def test_released_lists_the_pool_events_of_the_step(tight, plain):
    events = plain[8]["events"]
    held = plain[8]["tables_before"]["long2"]  # long2's table before step 8
    cached = [p for k, p, s in events if k == "cache" and s == "long2"]
    assert cached == held[-2::-1]  # its full pages, tail first
    assert [p for k, p, s in events if k == "free" and s == "long2"] == [held[-1]]
    assert plain[8]["tables"]["chat2"][-1] == held[-1]  # chat2 takes the partial page
    assert tight.released(8, "long2") == (
        f"step 8: long2's full pages {cached} turn CACHED (tail first)\n"
        f"  its partial page {held[-1]} turns FREE, and chat2 takes it"
    )


def test_wait_rows_match_the_probe_of_the_pool(tight, plain):
    rows = tight.wait_rows("long2")
    assert [r[0] for r in rows] == [9, 12, 16, 20, 24]
    prompt_len = 42
    for step, evicted, chunk, need, free, evictable, own in rows:
        hits = plain[step]["hits"]  # long2's prefix hits, probed after the step
        assert own == hits
        end = min(prompt_len, 4 * hits + 7)  # the budget of 8 less chat2's decode
        assert chunk == f"tokens {4 * hits + 1}-{end}"
        assert need == -(-end // 4) - hits == 2
        assert (free, evictable) == (0, 0)
        taken = [p for k, p, s in plain[step]["events"] if k == "evict" and s == "chat2"]
        assert evicted == (", ".join(map(str, taken)) or "-")
    # between the rows nothing changes: no eviction, no free page
    for step in range(9, 24):
        assert plain[step]["after"][0] == 0


def test_resumed_counts_the_hits_and_the_recomputed_tokens(tight, plain):
    hits = [p for k, p, s in plain[25]["events"] if k == "prefix_hit" and s == "long2"]
    assert hits == plain[25]["tables"]["long2"][: len(hits)] and len(hits) == 5
    again = [plain[s]["rec"].recomputed_tokens for s in (25, 26, 27)]
    assert sum(again) == 19 == 39 - 20  # long2 had computed 39 tokens, 20 are hits
    assert tight.resumed(25, "long2").endswith(
        "recompute 8 + 8 + 3 = 19 tokens: its tokens 21-39, computed before"
    )
    assert plain[7]["rec"].recomputed_tokens == 2  # 33-34, computed at step 5 into page 10
    assert "recomputes 2 tokens: its tokens 33-34" in tight.resumed(7, "long2")
    assert tight.scheduler.stats.recomputed_tokens == 2 + 19 and tight.same


def test_the_tables_follow_the_runs_own_requests(model):
    """Requests named other than PAIR's: every row still holds the pool's 12 pages (FREE +
    CACHED + each request's), and the headers name them, latest arrival first."""
    run = TightRun(model, {"a": PAIR["chat2"], "b": PAIR["long2"]})
    assert run.table_columns() == ["step", "FREE", "CACHED", "b pages", "a pages", "what ran"]
    assert all(free + cached + b + a == 12 for _, free, cached, b, a, _ in run.table_rows())
    assert run.wait_columns("b")[1:3] == ["a evicts page", "b's next chunk"]
