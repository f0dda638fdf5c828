"""Scenarios: every step is real and deterministic, refused steps change nothing, and time
travel is exact.

Oracles: TinyLM recomputing from scratch with dense attention (`forward_reference`,
`generate_reference`), K/V written by a one-shot prefill into a fresh pool, the pool rules
of docs/design.md worked out by hand from the prompts, and (for Back) the snapshots and K/V
copied on the way forward.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from pagedkv import KVCachePool, PageState, SequenceManager
from pagedkv.scenarios import SCENARIOS, Action, ScenarioRun, default_model, get_scenario
from pagedkv.scenarios.library import (
    FILL_PROMPTS,
    PREEMPT_NEW_TOKENS,
    PREEMPT_REQUESTS,
    PROMPT_A,
    PROMPT_B,
    SYSTEM_PROMPT,
)

# Geometries other than the stories' own: tight pools (refusals, evictions, preemption) and
# roomy ones with large pages.
GEOMETRIES = [(20, 2), (12, 4), (20, 3), (40, 8), (64, 16)]


def assert_live_sequences_hold_real_kv(run: ScenarioRun) -> None:
    """Every live sequence is fully computed: its K/V equal a one-shot prefill of its tokens
    in a fresh pool, and the logits the run samples from equal dense recomputation."""
    model = run.model
    kv = run.pool.kv_cache  # [layers, 2, num_pages, page_size, kv_heads, head_dim]
    flat = kv.reshape(kv.shape[0], 2, -1, *kv.shape[4:])  # [layers, 2, slots, kv_heads, head_dim]
    for seq_id in run.seqs.sequences:
        seq = run.seqs.get(seq_id)
        tokens = seq.token_ids
        assert seq.num_computed_tokens == len(tokens), seq_id
        # a fresh pool without prefix caching hands out pages 0, 1, ... in order, so position
        # i lives in slot i there
        fresh = SequenceManager(
            KVCachePool(model.cache_config(-(-len(tokens) // 16), 16, enable_prefix_caching=False))
        )
        fresh.add("x", tokens)
        model.forward(fresh, ["x"])
        expected = fresh.pool.kv_cache.reshape(flat.shape[:2] + (-1,) + flat.shape[3:])
        np.testing.assert_allclose(flat[:, :, seq.slot_mapping()], expected[:, :, : len(tokens)], atol=1e-4)
        if seq_id in run.logits:
            reference = model.forward_reference(tokens)[-1]
            np.testing.assert_allclose(run.logits[seq_id], reference, atol=1e-4)


def run_to_end(name: str, check_kv: bool = False, **geometry) -> ScenarioRun:
    """Step to the end, checking the pool's invariants after every step and (check_kv) the
    K/V and logits after about 30 of them (an uncomputed token stays uncomputed, so a
    check after a later step still catches it) and after the last."""
    run = ScenarioRun(name, **geometry)
    stride = max(1, len(run.steps) // 30)
    while not run.done:
        run.step()
        run.seqs.check_invariants()
        if check_kv and (len(run.history) % stride == 0 or run.done):
            assert_live_sequences_hold_real_kv(run)
    return run


def tokens_of(run: ScenarioRun, seq_id) -> list[int]:
    return [r.tokens[seq_id] for r in run.records if seq_id in r.tokens]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_step_leaves_real_kv_and_logits_of_a_dense_recompute(name):
    run = run_to_end(name, check_kv=True)
    assert len(run.records) == len(run.steps) == len(run.snapshots) - 1
    refused = [r.index for r in run.records if r.note.startswith("refused")]
    assert refused == ([len(run.steps)] if name == "fill" else [])  # fill ends on a full pool


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenarios_are_deterministic(name):
    a, b = run_to_end(name), run_to_end(name)
    assert a.snapshots == b.snapshots
    assert [r.tokens for r in a.records] == [r.tokens for r in b.records]
    assert [r.lines() for r in a.records] == [r.lines() for r in b.records]
    assert np.array_equal(a.pool.kv_cache, b.pool.kv_cache)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SCENARIOS))
@pytest.mark.parametrize("num_pages, page_size", GEOMETRIES)
def test_scenarios_on_other_geometries_generate_what_dense_recompute_does(name, num_pages, page_size):
    run = run_to_end(name, check_kv=True, num_pages=num_pages, page_size=page_size)
    assert sum(len(r.tokens) for r in run.records) > 0  # the geometry leaves room to generate
    for k, record in enumerate(run.records, start=1):
        if record.note.startswith("refused"):  # said why, and changed nothing at all
            assert not record.events and not record.tokens
            assert run.snapshots[k] == run.snapshots[k - 1]
    if run.scheduler is not None:  # every request: the reference's tokens (an aborted one: a prefix)
        for req_id, state in run.scheduler.requests.items():
            expected = default_model().generate_reference(state.prompt_token_ids, state.max_new_tokens)
            if state.finish_reason == "aborted":
                expected = expected[: len(state.output)]
            assert state.status == "finished" and state.output == expected, req_id


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


def test_a_refusal_names_every_sequence_whose_last_page_is_full_in_plain_words():
    run = ScenarioRun("fill", num_pages=20, page_size=2)  # pages of 2: two last pages fill at once
    while run.can_step and not run.step().note.startswith("refused"):
        pass
    note = run.records[-1].note
    full = [str(s) for s in run.seqs.sequences if run.seqs.get(s).num_tokens % 2 == 0]  # by hand
    assert len(full) >= 2 and f"the last pages of {', '.join(full[:-1])} and {full[-1]} are full" in note


def test_fill_stops_when_a_sequence_needs_a_page_and_none_is_left():
    run = run_to_end("fill")
    assert run.pool.num_active_pages == run.num_pages
    # the last step is refused whole: no sequence got a token, nothing changed
    # the refusal names the sequence whose last page is full (its length a multiple of 4)
    full = [s for s in run.seqs.sequences if run.seqs.get(s).num_tokens % 4 == 0]
    assert full == ["charlie"]
    note = "refused: out of pages: the last page of charlie is full, so the step needs 1 new page, and 0 are"
    assert run.records[-1].note.startswith(note)
    assert not run.records[-1].tokens and run.snapshots[-1] == run.snapshots[-2]
    # every step before the last had room: pages needed by hand, per sequence
    decodes = len(run.steps) - len(FILL_PROMPTS)
    lengths = [len(t) for t in FILL_PROMPTS.values()]
    assert sum(-(-(n + decodes - 1) // 4) for n in lengths) <= run.num_pages
    assert sum(-(-(n + decodes) // 4) for n in lengths) > run.num_pages


def common_prefix(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


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
    before = run.seqs.snapshot()
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
    for _ in range(4):  # admit, fork, fork, fork: n = 4 samples
        run.step()
    table = run.seqs.block_table("sample.0")
    assert all(run.pool.ref_count(p) == 4 for p in table)
    record = run.step()  # each sample writes into the shared, partial last page
    assert [e.kind for e in record.events].count("cow") == 3  # the last writer writes in place
    assert len({tuple(run.seqs.block_table(f"sample.{k}")) for k in range(4)}) == 4
    assert all(run.pool.ref_count(p) == 4 for p in table[:-1])  # full pages stay shared


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
    frees = [e for r in run.records if r.action.op == "beam" for e in r.events if e.kind == "free"]
    assert frees and not any(r.note for r in run.records[1:])  # a dropped beam is no finished request
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
def test_back_restores_exactly_the_state_recorded_on_the_way_forward(name, fraction):
    run = ScenarioRun(name)
    k = max(1, int(len(run.steps) * fraction))
    seen = [(run.seqs.snapshot(), run.pool.kv_cache.copy(), dict(run.logits))]
    for _ in range(k):
        run.step()
        seen.append((run.seqs.snapshot(), run.pool.kv_cache.copy(), dict(run.logits)))
    for n in (k - 1, k - 2):  # back twice: each lands on what step n left behind
        if n < 0:
            break
        assert run.back()
        snapshot, kv, logits = seen[n]
        assert run.seqs.snapshot() == snapshot and run.cursor == n
        assert np.array_equal(run.pool.kv_cache, kv)
        assert logits.keys() == run.logits.keys()
        assert all(np.array_equal(logits[s], run.logits[s]) for s in logits)
    while run.cursor < k:  # stepping again lands on the same states (sampling included)
        run.step()
        snapshot, kv, _ = seen[run.cursor]
        assert run.seqs.snapshot() == snapshot and np.array_equal(run.pool.kv_cache, kv)


def test_back_undoes_actions_of_your_own_and_reset_starts_over():
    run = ScenarioRun("walkthrough")
    run.step()
    before = run.seqs.snapshot()
    run.apply(Action("fork", "mine", parent="request_A"))
    assert run.pool.ref_count(0) == 2
    run.back()
    assert run.seqs.snapshot() == before and "mine" not in run.seqs
    run.reset()
    assert run.history == [] and run.seqs.snapshot() == ScenarioRun("walkthrough").seqs.snapshot()
    assert not run.back()


def test_a_refused_action_changes_nothing_and_says_why():
    run = ScenarioRun("fill")
    run.step()
    before = run.seqs.snapshot()
    for action in (
        Action("free", "nobody"),
        Action("fork", "x", parent="nobody"),
        Action("add", "alpha", text="duplicate id"),
        Action("add", "huge", text="x" * 200),  # more pages than the pool has
        Action("decode", seq_ids=("alpha", "alpha")),
    ):
        record = run.apply(action)
        assert record.note.startswith("refused: ") and not record.events
        assert run.seqs.snapshot() == before
    assert len(run.history) == 6


def preempt_run_with_queued_requests() -> ScenarioRun:
    run = ScenarioRun("preempt")
    for _ in PREEMPT_REQUESTS:  # the requests wait in the scheduler's queue
        run.step()
    assert [s.req_id for s in run.scheduler.waiting] == list(PREEMPT_REQUESTS)
    return run


@pytest.mark.parametrize(
    "action",
    [
        Action("add", "req3", text="mine"),
        Action("fork", "req3", parent="mine"),
        Action("request", "mine", text="again", width=2),
    ],
    ids=["add-a-waiting-id", "fork-to-a-waiting-id", "request-a-live-id"],
)
def test_ids_of_the_scheduler_and_of_the_run_stay_apart(action):
    run = preempt_run_with_queued_requests()
    run.apply(Action("add", "mine", text="my own prompt"))
    before = run.seqs.snapshot()
    record = run.apply(action)
    assert record.note.startswith("refused: ") and run.seqs.snapshot() == before
    run.apply(Action("free", "mine"))
    while not run.done:  # the scheduler still serves every request exactly
        assert not run.step().note.startswith("refused")
    assert not run.scheduler.has_unfinished
    for req_id, text in PREEMPT_REQUESTS.items():
        expected = default_model().generate_reference(text, PREEMPT_NEW_TOKENS)
        assert run.scheduler.outputs[req_id] == expected


def test_a_decode_naming_a_scheduler_sequence_is_refused_before_any_token():
    run = preempt_run_with_queued_requests()
    run.step()  # the scheduler admits req1 and req2
    run.apply(Action("add", "mine", text="my own prompt!"))
    before, kv = run.seqs.snapshot(), run.pool.kv_cache.copy()
    record = run.apply(Action("decode", seq_ids=("mine", "req1")))
    assert record.note == "refused: 'req1' is decoded by the scheduler, not by this step"
    assert run.seqs.snapshot() == before and np.array_equal(run.pool.kv_cache, kv)
    assert_live_sequences_hold_real_kv(run)
    assert run.back() and run.seqs.snapshot() == before  # history agrees with the pool


def test_a_refused_decode_takes_no_draw_from_the_sampler():
    def last_tokens(refuse_first: bool) -> dict:
        run = run_to_end("fill")  # every page ACTIVE
        if refuse_first:
            record = run.apply(Action("decode", temperature=1.0))
            assert record.note.startswith("refused: out of pages")
        run.apply(Action("free", "alpha"))
        return run.apply(Action("decode", temperature=1.0)).tokens

    assert last_tokens(True) == last_tokens(False)


def test_new_id_never_reuses_a_name():
    run = ScenarioRun("walkthrough")
    run.apply(Action("add", run.new_id("user"), text="one"))
    run.apply(Action("free", "user1"))
    assert run.new_id("user") == "user2"


def test_new_id_never_takes_a_name_the_scenario_adds_later():
    """A learner's request added mid-scenario must not take the id of a request the
    scenario's own later steps add (notebook 03: "Add request" after user1 was named
    user2, and the scenario's user2 step was then refused)."""
    run = ScenarioRun("prefix")
    for _ in range(4):  # user1 arrives and generates three tokens
        run.step()
    new = run.new_id("user")
    assert new not in {step.seq_id for step in run.steps}
    run.apply(Action("add", new, text="mine"))
    record = run.step()  # the scenario's user2 arrives
    assert not record.note.startswith("refused"), record.note


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
    run = preempt_run_with_queued_requests()
    run.step()  # req1 runs
    for action in (Action("free", "req1"), Action("fork", "child", parent="req1")):
        assert "belongs to the scheduler" in run.apply(action).note
    with pytest.raises(TypeError, match="seq_id must be a str or int"):
        Action("add", ["list"], text="x")
    with pytest.raises(TypeError, match=r"seq_ids\[1\] must be a str or int"):
        Action("decode", seq_ids=("a", 1.5))


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


def test_after_the_scenario_step_refuses_and_decode_all_goes_on():
    run = run_to_end("walkthrough")  # ends with request_B live
    assert not run.can_step and run.can_decode_all
    with pytest.raises(ValueError, match="the scenario is done"):
        run.step()
    before = list(run.seqs.get("request_B").token_ids)
    record = run.decode_all()
    after = run.seqs.get("request_B").token_ids
    # exactly one token more: the one the step sampled (a no-op step would fail here)
    assert record.action.op == "decode" and record.own
    assert after == [*before, record.tokens["request_B"]]
    assert not run_to_end("eviction").can_decode_all  # every request finished
    assert not run_to_end("preempt").can_decode_all  # the scheduler finished everything


def test_a_scheduler_scenario_knows_its_total_before_the_first_step():
    run = ScenarioRun("preempt")
    total = len(run.steps)
    assert total > len(run.scenario.steps())  # the "schedule" step, repeated
    while not run.done:
        run.step()
        assert len(run.steps) == total
    assert not run.scheduler.has_unfinished  # exactly enough steps to finish everything


def test_chunked_scenario_prefills_in_chunks_and_abort_leaves_pages_for_a_hit():
    run = ScenarioRun("chunked")
    notes = []
    while run.can_step:
        record = run.step()
        notes.append(record.note)
        if record.action.op == "abort":
            chat_pages = {e.page_id for e in record.events if e.kind == "cache"}
            assert len(chat_pages) == 4  # 17 prompt tokens + 1: 4 full pages stay CACHED
        run.seqs.check_invariants()
    assert any("prefill long (8 tokens, 34 left)" in n for n in notes)
    assert not any("long" in n and "decode" in n for n in notes[:7])  # no token mid-prompt
    again = run.scheduler.request("chat_again")
    assert run.scheduler.request("chat").finish_reason == "aborted"
    assert again.finish_reason == "length" and run.pool.stats.prefix_hits == 16
    model = default_model()
    assert again.output == model.generate_reference(again.prompt_token_ids, 4)


def test_decode_all_samples_as_the_scenario_does_and_back_replays_it_exactly():
    """In the parallel-sampling scenario the learner's Decode all draws a token per sample
    (greedy decoding would give every sample of one context the same token), and a replay
    after Back draws the same tokens again."""
    run = ScenarioRun("parallel")
    run.goto(5)  # the four samples share one context

    def last_tokens() -> list[int]:
        return [run.seqs.get(s).token_ids[-1] for s in run.seqs.snapshot().seq_ids]

    run.decode_all()
    drawn = last_tokens()
    assert len(drawn) == 4 and len(set(drawn)) > 1  # one context, different tokens
    run.back()
    run.decode_all()
    assert last_tokens() == drawn


def test_a_finish_note_counts_own_pages_and_shared_pages_from_the_ref_counts_before_it():
    """The prefix scenario's finishes, checked against the snapshot before each one: a page
    another block table also holds (ref count above 1) only loses a reference and stays
    ACTIVE; the others are released. user1 and user2 share the 7 pages of the common
    28-token prefix with requests still running; user3 and user4 finish alone."""
    run = ScenarioRun("prefix")
    run.goto(len(run.steps))
    notes = {}
    for i, record in enumerate(run.records):
        if record.action.op != "free":
            continue
        seq_id, before, after = record.action.seq_id, run.snapshots[i], run.snapshots[i + 1]
        table = before.block_tables[seq_id]
        shared = [p for p in table if before.ref_count[p] > 1]
        assert all(after.ref_count[p] == before.ref_count[p] - 1 for p in table)
        assert all(PageState(after.state[p]) == PageState.ACTIVE for p in shared)
        notes[seq_id] = (record.note, len(table) - len(shared), len(shared))
    assert notes["user2"] == (
        "user2 finished: its 4 own pages were released, tail first; "
        "7 shared pages stay with the others (ref count down by one); pages 14, 13, 12 go CACHED "
        "(full and hashed: kept for reuse), page 18 goes FREE (partial: no hash)",
        4,
        7,
    )
    assert notes["user4"][0].startswith("user4 finished: its 11 pages were released, tail first; ")
    for note, own, shared in notes.values():
        assert (f"{shared} shared pages stay" in note) == (shared > 1)
        assert f"its {own} " in note


def test_a_refused_sequence_is_said_never_admitted_not_finished():
    """In a pool of 4 pages every prompt of `prefix` is refused at admission: the decode steps
    after it must not say those sequences finished (they never started)."""
    run = ScenarioRun("prefix", num_pages=4, page_size=4)
    run.goto(len(run.steps))
    refused = [r for r in run.records if r.note.startswith("refused")]
    idle = [r.note for r in run.records if r.note.startswith("nothing to decode")]
    assert refused and idle and not run.seqs.sequences
    assert all("finished" not in note for note in idle), idle
    assert any(note.startswith("nothing to decode: user1 never admitted: its ") for note in idle), idle


def test_a_refusal_for_a_shared_last_page_says_copy_on_write_not_full():
    """A fork and its parent share a partial last page: decoding both needs a copy, not a new
    page for a full one, and the refusal says so (the page is not full: 1 token of 4)."""
    from pagedkv.scenarios import Action

    run = ScenarioRun("prefix")
    for _ in range(6):
        run.step()
    run.apply(Action("add", "yours1", parent="user1", text=" why is the sky blue?"))
    run.apply(Action("fork", "yours1.f1", parent="yours1"))
    last = run.seqs.block_table("yours1")[-1]
    assert run.seqs.get("yours1").num_tokens % run.page_size != 0  # partial, shared by two
    assert run.snapshots[-1].ref_count[last] == 2
    assert run.pool.num_available_pages == 0  # no page to copy into
    note = run.apply(Action("decode", seq_ids=("yours1", "yours1.f1"))).note
    assert note.startswith("refused") and "shared last page (copy-on-write)" in note, note
    assert "is full" not in note and "are full" not in note


def test_preempt_log_says_which_allocated_pages_were_free_and_which_evicted():
    """A learner at step 20 of `preempt` read "evict pages 10, 11 for req2" then "allocate pages
    8, 10, 11" and had to work out where page 8 came from: req1's partial last page, FREE since
    req1 finished at step 19. The allocation line now says it."""
    from pagedkv.scenarios import ScenarioRun

    run = ScenarioRun("preempt")
    run.goto(20)
    lines = run.records[19].log_lines()
    assert "evict (LRU victim) pages 10, 11 for req2" in lines
    said = "allocate pages 8, 10, 11 for req2 (page 8 was FREE; 10, 11 evicted):"
    assert any(line.startswith(said) for line in lines)
    assert any(line.startswith("allocate pages 9, 3, 2, 1 for req3 (9, 3, 2, 1 evicted):") for line in lines)
