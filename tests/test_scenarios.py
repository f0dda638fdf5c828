"""Scenarios: every step is real and deterministic, and time travel is exact.

Oracles: TinyLM recomputing from scratch with dense attention (`generate_reference`), the
pool rules of DESIGN.md worked out by hand from the prompts, and a fresh run stepped to the
same point (for Back).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from pagedkv import PageState
from pagedkv.scenarios import SCENARIOS, Action, ScenarioRun, default_model, get_scenario
from pagedkv.scenarios.library import (
    FILL_PROMPTS,
    PREEMPT_NEW_TOKENS,
    PREEMPT_REQUESTS,
    PROMPT_A,
    PROMPT_B,
    SYSTEM_PROMPT,
)


def run_to_end(name: str, **geometry) -> ScenarioRun:
    run = ScenarioRun(name, **geometry)
    while not run.done:
        run.step()
        run.pool.check_invariants()
    return run


def tokens_of(run: ScenarioRun, seq_id) -> list[int]:
    return [r.tokens[seq_id] for r in run.records if seq_id in r.tokens]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_scenario_runs_to_the_end_with_the_pool_rules_holding(name):
    run = run_to_end(name)
    assert len(run.records) == len(run.steps) == len(run.snapshots) - 1
    assert run.snapshots[-1] == run.pool.snapshot()


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenarios_are_deterministic(name):
    a, b = run_to_end(name), run_to_end(name)
    assert a.snapshots == b.snapshots
    assert [r.tokens for r in a.records] == [r.tokens for r in b.records]
    assert [r.lines() for r in a.records] == [r.lines() for r in b.records]
    assert np.array_equal(a.pool.kv_cache, b.pool.kv_cache)


@pytest.mark.parametrize("name", list(SCENARIOS))
@pytest.mark.parametrize("num_pages, page_size", [(8, 2), (40, 8), (64, 16)])
def test_scenarios_adapt_to_other_pool_geometries(name, num_pages, page_size):
    run = run_to_end(name, num_pages=num_pages, page_size=page_size)
    assert run.pool.num_pages == num_pages and run.pool.page_size == page_size


def test_walkthrough_generates_what_dense_recompute_generates():
    model = default_model()
    run = run_to_end("walkthrough")
    assert tokens_of(run, "request_A") == model.generate_reference(PROMPT_A, 20)
    assert tokens_of(run, "request_B") == model.generate_reference(PROMPT_B, 36)


def test_walkthrough_pages_follow_the_pool_rules():
    run = ScenarioRun("walkthrough")
    run.step()  # request_A: 18 tokens -> 5 pages, lowest ids first
    assert run.seqs.block_table("request_A") == [0, 1, 2, 3, 4]
    for _ in range(20):
        run.step()
    assert len(run.seqs.block_table("request_A")) == -(-(18 + 20) // 4)
    run.step()  # free: full pages CACHED, tail first in the LRU order; the partial page FREE
    assert run.pool.eviction.order() == [8, 7, 6, 5, 4, 3, 2, 1, 0]
    assert run.pool.page(9).state is PageState.FREE
    record = run.step()  # request_B shares request_A's first 16 prompt tokens
    assert record.cached_tokens == 16
    assert run.seqs.block_table("request_B")[:4] == [0, 1, 2, 3]


def test_fill_stops_when_a_sequence_needs_a_page_and_none_is_left():
    run = run_to_end("fill")
    assert run.pool.num_active_pages == run.num_pages
    assert run.records[-1].note.startswith("out of pages")
    # every step before the last had room: pages needed by hand, per sequence
    decodes = len(run.steps) - len(FILL_PROMPTS)
    lengths = [len(t) for t in FILL_PROMPTS.values()]
    assert sum(-(-(n + decodes - 1) // 4) for n in lengths) <= run.num_pages
    assert sum(-(-(n + decodes) // 4) for n in lengths) > run.num_pages


def common_prefix(a: list[int], b: list[int]) -> int:
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def test_prefix_scenario_hits_the_shared_full_pages():
    run = ScenarioRun("prefix")
    records = [run.step() for _ in range(len(run.steps))]
    adds = {r.action.seq_id: r for r in records if r.action.op == "add"}
    prompts = {s: run.model.encode(r.action.text) for s, r in adds.items()}
    earlier: list[list[int]] = []  # every token list written before (the pool never evicts here)
    for seq_id in ("user1", "user2", "user3", "user4"):
        prompt = prompts[seq_id]
        common = max([0, *(common_prefix(prompt, t) for t in earlier)])
        # full pages only, and never the page holding the last prompt token
        expected = min(common // 4, (len(prompt) - 1) // 4) * 4
        assert adds[seq_id].cached_tokens == expected, seq_id
        earlier.append(prompt + tokens_of(run, seq_id))
    assert adds["user2"].cached_tokens >= len(SYSTEM_PROMPT)
    assert any(e.kind == "prefix_hit" for e in adds["user4"].events)  # revived from CACHED


def test_eviction_scenario_evicts_the_lru_victims_tail_first():
    run = ScenarioRun("eviction")
    while run.next_action.seq_id != "doc_C":
        run.step()
    before = run.pool.snapshot()
    order = list(np.argsort(np.where(before.lru_rank >= 0, before.lru_rank, 10**6)))
    order = [int(p) for p in order[: int((before.lru_rank >= 0).sum())]]
    record = run.step()
    evicted = [e.page_id for e in record.events if e.kind == "evict"]
    needed = -(-len(record.action.text) // 4)
    assert evicted == order[: needed - before.state.tolist().count(PageState.FREE)]
    # doc_A's first page survived (eviction takes tails first), so doc_D hits it
    head_of_a = run.snapshots[1].block_tables["doc_A"][0]
    assert head_of_a not in evicted
    record = run.step()
    assert record.action.seq_id == "doc_D" and record.cached_tokens == 4
    assert run.seqs.block_table("doc_D")[0] == head_of_a


def test_parallel_sampling_copies_the_shared_last_page_once_per_extra_writer():
    run = ScenarioRun("parallel")
    for _ in range(3):  # admit, fork, fork
        run.step()
    table = run.seqs.block_table("sample.0")
    assert all(run.pool.ref_count(p) == 3 for p in table)
    record = run.step()  # each sample writes into the shared, partial last page
    assert [e.kind for e in record.events].count("cow") == 2
    assert len({tuple(run.seqs.block_table(f"sample.{k}")) for k in range(3)}) == 3
    assert all(run.pool.ref_count(p) == 3 for p in table[:-1])  # full pages stay shared


def test_beam_search_keeps_the_best_beams_of_a_dense_recompute_search():
    model, width, steps = default_model(), 3, 8
    run = run_to_end("beam")
    prompt = model.encode(run.steps[0].text)
    beams = [(0.0, [])]
    for _ in range(steps):  # a plain beam search over dense recomputation: the oracle
        candidates = []
        for score, out in beams:
            z = model.forward_reference(prompt + out)[-1].astype(np.float64)
            logp = z - z.max() - np.log(np.exp(z - z.max()).sum())
            for token in np.argsort(-logp, kind="stable")[:width]:
                candidates.append((score + float(logp[token]), out + [int(token)]))
        beams = sorted(candidates, key=lambda c: -c[0])[:width]
    live = {s: run.seqs.get(s).token_ids[len(prompt) :] for s in run.seqs.sequences}
    assert sorted(live.values()) == sorted(out for _, out in beams)
    for seq_id, out in live.items():
        expected = next(score for score, o in beams if o == out)
        assert run.scores[seq_id] == pytest.approx(expected, rel=1e-5)  # float32 logits


def test_preemption_is_token_identical_to_an_uninterrupted_run():
    model = default_model()
    run = run_to_end("preempt")
    kinds = [e.kind for e in run.events]
    assert "preempt" in kinds and "resume" in kinds
    for req_id, text in PREEMPT_REQUESTS.items():
        out = run.scheduler.outputs[req_id]
        assert out == model.generate_reference(text, PREEMPT_NEW_TOKENS)
    assert run.pool.num_active_pages == 0


@pytest.mark.parametrize("name", list(SCENARIOS))
@pytest.mark.parametrize("fraction", [0.3, 1.0])
def test_back_restores_exactly_the_previous_state(name, fraction):
    run = ScenarioRun(name)
    k = max(1, int(len(run.steps) * fraction))
    for _ in range(k):
        run.step()
    assert run.back()
    fresh = ScenarioRun(name)
    for _ in range(k - 1):
        fresh.step()
    assert run.pool.snapshot() == fresh.pool.snapshot()
    assert np.array_equal(run.pool.kv_cache, fresh.pool.kv_cache)
    assert run.cursor == fresh.cursor == k - 1
    run.step()  # and stepping again continues the same way
    fresh.step()
    assert run.pool.snapshot() == fresh.pool.snapshot()


def test_back_undoes_actions_of_your_own_and_reset_starts_over():
    run = ScenarioRun("walkthrough")
    run.step()
    before = run.pool.snapshot()
    run.apply(Action("fork", "mine", parent="request_A"))
    assert run.pool.ref_count(0) == 2
    run.back()
    assert run.pool.snapshot() == before and "mine" not in run.seqs
    run.reset()
    assert run.history == [] and run.pool.snapshot() == ScenarioRun("walkthrough").pool.snapshot()
    assert not run.back()


def test_a_refused_action_changes_nothing_and_says_why():
    run = ScenarioRun("fill")
    run.step()
    before = run.pool.snapshot()
    for action in (
        Action("free", "nobody"),
        Action("fork", "x", parent="nobody"),
        Action("add", "alpha", text="duplicate id"),
        Action("add", "huge", text="x" * 200),  # more pages than the pool has
    ):
        record = run.apply(action)
        assert record.note.startswith("refused: ") and not record.events
        assert run.pool.snapshot() == before
    assert len(run.history) == 5


def test_new_id_never_reuses_a_name():
    run = ScenarioRun("walkthrough")
    run.apply(Action("add", run.new_id("user"), text="one"))
    run.apply(Action("free", "user1"))
    assert run.new_id("user") == "user2"


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"op": "jump"}, "op must be one of"),
        ({"op": "add"}, "needs a seq_id"),
        ({"op": "add", "seq_id": "a"}, "needs a text or a parent"),
        ({"op": "fork", "seq_id": "a"}, "needs a parent"),
        ({"op": "beam", "seq_id": "b", "width": 0}, "width in"),
        ({"op": "request", "seq_id": "r", "text": "x"}, "max_new_tokens"),
        ({"op": "decode", "temperature": -1.0}, "temperature must be"),
    ],
)
def test_bad_actions_are_rejected_with_the_argument_named(kwargs, error):
    with pytest.raises(ValueError, match=error):
        Action(**kwargs)


def test_bad_scenario_arguments():
    with pytest.raises(ValueError, match="scenario must be one of"):
        get_scenario("nope")
    with pytest.raises(ValueError, match="num_pages"):
        ScenarioRun("walkthrough", num_pages=0)
    with pytest.raises(TypeError, match="action must be an Action"):
        ScenarioRun("walkthrough").apply("add")
    with pytest.raises(ValueError, match="belongs to the scheduler"):
        run = ScenarioRun("preempt")
        for _ in range(4):
            run.step()
        run._check_unscheduled("req1")
    record = ScenarioRun("preempt").apply(Action("free", "req1"))
    assert record.note.startswith("refused")


@pytest.mark.parametrize(
    "name, expected",
    [
        ("walkthrough", "prefix hit: 16 tokens"),
        ("eviction", "prefix hit: 4 tokens"),
        ("preempt", "preempt req2"),
    ],
)
def test_demo_prints_a_scenario(name, expected):
    done = subprocess.run(
        [sys.executable, "-m", "pagedkv", "demo", "--scenario", name],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert expected in done.stdout and "counters:" in done.stdout


def test_after_the_scenario_step_decodes_the_live_sequences_until_none_is_left():
    run = run_to_end("walkthrough")  # ends with request_B live
    assert run.can_step
    n = run.seqs.get("request_B").num_tokens
    record = run.step()
    assert record.action.op == "decode" and run.seqs.get("request_B").num_tokens in (n, n + 1)
    assert not run_to_end("eviction").can_step  # every request finished
    assert not run_to_end("preempt").can_step  # the scheduler finished everything
