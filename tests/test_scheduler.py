"""Scheduler: continuous batching and preemption.

Oracles: `TinyLM.generate_reference` (recomputes every token without a cache) for the
generated tokens; `TinyLM.forward_reference` for the K/V left in the prefix cache (a probe
that hits cached pages must get the logits of a dense recompute); the requests themselves
(every one finishes exactly once; in bookkeeping mode with the tokens it gets when it runs
alone, unpressured); the pool's `check_invariants()` after every step.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pagedkv import AttentionEngine, CacheConfig, KVCachePool, OutOfPagesError, SequenceManager, TinyLM
from pagedkv.core.hashing import block_hashes
from pagedkv.engine.scheduler import Scheduler
from pagedkv.engine.swap import SwapSpace
from pagedkv.labs.workloads import alpaca_like

from .hypothesis_profiles import examples

PROMPTS = ["hello world", "the kv cache", "paged attention!", "abc", "hello there", "pages"]


@pytest.fixture(scope="module")
def model():
    return TinyLM(seed=0, dtype="float64")


def check_consistent(sched: Scheduler) -> None:
    """Every request is in exactly one place; the pool and the swap space agree with it."""
    sched.manager.check_invariants()
    waiting = [s.req_id for s in sched.waiting]
    running = [s.req_id for s in sched.running]
    finished = [r for r, s in sched.requests.items() if s.status == "finished"]
    assert sorted(map(str, waiting + running + finished)) == sorted(map(str, sched.requests))
    assert list(sched.manager.sequences) == running  # live sequences are exactly the running ones
    assert len(running) <= sched.max_num_seqs
    for state in sched.running:
        assert state.status == "running"
        held = sched.manager.get(state.req_id).token_ids
        # mid-prefill it holds a prefix of its tokens; else the last sampled token is pending.
        # A prefill runs over the prompt, or, after a preemption, over prompt and output
        # again (recompute), in chunks when the budget or the pool is short.
        assert held == state.token_ids[: len(held)]
        mid_prefill = len(held) < len(state.prompt_token_ids) or state.num_preemptions > 0
        assert len(held) == len(state.token_ids) - 1 or mid_prefill
    for state in sched.waiting:
        assert state.status == ("preempted" if state.num_preemptions else "waiting")
    for req_id in finished:
        assert sched.request(req_id).finish_reason in ("length", "aborted")
    swapped = [p for s in sched.waiting if s.swap_pages is not None for p in s.swap_pages]
    assert len(set(swapped)) == len(swapped)
    assert len(swapped) + sched.num_free_swap_pages == sched.swap_space.num_pages


def run_checked(sched: Scheduler, kv_model: TinyLM | None = None) -> list:
    """Step to the end through schedule / runner / update_from_output, checking every step;
    with `kv_model`, also that every page indexed for prefix hits holds the K/V of its
    tokens after every step."""
    records = []
    while sched.has_unfinished:
        output = sched.schedule()
        check_output(sched, output)
        record = sched.update_from_output(output, sched.runner.execute(output))
        records.append(record)
        assert set(record.sampled) == set(output.sampling)
        assert set(record.sampled) <= {r for r, _ in record.prefill} | set(record.decode)
        assert not set(record.prompt_left) & set(record.sampled)  # never mid-prompt
        check_consistent(sched)
        if kv_model is not None:
            check_indexed_pages(kv_model, sched.pool, [s.token_ids for s in sched.requests.values()])
        assert len(records) < 10_000, "no progress"
    return records


def check_output(sched: Scheduler, output) -> None:
    """A SchedulerOutput respects the budget, schedules only running requests, and lets a
    request sample only when every one of its tokens has been scheduled."""
    assert 0 <= output.total_num_scheduled_tokens <= sched.max_num_batched_tokens
    assert all(k >= 1 for k in output.num_scheduled_tokens.values())
    assert set(output.sampling) <= set(output.num_scheduled_tokens)
    for req_id, k in output.num_scheduled_tokens.items():
        state, seq = sched.request(req_id), sched.manager.get(req_id)
        assert state.status == "running"
        assert seq.token_ids == state.token_ids[: seq.num_tokens]
        if sched.model is not None:  # K/V before the chunk exist (bookkeeping computes none)
            assert seq.num_tokens - k <= seq.num_computed_tokens
        assert (req_id in output.sampling) == (seq.num_tokens == len(state.token_ids))
    if output.preempted:  # vLLM: no admission in a step that preempted
        assert not output.scheduled_new_reqs and not output.swap_in


def check_indexed_pages(model: TinyLM, pool: KVCachePool, token_lists: list[list[int]]) -> int:
    """The compute-before-free contract, checked on the pool without changing it: every page
    holding a full block of one of these token lists (found by its block hash, in any state)
    holds exactly the K/V a fresh pool computes for that prefix. Returns the pages checked."""
    size, checked = pool.page_size, 0
    by_hash = {pool.page(p).block_hash: p for p in range(pool.num_pages) if pool.page(p).block_hash}
    for tokens in token_lists:
        found = [(k, by_hash[h]) for k, h in enumerate(block_hashes(tokens, size)) if h in by_hash]
        if not found:
            continue
        end = (found[-1][0] + 1) * size
        config = model.cache_config(end // size, size, enable_prefix_caching=False)
        fresh = SequenceManager(KVCachePool(config))
        fresh.add(0, tokens[:end])
        model.forward(fresh, [0])
        table = fresh.block_table(0)
        for k, page_id in found:
            np.testing.assert_allclose(
                pool.kv_cache[:, :, page_id], fresh.pool.kv_cache[:, :, table[k]], rtol=0, atol=1e-9
            )
            checked += 1
    return checked


def probe_cached_kv(model: TinyLM, seqs: SequenceManager, token_lists: list[list[int]]) -> int:
    """The compute-before-free contract, checked from outside: for each token list, a probe
    made of its first whole pages plus one token hits whatever of those pages is in the prefix
    cache; attending over them must give the logits of a dense recompute from scratch, which
    fails if any hit page holds K/V that were never computed. Returns the tokens hit."""
    size, hits = seqs.page_size, 0
    for tokens in token_lists:
        for end in range(len(tokens) // size * size, 0, -size):  # shorter when the pool is full
            probe = [*tokens[:end], 7]
            try:
                num_cached = seqs.add("probe", probe)
            except OutOfPagesError:
                continue
            logits = model.forward(seqs, ["probe"])[0]  # computed before it is freed
            seqs.free("probe")
            np.testing.assert_allclose(logits, model.forward_reference(probe)[-1], rtol=0, atol=1e-9)
            hits += num_cached
            break
    return hits


@pytest.mark.parametrize("mode", ["recompute", "swap"])
@pytest.mark.parametrize("page_size", [2, 4])
@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_token_identical_through_preemption(model, mode, page_size, temperature):
    pool = KVCachePool(model.cache_config(num_pages=48 // page_size, page_size=page_size))
    sched = Scheduler(
        SequenceManager(pool),
        model,
        max_num_seqs=4,
        max_num_batched_tokens=64,
        preemption_mode=mode,
        swap_space_pages=64,
        temperature=temperature,
    )
    for i, p in enumerate(PROMPTS):
        sched.add_request(f"r{i}", model.encode(p), 14, seed=100 + i)
    records = run_checked(sched, kv_model=model)
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
    run_checked(sched, kv_model=model)
    assert [e.kind for e in events] == ["preempt", "resume"]
    for i, text in enumerate(["abcdefg", "hijklmn", "opqrstu", "vw"]):
        assert sched.outputs[f"r{i}"] == model.generate_reference(text, 6)


def test_recompute_resume_hits_its_own_cached_prefix(model):
    pool = KVCachePool(model.cache_config(num_pages=24, page_size=2))
    sched = Scheduler(SequenceManager(pool), model, max_num_seqs=4, max_num_batched_tokens=64)
    for i, p in enumerate(PROMPTS):
        sched.add_request(f"r{i}", model.encode(p), 14)
    preempted, resumed = set(), []
    for record in run_checked(sched, kv_model=model):
        resumed += [(r, n) for r, n in record.prefill if r in preempted]
        preempted |= {r for r, _ in record.preempted}
    lengths = {r: len(s.prompt_token_ids) + 14 for r, s in sched.requests.items()}
    # A resumed sequence holding k tokens computes fewer than k when its pages stayed CACHED.
    assert resumed and any(n < lengths[r] - 14 for r, n in resumed)
    assert sched.stats.recomputed_tokens > 0


def test_swap_area_full_falls_back_to_recompute(model):
    pool = KVCachePool(model.cache_config(num_pages=12, page_size=4))
    sched = Scheduler(
        SequenceManager(pool),
        model,
        max_num_seqs=4,
        max_num_batched_tokens=64,
        preemption_mode="swap",
        swap_space_pages=1,
    )
    for i, p in enumerate(PROMPTS):
        sched.add_request(f"r{i}", model.encode(p), 14)
    records = run_checked(sched, kv_model=model)
    modes = [m for r in records for _, m in r.preempted]
    assert "recompute" in modes  # no victim fits in one swap page
    for i, p in enumerate(PROMPTS):
        assert sched.outputs[f"r{i}"] == model.generate_reference(p, 14)


def test_swap_copies_whole_pages_out_and_missing_tokens_back(model):
    pool = KVCachePool(model.cache_config(num_pages=6, page_size=4))
    sched = Scheduler(
        SequenceManager(pool),
        model,
        max_num_seqs=8,
        max_num_batched_tokens=64,
        preemption_mode="swap",
        swap_space_pages=8,
    )
    for i, text in enumerate(["abcdefg", "hijklmn", "opqrstu", "vw"]):
        sched.add_request(f"r{i}", model.encode(text), 6)
    sched.step(), sched.step()
    third = sched.step()
    page_bytes = pool.config.kv_bytes // pool.num_pages
    assert third.preempted == (("r2", "swap"),)
    assert third.swap_out_bytes == 2 * page_bytes and sched.num_free_swap_pages == 6
    records = run_checked(sched, kv_model=model)
    resume = next(r for r in records if ("r2", 1) in r.prefill)
    assert "r2 (1 token)" in resume.summary()
    # r2 held 8 tokens when swapped out; its pages were evicted, so all 8 come back.
    assert resume.swap_in_bytes == 8 * pool.config.bytes_per_token


@pytest.mark.parametrize("mode", ["recompute", "swap"])
def test_preempted_and_finished_pages_hold_the_kv_of_their_tokens(model, mode):
    # 7 pages of 4 slots: r0 and r1 run; at step 4 r1 (12 tokens in the cache, 3 full pages)
    # is preempted and its full pages stay CACHED. A probe and a later request hit them.
    pool = KVCachePool(model.cache_config(num_pages=7, page_size=4))
    seqs = SequenceManager(pool)
    sched = Scheduler(
        seqs, model, max_num_seqs=4, max_num_batched_tokens=64, preemption_mode=mode, swap_space_pages=8
    )
    texts = ["abcdefghij", "klmnopqrs", "tuvwxyz"]
    for i, text in enumerate(texts):
        sched.add_request(f"r{i}", model.encode(text), 8)
    records = [sched.step() for _ in range(5)]
    assert records[4].preempted == (("r1", mode),) and pool.num_cached_pages == 3
    victim = sched.requests["r1"].token_ids  # prompt + 4 generated; the last has no K/V yet
    assert probe_cached_kv(model, seqs, [victim]) == 8  # two of its pages (the pool is full)
    # A new request whose prompt starts with the victim's tokens will hit its pages too.
    sched.add_request("r3", victim[:12], 8)
    run_checked(sched, kv_model=model)
    for req_id, prompt in [*((f"r{i}", model.encode(t)) for i, t in enumerate(texts)), ("r3", victim[:12])]:
        assert sched.outputs[req_id] == model.generate_reference(prompt, 8)
    assert pool.stats.prefix_hits > 0
    finished = [s.token_ids[:-1] for s in sched.requests.values()]  # what each left cached
    assert probe_cached_kv(model, seqs, finished) > 0


def test_add_request_refuses_an_id_live_in_the_sequence_manager(model):
    seqs = SequenceManager(KVCachePool(model.cache_config(num_pages=16, page_size=4)))
    seqs.add("x", [1, 2, 3])
    model.forward(seqs, ["x"])
    sched = Scheduler(seqs, model)
    with pytest.raises(ValueError, match="req_id 'x' is a live sequence of the SequenceManager"):
        sched.add_request("x", [1, 2], 3)
    assert not sched.requests and not sched.waiting


def test_failed_admission_stops_admitting_and_computes_what_was_admitted(model):
    # "b" is queued, then another user of the same SequenceManager starts a sequence "b":
    # admitting it raises ValueError after "a" was admitted in the same step. The step must
    # still compute "a" (not leave it admitted with no K/V and no token) and keep "b" waiting.
    pool = KVCachePool(model.cache_config(num_pages=16, page_size=4))
    seqs = SequenceManager(pool)
    sched = Scheduler(seqs, model, max_num_seqs=4, max_num_batched_tokens=64)
    prompts = {"a": "hello world", "b": "hello there", "c": "pages"}
    for req_id, text in prompts.items():
        sched.add_request(req_id, model.encode(text), 5)
    seqs.add("b", model.encode("hello world, again"))  # a will hit its first two pages
    model.forward(seqs, ["b"])
    first = sched.step()
    assert first.prefill == (("a", 3),) and [s.req_id for s in sched.waiting] == ["b", "c"]
    assert seqs.get("a").num_computed_tokens == seqs.get("a").num_tokens
    assert sched.step().decode == ("a",)  # the next step decodes it
    seqs.free("b")
    run_checked(sched, kv_model=model)
    for req_id, text in prompts.items():
        assert sched.outputs[req_id] == model.generate_reference(text, 5)


def test_run_raises_when_nothing_can_run(model):
    # The only request waits for an id (then for pages) held outside the scheduler.
    seqs = SequenceManager(KVCachePool(model.cache_config(num_pages=4, page_size=4)))
    sched = Scheduler(seqs, model)
    sched.add_request("a", model.encode("hello"), 3)
    seqs.add("a", model.encode("other"))
    with pytest.raises(RuntimeError, match="no progress: nothing is running and request 'a' cannot"):
        sched.run()
    model.forward(seqs, ["a"])
    seqs.free("a")
    seqs.add("hog", list(range(16)))  # every page
    with pytest.raises(RuntimeError, match="request 'a' cannot be admitted: prompt of 5 tokens"):
        sched.run()
    assert [s.req_id for s in sched.waiting] == ["a"] and not sched.running


def test_step_refuses_running_requests_freed_outside():
    cfg = CacheConfig.bookkeeping(8, 4)
    seqs = SequenceManager(KVCachePool(cfg))
    sched = Scheduler(seqs)
    sched.add_request("a", [1, 2, 3], 4)
    sched.step()
    seqs.free("a")
    with pytest.raises(RuntimeError, match=r"running requests \['a'\] were freed outside"):
        sched.step()
    assert sched.stats.steps == 1


def test_swap_space_copies_whole_pages_out_and_back():
    cfg = CacheConfig(num_pages=4, page_size=2, num_layers=2, num_kv_heads=1, head_dim=2, dtype="float64")
    pool = KVCachePool(cfg)
    seqs, engine = SequenceManager(pool), AttentionEngine(pool)
    kv = np.random.default_rng(0).standard_normal((2, 2, 3, 1, 2))  # [layers, k|v, tokens, heads, dim]
    seqs.add("a", [1, 2, 3])
    for layer in range(2):
        engine.write(layer, seqs.slot_mapping("a"), kv[layer, 0], kv[layer, 1])
    swap = SwapSpace(pool, 3)
    table = seqs.block_table("a")
    slots = swap.allocate(len(table))
    assert slots == [0, 1] and swap.num_free_pages == 1
    assert swap.allocate(2) is None and swap.num_free_pages == 1  # full: takes nothing
    swap.copy_out(zip(table, slots))
    seqs.free("a")
    pool.kv_cache[...] = 0  # whatever the pool held is gone
    seqs.add("b", [1, 2, 3])
    swap.copy_in([(slots[1], seqs.block_table("b")[1])])  # the second page only
    swap.free(slots)
    flat = pool.kv_cache.reshape(2, 2, -1, 1, 2)  # [layers, k|v, num_pages * page_size, heads, dim]
    np.testing.assert_array_equal(flat[:, :, seqs.slot_mapping("b", 2, 3)], kv[:, :, 2:3])
    assert not flat[:, :, seqs.slot_mapping("b", 0, 2)].any() and swap.num_free_pages == 3
    assert swap.allocate(1) == [0]  # lowest first again
    with pytest.raises(ValueError, match="swap_space_pages must be in"):
        SwapSpace(pool, -1)


tokens_st = st.lists(st.integers(0, 3), min_size=1, max_size=12)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    prompts=st.lists(st.tuples(tokens_st, st.integers(1, 10)), min_size=1, max_size=10),
    num_pages=st.integers(6, 20),
    page_size=st.sampled_from([1, 2, 4]),
    max_num_seqs=st.integers(1, 6),
    mode=st.sampled_from(["recompute", "swap"]),
    swap_pages=st.integers(0, 12),
    caching=st.booleans(),
)
def test_random_workloads_bookkeeping(prompts, num_pages, page_size, max_num_seqs, mode, swap_pages, caching):
    cfg = CacheConfig(
        num_pages=num_pages,
        page_size=page_size,
        num_layers=1,
        num_kv_heads=1,
        head_dim=2,
        enable_prefix_caching=caching,
    )
    pool = KVCachePool(cfg)
    sched = Scheduler(
        SequenceManager(pool),
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=24,
        preemption_mode=mode,
        swap_space_pages=swap_pages,
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
    # Bookkeeping mode "generates" a script seeded per request: preemption, batching and
    # pool pressure must not change it, so each request equals itself run alone in a roomy pool.
    roomy = CacheConfig(num_pages=64, page_size=page_size, num_layers=1, num_kv_heads=1, head_dim=2)
    for i, new in accepted.items():
        alone = Scheduler(SequenceManager(KVCachePool(roomy)), max_num_seqs=1, max_num_batched_tokens=24)
        alone.add_request(i, prompts[i][0], new, seed=i)
        assert alone.run()[i] == sched.outputs[i] and len(sched.outputs[i]) == new


@pytest.mark.slow
def test_fcfs_budget_and_max_num_seqs():
    reqs = alpaca_like(40, seed=3)
    cfg = CacheConfig.bookkeeping(4096, 16)
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
    cfg = CacheConfig.bookkeeping(64, 4)
    sched = Scheduler(SequenceManager(KVCachePool(cfg)))
    sched.add_request("a", [1, 2, 3], 5)
    partial = sched.run(max_steps=2)["a"]
    assert len(partial) == 2 and sched.stats.steps == 2 and sched.has_unfinished
    full = sched.run(progress=True)["a"]
    assert len(full) == 5 and full[:2] == partial and not sched.has_unfinished
    # the script depends on the request's seed alone (0 by default), not on its prompt
    other = Scheduler(SequenceManager(KVCachePool(cfg)))
    other.add_request("a", [9, 9], 5)
    other.add_request("b", [1, 2, 3], 5, seed=1)
    assert other.run() == {"a": full, "b": other.outputs["b"]} and other.outputs["b"] != full


@pytest.fixture
def sched():
    cfg = CacheConfig.bookkeeping(8, 4)
    s = Scheduler(SequenceManager(KVCachePool(cfg)), max_num_seqs=4, max_num_batched_tokens=16)
    s.add_request("a", [1, 2], 3)
    return s


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (("a", [1], 2), {}, ValueError, "req_id 'a' was already added"),
        (("b", [], 2), {}, ValueError, "prompt_token_ids must not be empty"),
        (("b", "text", 2), {}, TypeError, "prompt_token_ids must be a list"),
        (("b", [1], 0), {}, ValueError, r"max_new_tokens must be in \[1, 16777216\], got 0"),
        (("b", [1], 2.0), {}, TypeError, "max_new_tokens must be an int"),
        ((None, [1], 2), {}, TypeError, "req_id must be a str or int"),
        (("b", [1], 2), {"priority": 1.5}, TypeError, "priority must be an int"),
        (("b", [1], 2), {"seed": -1}, ValueError, "seed must be in"),
    ],
)
def test_add_request_validates_and_changes_nothing(sched, args, kwargs, error, match):
    with pytest.raises(error, match=match):
        sched.add_request(*args, **kwargs)
    assert list(sched.requests) == ["a"] and [s.req_id for s in sched.waiting] == ["a"]


def test_request_too_long_for_the_pool_and_vocab(model):
    cfg = CacheConfig.bookkeeping(2, 4)
    s = Scheduler(SequenceManager(KVCachePool(cfg)))
    with pytest.raises(ValueError, match="grows to 9 tokens, more than the pool's 2 pages x 4"):
        s.add_request("x", [1] * 5, 5)
    pool = KVCachePool(model.cache_config(num_pages=8, page_size=4))
    with pytest.raises(ValueError, match=r"prompt_token_ids\[1\] = 300 is outside the vocabulary \[0, 255\]"):
        Scheduler(SequenceManager(pool), model).add_request("x", [1, 300], 2)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"max_num_seqs": 0}, ValueError, r"max_num_seqs must be in \[1, "),
        ({"max_num_seqs": "4"}, TypeError, "max_num_seqs must be an int"),
        (
            {"max_num_seqs": 8, "max_num_batched_tokens": 4},
            ValueError,
            r"max_num_batched_tokens must be in \[8,",
        ),
        ({"swap_space_pages": -1}, ValueError, "swap_space_pages must be in"),
        ({"preemption_mode": "kill"}, ValueError, "preemption_mode must be one of"),
        ({"policy": "sjf"}, ValueError, r"policy must be one of \('fcfs', 'priority'\), got 'sjf'"),
        ({"policy": 1}, TypeError, "policy must be one of"),
        ({"enable_chunked_prefill": 1}, TypeError, "enable_chunked_prefill must be a bool"),
        ({"temperature": -1.0}, ValueError, "temperature must be a finite number"),
        ({"temperature": "hot"}, TypeError, "temperature must be a number"),
        ({"model": "tiny"}, TypeError, "model must have vocab_size, num_layers"),
    ],
)
def test_constructor_validates(kwargs, error, match):
    cfg = CacheConfig.bookkeeping(8, 4)
    with pytest.raises(error, match=match):
        Scheduler(SequenceManager(KVCachePool(cfg)), **kwargs)
    with pytest.raises(TypeError, match="manager must be a SequenceManager"):
        Scheduler(KVCachePool(cfg))


def test_parallel_samples_fan_out_and_share_the_prompt_pages(model):
    from pagedkv.engine.request import Request
    from pagedkv.labs.workloads import parallel_sampling

    pool = KVCachePool(model.cache_config(num_pages=32, page_size=4))
    s = Scheduler(SequenceManager(pool), model, temperature=0.8)
    prompt = model.encode("shared prompt")  # 13 tokens: 3 full pages, then 1 token
    s.add_requests(parallel_sampling([Request("p", prompt, 5, seed=7)], 3))
    assert list(s.requests) == ["p.0", "p.1", "p.2"]
    out = s.run()
    assert pool.stats.prefix_hits == 2 * 12  # p.1 and p.2 hit p.0's full pages in the same step
    for k in range(3):  # sample k is seeded 7 + k, as vLLM v1 seeds a parent's children
        assert out[f"p.{k}"] == model.generate_reference(prompt, 5, 0.8, seed=7 + k)
    with pytest.raises(ValueError, match="req_id 'p.0' was already added"):
        s.add_request("p", prompt, 2, n=2)


def test_step_summary_names_what_happened(model):
    pool = KVCachePool(model.cache_config(num_pages=6, page_size=4))
    sched = Scheduler(SequenceManager(pool), model, max_num_seqs=8, max_num_batched_tokens=64)
    for i, text in enumerate(["abcdefg", "hijklmn", "opqrstu"]):
        sched.add_request(f"r{i}", model.encode(text), 3)
    assert sched.step().summary() == "step 1: prefill r0 (7 tokens), r1 (7 tokens), r2 (7 tokens)"
    assert sched.step().summary() == "step 2: decode r0 r1 r2"
    third = sched.step()
    assert third.summary() == "step 3: decode r0 r1; preempt r2 (recompute); finished r0 r1"
    # the same words without the step number
    assert third.decision == "decode r0 r1; preempt r2 (recompute); finished r0 r1"
    assert sched.stats.steps == third.step == 3


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    prompts=st.lists(
        st.tuples(st.text("ab ", min_size=1, max_size=10), st.integers(1, 8)),
        min_size=1,
        max_size=5,
    ),
    num_pages=st.integers(5, 12),
    page_size=st.sampled_from([1, 2, 4]),
    mode=st.sampled_from(["recompute", "swap"]),
    max_num_seqs=st.integers(1, 4),
    swap_pages=st.integers(0, 12),
)
def test_random_workloads_generate_the_reference_tokens(
    model, prompts, num_pages, page_size, mode, max_num_seqs, swap_pages
):
    # Few distinct characters, so requests share prefixes; the prefix cache is probed after
    # every step, so any page indexed with K/V that were never computed is found.
    pool = KVCachePool(model.cache_config(num_pages=num_pages, page_size=page_size))
    sched = Scheduler(
        SequenceManager(pool),
        model,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=32,
        preemption_mode=mode,
        swap_space_pages=swap_pages,
    )
    accepted = {}
    for i, (text, new) in enumerate(prompts):
        if -(-(len(text) + new - 1) // page_size) <= num_pages:
            sched.add_request(i, model.encode(text), new)
            accepted[i] = (text, new)
    run_checked(sched, kv_model=model)
    assert pool.num_active_pages == 0
    for i, (text, new) in accepted.items():
        assert sched.outputs[i] == model.generate_reference(text, new)


def test_run_hands_each_step_record_to_on_step(model):
    # The same three-step opening as above, run with `on_step`: the records it receives are
    # the steps a hand-stepped twin scheduler produces, one per step, in order.
    def fresh() -> Scheduler:
        pool = KVCachePool(model.cache_config(num_pages=6, page_size=4))
        sched = Scheduler(SequenceManager(pool), model, max_num_seqs=8, max_num_batched_tokens=64)
        for i, text in enumerate(["abcdefg", "hijklmn", "opqrstu", "vw"]):
            sched.add_request(f"r{i}", model.encode(text), 6)
        return sched

    seen = []
    run = fresh()
    run.run(on_step=seen.append)
    twin, stepped = fresh(), []
    while twin.has_unfinished:
        stepped.append(twin.step())
    assert len(seen) == run.stats.steps == len(stepped)
    assert [(r.prefill, r.decode, r.preempted) for r in seen] == [
        (r.prefill, r.decode, r.preempted) for r in stepped
    ]
    assert seen[2].preempted == (("r2", "recompute"),)
