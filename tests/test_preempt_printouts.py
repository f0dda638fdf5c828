"""05's preemption printouts against the scheduler's own counters and the bench's own serve."""

from __future__ import annotations

import re

import pytest

from pagedkv import KVCachePool, SequenceManager, TinyLM
from pagedkv.bench import preempt
from pagedkv.engine.scheduler import Scheduler
from pagedkv.labs.preempt_printouts import cap_rows, last_request_line, pool_run, step_lines
from pagedkv.labs.workloads import Request, generate

PROMPTS = {"A": "Pages fill up", "B": "Tokens arrive", "C": "Queues wait", "D": "Batches grow"}
OPTIONS = {"page_size": 4, "max_num_seqs": 3, "max_num_batched_tokens": 40}


def _requests(model: TinyLM) -> list[Request]:
    return [Request(r, model.encode(t), 12) for r, t in PROMPTS.items()]


@pytest.mark.parametrize("num_pages", [8, 10, 11, 12, 24])
def test_pool_run_lines_add_up_to_the_schedulers_counters(num_pages):
    """Each preemption's recomputed tokens, worked out from its pages, sum to the scheduler's
    own `recomputed_tokens`; the victims and steps are the scheduler's preempt/resume events."""
    model = TinyLM.pretrained()
    lines = pool_run(model, _requests(model), num_pages, **OPTIONS)
    sched = Scheduler(
        SequenceManager(KVCachePool(model.cache_config(num_pages=num_pages, page_size=4))),
        model,
        max_num_seqs=3,
        max_num_batched_tokens=40,
    )
    steps: list[tuple[str, object, int]] = []
    sched.add_listener(lambda e: steps.append((e.kind, e.seq_id, sched.stats.steps + 1)))
    sched.add_requests(_requests(model))
    sched.run()
    stats = sched.stats
    plural = "" if stats.preemptions == 1 else "s"
    assert lines[0].startswith(
        f"{num_pages} pages: {stats.steps} steps, {stats.preemptions} preemption{plural}, "
        f"{stats.recomputed_tokens} tokens recomputed"
    )
    pairs = list(zip(lines[1::2], lines[2::2]))
    assert len(pairs) == stats.preemptions
    recomputed = [int(re.search(r"(\d+) tokens? recomputed$", second)[1]) for _, second in pairs]
    assert sum(recomputed) == stats.recomputed_tokens
    told = [
        re.match(r"(\w+): preempted at step (\d+) .* back at step (\d+):", first).groups()
        for first, _ in pairs
    ]
    preempts = [(s, r) for k, r, s in steps if k == "preempt"]
    resumes = [(s, r) for k, r, s in steps if k == "resume"]
    # listed in the order of the preemptions, even when a later victim resumes first (11 pages)
    assert [(int(a), r) for r, a, _ in told] == preempts
    assert sorted((int(b), r) for r, _, b in told) == sorted(resumes)


def test_pool_run_at_12_pages_explains_the_14_recomputed_tokens():
    model = TinyLM.pretrained()
    lines = pool_run(model, _requests(model), 12, **OPTIONS)
    assert lines == [
        "12 pages: 24 steps, 1 preemption, 14 tokens recomputed, at most 3 requests in one step",
        "C: preempted at step 5 with 14 tokens in its pages, back at step 13:",
        "  0 of its 3 full pages still CACHED, 3 evicted before it was back: 14 tokens recomputed",
    ]


def test_cap_rows_third_row_is_the_bench_serve_with_the_cap():
    report = preempt.run(quick=True)
    quick = generate("alpaca", 10, 0, vocab_size=256)
    rows = cap_rows(report.data, TinyLM(seed=0), quick, max_num_seqs=16, cap=3)
    capped = preempt.serve(
        TinyLM(seed=0),
        quick,
        12,
        "recompute",
        page_size=16,
        max_num_seqs=3,
        max_num_batched_tokens=max(4096, max(r.final_len for r in quick)),
        swap_space_pages=1024,
    )
    data = report.data
    assert rows == [
        [
            "no pressure",
            data["no pressure"]["num_pages"],
            16,
            data["no pressure"]["steps"],
            0,
            547,
            0,
            f"{data['no pressure']['mean_running']:.1f}",
        ],
        [
            "recompute",
            12,
            16,
            data["recompute"]["steps"],
            data["recompute"]["preemptions"],
            588,
            588 - 547,  # computed beyond the no-pressure run's count
            f"{data['recompute']['mean_running']:.1f}",
        ],
        [
            "cap 3",
            12,
            3,
            capped["steps"],
            capped["preemptions"],
            capped["prefill_tokens"] + capped["decode_tokens"],
            capped["prefill_tokens"] + capped["decode_tokens"] - 547,
            f"{capped['mean_running']:.1f}",
        ],
    ]
    assert rows[2][3] > rows[1][3] > rows[0][3] and rows[2][4] == 0


def _sched10(model: TinyLM) -> Scheduler:
    pool = KVCachePool(model.cache_config(num_pages=10, page_size=4))
    sched = Scheduler(SequenceManager(pool), model, max_num_seqs=3, max_num_batched_tokens=40)
    sched.add_requests(_requests(model))
    return sched


def test_step_lines_name_the_schedulers_own_admits_resumes_finishes_and_preemptions():
    """Each preempt/resume event and each finish, stepped by hand, has its step's line."""
    model = TinyLM.pretrained()
    oracle = _sched10(model)
    seen: list[tuple[int, str, object]] = []
    oracle.add_listener(lambda e: seen.append((oracle.stats.steps + 1, e.kind, e.seq_id)))
    finished: list[tuple[int, object]] = []
    while oracle.has_unfinished:
        record = oracle.step()
        finished += [(oracle.stats.steps, r) for r in record.finished]
    lines = step_lines(_sched10(model))
    for step, kind, req in seen:
        word = "preempt" if kind == "preempt" else "prefill"
        assert any(x.startswith(f"step {step}: ") and f"{word} {req}" in x for x in lines)
    for step, req in finished:
        assert any(x.startswith(f"step {step}: ") and f"finished {req}" in x for x in lines)
    assert ("resume", "D") in {(k, r) for _, k, r in seen}
    assert "step 25: prefill D (2 tokens)" in lines and "step 24: decode C; finished C" in lines
    first = step_lines(_sched10(model), until_preempt=True)
    assert first[-1] == "step 9: decode A; preempt B (recompute); short of a page: ['A', 'B']"


@pytest.mark.parametrize("cap", [3, 4, 5, 16])
def test_last_request_line_against_the_schedulers_events(cap):
    """The line's request-steps are the tokens sampled (one a seat), its steps the scheduler's,
    and the last request to finish runs alone from its last (re)admission: the run ends at
    that step plus the tokens it still had to sample, minus one."""
    model, quick = TinyLM(seed=0), generate("alpaca", 10, 0, vocab_size=256)
    line = last_request_line(model, quick, "alpaca-9", num_pages=12, max_num_seqs=cap)
    sched = Scheduler(
        SequenceManager(KVCachePool(model.cache_config(num_pages=12, page_size=16))),
        model,
        max_num_seqs=cap,
        max_num_batched_tokens=4096,
    )
    sched.add_requests(quick)
    kept, back = 0, 0
    while sched.has_unfinished:
        record = sched.step()
        if any(v == "alpaca-9" for v, _ in record.preempted):
            kept = len(sched.requests["alpaca-9"].output)
        if "alpaca-9" in dict(record.prefill):
            back = record.step
    total = sum(r.max_new_tokens for r in quick)
    name = f"cap {cap}" if cap < len(quick) else "recompute"  # the bench's run: no cap binds
    assert line.startswith(f"{name}: {total} request-steps in {sched.stats.steps} steps;")
    assert f"step {back}" in line
    longest = next(r.max_new_tokens for r in quick if r.req_id == "alpaca-9")  # 98
    assert sched.stats.steps == back + (longest - kept) - 1
    assert ("preempted" in line) == (sched.stats.preemptions > 0 and kept > 0)
