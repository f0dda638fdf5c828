"""Scheduler: chunked prefill, abort, priorities, request status, schedule / update.

Oracles: `TinyLM.generate_reference` (no cache, recompute every token) for the generated
tokens; `TinyLM.forward_reference` for the K/V an aborted request leaves cached (a probe
that hits them must get the logits of a dense recompute); the pool's page states after a
plain `SequenceManager.add` + `free` of the same tokens; `check_invariants()` every step.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pagedkv import CacheConfig, KVCachePool, SequenceManager, TinyLM
from pagedkv.engine.request import UnknownRequestError
from pagedkv.engine.scheduler import Scheduler

from .hypothesis_profiles import examples
from .test_scheduler import check_consistent, probe_cached_kv, run_checked

LONG = "a long prompt, prefilled in chunks across steps"  # 47 bytes


@pytest.fixture(scope="module")
def model():
    return TinyLM(seed=0, dtype="float64")


def make(model, num_pages=32, page_size=4, **kwargs) -> Scheduler:
    pool = KVCachePool(model.cache_config(num_pages=num_pages, page_size=page_size))
    kwargs = {"max_num_seqs": 4, "max_num_batched_tokens": 8, **kwargs}
    return Scheduler(SequenceManager(pool), model, **kwargs)


def page_states(pool: KVCachePool) -> list[tuple[str, int]]:
    return [(pool.page(p).state.name, pool.page(p).ref_count) for p in range(pool.num_pages)]


def test_long_prompt_is_prefilled_in_chunks_and_samples_once_at_the_end(model):
    sched = make(model)
    sched.add_request("long", model.encode(LONG), 4)
    sched.add_request("short", model.encode("hi"), 4)
    outputs = []
    while sched.has_unfinished:
        output = sched.schedule()
        outputs.append(output)
        sched.update_from_output(output, sched.runner.execute(output))
    # 47 tokens through a budget of 8: five full chunks, then 7 tokens and "hi" in one step
    chunks = [o.num_scheduled_tokens.get("long", 0) for o in outputs[:6]]
    assert chunks == [8, 8, 8, 8, 8, 7]
    assert [o.sampling for o in outputs[:5]] == [()] * 5  # no token mid-prompt
    assert outputs[5].num_scheduled_tokens == {"long": 7, "short": 1} and outputs[5].sampling == ("long",)
    assert sched.outputs["long"] == model.generate_reference(LONG, 4)
    assert sched.outputs["short"] == model.generate_reference("hi", 4)


def test_budget_counts_only_tokens_after_prefix_hits(model):
    # 44 prompt tokens are cached; a prompt of 47 then computes 3: it fits a budget of 8 at
    # once (vLLM v1 looks the prefix up before it charges the budget).
    sched = make(model, max_num_batched_tokens=8)
    sched.add_request("first", model.encode(LONG), 1)
    run_checked(sched, kv_model=model)
    sched.add_request("again", model.encode(LONG), 3)
    output = sched.schedule()
    assert output.num_scheduled_tokens == {"again": 3} and output.sampling == ("again",)
    sched.update_from_output(output, sched.runner.execute(output))
    run_checked(sched, kv_model=model)
    assert sched.outputs["again"] == model.generate_reference(LONG, 3)


def test_chunked_prefill_off_refuses_long_prompts_and_prefills_whole(model):
    sched = make(model, enable_chunked_prefill=False, max_num_batched_tokens=8)
    with pytest.raises(ValueError, match="exceeds max_num_batched_tokens=8 \\(chunked prefill is off\\)"):
        sched.add_request("long", model.encode(LONG), 2)
    texts = ["abcde", "fghij", "klmno"]
    for i, text in enumerate(texts):
        sched.add_request(i, model.encode(text), 2)
    first = sched.schedule()
    assert first.num_scheduled_tokens == {0: 5}  # 5 + 5 > 8: the second waits, not chunked
    sched.update_from_output(first, sched.runner.execute(first))
    run_checked(sched)
    assert all(sched.outputs[i] == model.generate_reference(t, 2) for i, t in enumerate(texts))


def test_request_status_output_and_token_ids(model):
    sched = make(model)
    sched.add_request("r", model.encode(LONG), 3)
    state = sched.request("r")
    assert (state.status, state.finish_reason, state.output) == ("waiting", None, [])
    sched.step()
    assert state.status == "running" and state.output == []  # mid-prompt
    sched.run()
    assert (state.status, state.finish_reason) == ("finished", "length")
    assert state.prompt_token_ids == model.encode(LONG)
    assert state.token_ids == model.encode(LONG) + state.output and len(state.output) == 3
    with pytest.raises(UnknownRequestError, match="req_id 'nope' was never added") as info:
        sched.request("nope")
    assert isinstance(info.value, KeyError)


def test_schedule_and_update_refuse_misuse(model):
    sched = make(model)
    sched.add_request("r", model.encode("hello"), 2)
    output = sched.schedule()
    with pytest.raises(RuntimeError, match="step 1 was scheduled and not yet updated"):
        sched.schedule()
    with pytest.raises(RuntimeError, match="abort between steps"):
        sched.abort("r")
    with pytest.raises(ValueError, match=r"sampled must map exactly the requests of output.sampling \['r'\]"):
        sched.update_from_output(output, {})
    sched.update_from_output(output, sched.runner.execute(output))
    with pytest.raises(ValueError, match="output must be the SchedulerOutput of the last schedule"):
        sched.update_from_output(output, {"r": 1})
    with pytest.raises(UnknownRequestError):
        sched.abort("nope")


@pytest.mark.parametrize(
    "when", ["waiting", "mid-prompt", "decoding", "preempted-recompute", "preempted-swap"]
)
def test_abort_releases_pages_as_a_finish_does(model, when):
    mode = "swap" if when.endswith("swap") else "recompute"
    sched = make(model, num_pages=14, max_num_batched_tokens=16, preemption_mode=mode, swap_space_pages=16)
    events = []
    sched.add_listener(events.append)
    texts = {"a": "abcdefghijklmnopq", "b": "rstuvwxyz0123456", "c": "ABCDEFGHIJKL"}
    for req_id, text in texts.items():
        sched.add_request(req_id, model.encode(text), 12)
    victim = {"waiting": "c", "mid-prompt": "b"}.get(when, "a")
    steps = {"waiting": 0, "mid-prompt": 2, "decoding": 3}.get(when)  # a: 16 + 1 tokens, b: 15 + 1
    if steps is None:  # step until a request is preempted, then abort it
        while not (record := sched.step()).preempted:
            pass
        victim = record.preempted[0][0]
        assert sched.request(victim).status == "preempted"
    else:
        for _ in range(steps):
            sched.step()
    state = sched.request(victim)
    held = list(sched.manager.get(victim).token_ids) if victim in sched.manager else []
    assert (when == "mid-prompt") == (0 < len(held) < len(state.prompt_token_ids))
    finished = sched.stats.finished
    assert sched.abort(victim) and not sched.abort(victim)  # a second abort changes nothing
    assert (state.status, state.finish_reason) == ("finished", "aborted")
    assert sched.stats.aborted == 1 and sched.stats.finished == finished
    assert events[-1].kind == "abort" and events[-1].seq_id == victim
    check_consistent(sched)
    if held:  # the same pages a finish leaves: its full pages CACHED and holding their K/V
        assert probe_cached_kv(model, sched.manager, [held]) == len(held) // 4 * 4
    run_checked(sched, kv_model=model)
    for req_id, text in texts.items():
        if req_id != victim:
            assert sched.outputs[req_id] == model.generate_reference(text, 12)
    assert sched.pool.num_active_pages == 0 and sched.num_free_swap_pages == 16


def test_abort_leaves_the_pool_as_free_does(model):
    # Oracle: the same tokens added and freed through a bare SequenceManager.
    sched = make(model, max_num_batched_tokens=8)
    sched.add_request("r", model.encode(LONG), 6)
    for _ in range(8):
        sched.step()
    held = sched.manager.get("r").token_ids
    sched.abort("r")
    bare = SequenceManager(KVCachePool(model.cache_config(num_pages=32, page_size=4)))
    bare.add("r", held)
    bare.free("r")
    assert page_states(sched.pool) == page_states(bare.pool)


def test_priority_admits_lower_values_first_and_preempts_the_least_urgent(model):
    # 6 pages of 4: three 7-token prompts fill them; at the third step each needs a page.
    sched = make(model, num_pages=6, max_num_batched_tokens=64, max_num_seqs=8, policy="priority")
    texts = ["abcdefg", "hijklmn", "opqrstu", "vw"]
    for i, (text, priority) in enumerate(zip(texts, [2, 0, 1, 0])):
        sched.add_request(f"r{i}", model.encode(text), 6, priority=priority)
    assert [s.req_id for s in sched.waiting] == ["r1", "r3", "r2", "r0"]  # (priority, arrival)
    first = sched.step()
    assert [r for r, _ in first.prefill] == ["r1", "r3", "r2"]  # r0 has no page left
    records = run_checked(sched, kv_model=model)
    victims = [r for rec in records for r, _ in rec.preempted]
    assert victims and victims[0] == "r2"  # least urgent running request (priority 1)
    for i, text in enumerate(texts):
        assert sched.outputs[f"r{i}"] == model.generate_reference(text, 6)


def test_priority_keeps_running_in_priority_order_and_preempts_the_least_urgent(model):
    # "low" was admitted first, yet "high" is scheduled first; when "high" needs a page,
    # "low" (the last of the running list) is preempted before it got a slot this step.
    sched = make(model, num_pages=4, max_num_batched_tokens=16, policy="priority")
    sched.add_request("low", model.encode("abcde"), 6, priority=5)
    sched.run(max_steps=1)
    sched.add_request("high", model.encode("hijklmno"), 6, priority=0)
    sched.run(max_steps=1)  # low holds 6 tokens, high 8: all 4 pages; high needs a fifth
    assert [s.req_id for s in sched.running] == ["high", "low"]
    output = sched.schedule()
    assert output.preempted == (("low", "recompute"),) and output.num_scheduled_tokens == {"high": 1}
    assert sched.running == [sched.request("high")] and sched.manager.get("high").num_tokens == 9
    sched.update_from_output(output, sched.runner.execute(output))
    run_checked(sched, kv_model=model)
    assert sched.outputs["low"] == model.generate_reference("abcde", 6)
    assert sched.outputs["high"] == model.generate_reference("hijklmno", 6)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    prompts=st.lists(
        st.tuples(st.text("ab ", min_size=1, max_size=24), st.integers(1, 6), st.integers(0, 2)),
        min_size=1,
        max_size=5,
    ),
    num_pages=st.integers(6, 14),
    page_size=st.sampled_from([1, 2, 4]),
    budget=st.integers(4, 12),
    mode=st.sampled_from(["recompute", "swap"]),
    policy=st.sampled_from(["fcfs", "priority"]),
    abort_at=st.one_of(st.none(), st.tuples(st.integers(0, 8), st.integers(0, 4))),
)
def test_random_chunked_workloads_generate_the_reference_tokens(
    model, prompts, num_pages, page_size, budget, mode, policy, abort_at
):
    sched = make(
        model,
        num_pages=num_pages,
        page_size=page_size,
        max_num_batched_tokens=budget,
        preemption_mode=mode,
        swap_space_pages=8,
        policy=policy,
    )
    accepted = {}
    for i, (text, new, priority) in enumerate(prompts):
        if -(-(len(text) + new - 1) // page_size) <= num_pages:
            sched.add_request(i, model.encode(text), new, priority=priority)
            accepted[i] = (text, new)
    aborted = None
    if abort_at is not None and accepted:
        for _ in range(abort_at[0]):
            if sched.has_unfinished:
                sched.step()
        aborted = list(accepted)[abort_at[1] % len(accepted)]
        sched.abort(aborted)
        check_consistent(sched)
    run_checked(sched, kv_model=model)
    assert sched.pool.num_active_pages == 0 and sched.num_free_swap_pages == 8
    for i, (text, new) in accepted.items():
        expected = model.generate_reference(text, new)
        if i == aborted:
            assert sched.outputs[i] == expected[: len(sched.outputs[i])]
        else:
            assert sched.outputs[i] == expected


def test_bookkeeping_chunked_run_matches_itself_alone():
    cfg = CacheConfig.bookkeeping(24, 4)
    sched = Scheduler(SequenceManager(KVCachePool(cfg)), max_num_seqs=3, max_num_batched_tokens=6)
    prompts = {i: list(range(i, i + 5 + 3 * i)) for i in range(5)}
    for i, p in prompts.items():
        sched.add_request(i, p, 4, seed=i)
    records = run_checked(sched)
    assert any(rec.prompt_left for rec in records)  # some prompt was chunked
    for i, p in prompts.items():
        alone = Scheduler(SequenceManager(KVCachePool(cfg)), max_num_batched_tokens=64)
        alone.add_request(i, p, 4, seed=i)
        assert alone.run()[i] == sched.outputs[i]
