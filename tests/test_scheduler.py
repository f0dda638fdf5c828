"""Scheduler: continuous batching and preemption.

Oracles: `TinyLM.generate_reference` (recomputes every token without a cache) for the
generated tokens; the requests themselves (every one finishes exactly once, with its own
script in bookkeeping mode); the pool's `check_invariants()` after every step.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pagedkv import CacheConfig, KVCachePool, SequenceManager, TinyLM
from pagedkv.scheduler import Scheduler
from pagedkv.workloads import alpaca_like

PROMPTS = ["hello world", "the kv cache", "paged attention!", "abc", "hello there", "pages"]


@pytest.fixture(scope="module")
def model():
    return TinyLM(seed=0, dtype="float64")


def check_consistent(sched: Scheduler) -> None:
    """Every request is in exactly one place; the pool and the swap area agree with it."""
    sched.pool.check_invariants()
    waiting = [s.req_id for s in sched.waiting]
    running = [s.req_id for s in sched.running]
    finished = [r for r, s in sched.requests.items() if s.status == "finished"]
    assert sorted(map(str, waiting + running + finished)) == sorted(map(str, sched.requests))
    assert list(sched.seqs.sequences) == running  # live sequences are exactly the running ones
    assert len(running) <= sched.max_num_seqs
    for state in sched.running:
        # the last sampled token is pending: it gets its slot at the next decode
        assert sched.seqs.get(state.req_id).token_ids == state.token_ids[:-1]
    swapped = [p for s in sched.waiting if s.swap_pages is not None for p in s.swap_pages]
    assert len(set(swapped)) == len(swapped)
    assert len(swapped) + sched.num_free_swap_pages == sched.swap_space.shape[2]


def run_checked(sched: Scheduler) -> list:
    records = []
    while sched.has_unfinished:
        record = sched.step()
        records.append(record)
        assert record.num_batched_tokens <= sched.max_num_batched_tokens
        assert set(record.sampled) == {r for r, _ in record.prefill} | set(record.decode)
        check_consistent(sched)
        assert len(records) < 10_000, "no progress"
    return records


@pytest.mark.parametrize("mode", ["recompute", "swap"])
@pytest.mark.parametrize("page_size", [2, 4])
@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_token_identical_through_preemption(model, mode, page_size, temperature):
    pool = KVCachePool(model.cache_config(num_pages=48 // page_size, page_size=page_size))
    sched = Scheduler(
        SequenceManager(pool), model, max_num_seqs=4, max_num_batched_tokens=64,
        preemption_mode=mode, swap_space_pages=64, temperature=temperature,
    )
    for i, p in enumerate(PROMPTS):
        sched.add_request(f"r{i}", model.encode(p), 14, seed=100 + i)
    records = run_checked(sched)
    assert sum(len(r.preempted) for r in records) >= 2, "the pool must be tight enough to preempt"
    assert {m for r in records for _, m in r.preempted} == {mode}
    for i, p in enumerate(PROMPTS):
        assert sched.outputs[f"r{i}"] == model.generate_reference(p, 14, temperature, seed=100 + i)
    assert pool.num_active_pages == 0 and sched.num_free_swap_pages == 64
    if mode == "swap":
        assert sched.stats.swap_out_bytes > 0 and sched.stats.swap_in_bytes > 0
        assert sched.stats.recomputed_tokens == 0
    else:
        assert sched.stats.recomputed_tokens > 0 and sched.stats.swap_out_bytes == 0


def test_preempts_most_recently_admitted_and_requeues_at_front(model):
    # Pages of 4 slots, 6 pages: three 7-token prompts take all of them (r3 waits); at the
    # third step each needs a third page, and r2, the last admitted, gives its pages up.
    pool = KVCachePool(model.cache_config(num_pages=6, page_size=4))
    sched = Scheduler(SequenceManager(pool), model, max_num_seqs=8, max_num_batched_tokens=64)
    events = []
    sched.add_listener(events.append)
    for i, text in enumerate(["abcdefg", "hijklmn", "opqrstu", "vw"]):
        sched.add_request(f"r{i}", model.encode(text), 6)
    first = sched.step()
    assert first.prefill == (("r0", 7), ("r1", 7), ("r2", 7)) and not first.decode
    assert sched.step().decode == ("r0", "r1", "r2")
    third = sched.step()
    assert third.preempted == (("r2", "recompute"),)
    assert third.decode == ("r0", "r1") and not third.prefill  # no admission after a preemption
    assert third.evicted_pages == 2  # r2's full pages went CACHED, then r0 and r1 took them
    assert [s.req_id for s in sched.waiting] == ["r2", "r3"]  # requeued at the front
    assert [(e.kind, e.seq_id, e.page_id) for e in events] == [("preempt", "r2", -1)]
    assert events[0].detail == "recompute: 2 pages released"
    run_checked(sched)
    assert [e.kind for e in events] == ["preempt", "resume"]
    for i, text in enumerate(["abcdefg", "hijklmn", "opqrstu", "vw"]):
        assert sched.outputs[f"r{i}"] == model.generate_reference(text, 6)


def test_recompute_resume_hits_its_own_cached_prefix(model):
    pool = KVCachePool(model.cache_config(num_pages=24, page_size=2))
    sched = Scheduler(SequenceManager(pool), model, max_num_seqs=4, max_num_batched_tokens=64)
    for i, p in enumerate(PROMPTS):
        sched.add_request(f"r{i}", model.encode(p), 14)
    preempted, resumed = set(), []
    for record in run_checked(sched):
        resumed += [(r, n) for r, n in record.prefill if r in preempted]
        preempted |= {r for r, _ in record.preempted}
    lengths = {r: len(s.prompt_token_ids) + 14 for r, s in sched.requests.items()}
    # A resumed sequence holding k tokens computes fewer than k when its pages stayed CACHED.
    assert resumed and any(n < lengths[r] - 14 for r, n in resumed)
    assert sched.stats.recomputed_tokens > 0


def test_swap_area_full_falls_back_to_recompute(model):
    pool = KVCachePool(model.cache_config(num_pages=12, page_size=4))
    sched = Scheduler(
        SequenceManager(pool), model, max_num_seqs=4, max_num_batched_tokens=64,
        preemption_mode="swap", swap_space_pages=1,
    )
    for i, p in enumerate(PROMPTS):
        sched.add_request(f"r{i}", model.encode(p), 14)
    records = run_checked(sched)
    modes = [m for r in records for _, m in r.preempted]
    assert "recompute" in modes  # no victim fits in one swap page
    for i, p in enumerate(PROMPTS):
        assert sched.outputs[f"r{i}"] == model.generate_reference(p, 14)


def test_swap_copies_whole_pages_out_and_missing_tokens_back(model):
    pool = KVCachePool(model.cache_config(num_pages=6, page_size=4))
    sched = Scheduler(
        SequenceManager(pool), model, max_num_seqs=8, max_num_batched_tokens=64,
        preemption_mode="swap", swap_space_pages=8,
    )
    for i, text in enumerate(["abcdefg", "hijklmn", "opqrstu", "vw"]):
        sched.add_request(f"r{i}", model.encode(text), 6)
    sched.step(), sched.step()
    third = sched.step()
    page_bytes = pool.config.kv_bytes // pool.num_pages
    assert third.preempted == (("r2", "swap"),)
    assert third.swap_out_bytes == 2 * page_bytes and sched.num_free_swap_pages == 6
    records = run_checked(sched)
    resume = next(r for r in records if ("r2", 1) in r.prefill)
    # r2 held 8 tokens when swapped out; its pages were evicted, so all 8 come back.
    assert resume.swap_in_bytes == 8 * pool.config.bytes_per_token


tokens_st = st.lists(st.integers(0, 3), min_size=1, max_size=12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    prompts=st.lists(st.tuples(tokens_st, st.integers(1, 10)), min_size=1, max_size=10),
    num_pages=st.integers(6, 20),
    page_size=st.sampled_from([1, 2, 4]),
    max_num_seqs=st.integers(1, 6),
    mode=st.sampled_from(["recompute", "swap"]),
    swap_pages=st.integers(0, 12),
    caching=st.booleans(),
)
def test_random_workloads_bookkeeping(
    prompts, num_pages, page_size, max_num_seqs, mode, swap_pages, caching
):
    cfg = CacheConfig(
        num_pages=num_pages, page_size=page_size, num_layers=1, num_kv_heads=1, head_dim=2,
        enable_prefix_caching=caching,
    )
    pool = KVCachePool(cfg)
    sched = Scheduler(
        SequenceManager(pool), max_num_seqs=max_num_seqs, max_num_batched_tokens=24,
        preemption_mode=mode, swap_space_pages=swap_pages,
    )
    accepted = {}
    for i, (prompt, new) in enumerate(prompts):
        if -(-(len(prompt) + new - 1) // page_size) > num_pages:
            with pytest.raises(ValueError, match="more than the pool"):
                sched.add_request(i, prompt, new)
            continue
        sched.add_request(i, prompt, new, seed=i)
        accepted[i] = new
    run_checked(sched)
    assert pool.num_active_pages == 0 and sched.num_free_swap_pages == swap_pages
    assert all(s.status == "finished" for s in sched.requests.values())
    assert sched.stats.finished == len(accepted)
    for i, new in accepted.items():  # bookkeeping mode "generates" each request's own script
        script = np.random.default_rng(i).integers(0, 32_000, new).tolist()
        assert sched.outputs[i] == script


def test_fcfs_budget_and_max_num_seqs():
    reqs = alpaca_like(40, seed=3)
    cfg = CacheConfig(num_pages=4096, page_size=16, num_layers=1, num_kv_heads=1, head_dim=1)
    seqs = SequenceManager(KVCachePool(cfg))
    sched = Scheduler(seqs, max_num_seqs=8, max_num_batched_tokens=1200)
    sched.add_requests(reqs)
    admitted = []
    for record in run_checked(sched):
        admitted += [r for r, _ in record.prefill]
        assert len(sched.running) <= 8
    assert admitted == [r.req_id for r in reqs]  # nothing preempted: admission order is FCFS
    assert sched.stats.preemptions == 0
    assert sched.stats.decode_tokens + len(reqs) == sum(r.max_new_tokens for r in reqs)


def test_run_with_max_steps_and_progress_bar():
    cfg = CacheConfig(num_pages=64, page_size=4, num_layers=1, num_kv_heads=1, head_dim=1)
    sched = Scheduler(SequenceManager(KVCachePool(cfg)))
    sched.add_request("a", [1, 2, 3], 5)
    script = np.random.default_rng(0).integers(0, 32_000, 5).tolist()  # seed=0 by default
    assert sched.run(max_steps=2)["a"] == script[:2]
    assert sched.run(progress=True)["a"] == script
    assert not sched.has_unfinished


@pytest.fixture
def sched():
    cfg = CacheConfig(num_pages=8, page_size=4, num_layers=1, num_kv_heads=1, head_dim=1)
    s = Scheduler(SequenceManager(KVCachePool(cfg)), max_num_seqs=4, max_num_batched_tokens=16)
    s.add_request("a", [1, 2], 3)
    return s


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (("a", [1], 2), {}, ValueError, "req_id 'a' was already added"),
        (("b", [], 2), {}, ValueError, "prompt_token_ids must not be empty"),
        (("b", "text", 2), {}, TypeError, "prompt_token_ids must be a list"),
        (("b", [1], 0), {}, ValueError, "max_new_tokens must be an int >= 1, got 0"),
        (("b", [1], 2.0), {}, TypeError, "max_new_tokens must be an int"),
        (("b", [1] * 10, 8), {}, ValueError, "exceeds max_num_batched_tokens=16"),
        ((None, [1], 2), {}, TypeError, "req_id must be a str or int"),
    ],
)
def test_add_request_validates_and_changes_nothing(sched, args, kwargs, error, match):
    with pytest.raises(error, match=match):
        sched.add_request(*args, **kwargs)
    assert list(sched.requests) == ["a"] and [s.req_id for s in sched.waiting] == ["a"]


def test_request_too_long_for_the_pool_and_vocab(model):
    cfg = CacheConfig(num_pages=2, page_size=4, num_layers=1, num_kv_heads=1, head_dim=1)
    s = Scheduler(SequenceManager(KVCachePool(cfg)))
    with pytest.raises(ValueError, match="grows to 9 tokens, more than the pool's 2 pages x 4"):
        s.add_request("x", [1] * 5, 5)
    pool = KVCachePool(model.cache_config(num_pages=8, page_size=4))
    with pytest.raises(ValueError, match=r"TinyLM tokens \(0..255\), got 300"):
        Scheduler(SequenceManager(pool), model).add_request("x", [1, 300], 2)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"max_num_seqs": 0}, ValueError, "max_num_seqs must be an int in"),
        (
            {"max_num_seqs": 8, "max_num_batched_tokens": 4},
            ValueError,
            r"max_num_batched_tokens must be an int in \[8,",
        ),
        ({"swap_space_pages": -1}, ValueError, "swap_space_pages must be an int in"),
        ({"preemption_mode": "kill"}, ValueError, "preemption_mode must be one of"),
        ({"temperature": -1.0}, ValueError, "temperature must be a finite number"),
        ({"model": "tiny"}, TypeError, "model must be a TinyLM or None"),
    ],
)
def test_constructor_validates(kwargs, error, match):
    cfg = CacheConfig(num_pages=8, page_size=4, num_layers=1, num_kv_heads=1, head_dim=1)
    with pytest.raises(error, match=match):
        Scheduler(SequenceManager(KVCachePool(cfg)), **kwargs)
    with pytest.raises(TypeError, match="seqs must be a SequenceManager"):
        Scheduler(KVCachePool(cfg))


def test_add_requests_refuses_groups():
    cfg = CacheConfig(num_pages=64, page_size=4, num_layers=1, num_kv_heads=1, head_dim=1)
    s = Scheduler(SequenceManager(KVCachePool(cfg)))
    from pagedkv.workloads import parallel_sampling

    with pytest.raises(ValueError, match="n = beam_width = 1"):
        s.add_requests(parallel_sampling(alpaca_like(1), 2))
    assert not s.requests


def test_step_summary_names_what_happened(model):
    pool = KVCachePool(model.cache_config(num_pages=6, page_size=4))
    sched = Scheduler(SequenceManager(pool), model, max_num_seqs=8, max_num_batched_tokens=64)
    for i, text in enumerate(["abcdefg", "hijklmn", "opqrstu"]):
        sched.add_request(f"r{i}", model.encode(text), 3)
    assert sched.step().summary() == "step 0: prefill r0 (7 tokens), r1 (7 tokens), r2 (7 tokens)"
    assert sched.step().summary() == "step 1: decode r0 r1 r2"
    assert sched.step().summary() == "step 2: decode r0 r1; preempt r2 (recompute); finished r0 r1"


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    prompts=st.lists(
        st.tuples(st.text("abc ", min_size=1, max_size=10), st.integers(1, 8)),
        min_size=1, max_size=5,
    ),
    num_pages=st.integers(5, 12),
    mode=st.sampled_from(["recompute", "swap"]),
    max_num_seqs=st.integers(1, 4),
)
def test_random_workloads_generate_the_reference_tokens(model, prompts, num_pages, mode,
                                                         max_num_seqs):
    pool = KVCachePool(model.cache_config(num_pages=num_pages, page_size=2))
    sched = Scheduler(
        SequenceManager(pool), model, max_num_seqs=max_num_seqs, max_num_batched_tokens=32,
        preemption_mode=mode, swap_space_pages=num_pages,
    )
    accepted = {}
    for i, (text, new) in enumerate(prompts):
        if -(-(len(text) + new - 1) // 2) <= num_pages:
            sched.add_request(i, model.encode(text), new)
            accepted[i] = (text, new)
    run_checked(sched)
    assert pool.num_active_pages == 0
    for i, (text, new) in accepted.items():
        assert sched.outputs[i] == model.generate_reference(text, new)
