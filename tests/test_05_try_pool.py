"""05's Try-it question ("05-try"): its answer and explanation against runs stepped by hand
here, not through the bench helper the notebook's cell calls."""

from __future__ import annotations

from pagedkv import KVCachePool, SequenceManager, TinyLM
from pagedkv.engine.scheduler import Scheduler
from pagedkv.viz import questions

PROMPTS = ("Pages fill up", "Tokens arrive", "Queues wait", "Batches grow")  # 05's A to D


def _run(num_pages: int) -> tuple[int, int, int, int]:
    """(steps, preemptions, recomputed tokens, most requests in one step) of 05's four
    requests in a pool of `num_pages` pages of 4, as 05's section 6 serves them."""
    model = TinyLM.pretrained()
    pool = KVCachePool(model.cache_config(num_pages=num_pages, page_size=4))
    sched = Scheduler(SequenceManager(pool), model, max_num_seqs=3, max_num_batched_tokens=40)
    for req_id, text in zip("ABCD", PROMPTS):
        sched.add_request(req_id, model.encode(text), 12)
    most = 0
    while sched.has_unfinished:
        record = sched.step()
        most = max(most, len({*record.decode, *(r for r, _ in record.prefill)}))
    stats = sched.stats
    return stats.steps, stats.preemptions, stats.recomputed_tokens, most


def test_05_try_answer_is_the_12_page_runs_step_count():
    (question,) = questions.all_questions()["quiz"]["05-try"].questions
    steps_12, preempted_12, recomputed_12, most_12 = _run(12)
    steps_10, _, recomputed_10, most_10 = _run(10)
    steps_24, preempted_24, _, most_24 = _run(24)
    assert (steps_10, most_10) == (30, 2) and preempted_24 == 0  # section 6's runs
    assert question.answer.startswith(f"{steps_12},") and steps_12 == steps_24  # "as with no pressure"
    assert f"{steps_10}, as with 10 pages" in question.options
    # the explanation: A, B and C admitted at once in 11 of the 12 pages, as in 24 pages; the
    # one preemption left is paid in tokens, more of them than the 10-page run's two
    model = TinyLM.pretrained()
    admit = [-(-len(model.encode(t)) // 4) for t in PROMPTS]
    assert admit[:3] == [4, 4, 3] and sum(admit[:3]) == 11 <= 12 < sum(admit)
    assert most_12 == most_24 == 3 and preempted_12 == 1 and recomputed_12 > recomputed_10
    assert "admit A, B and C at once (4 + 4 + 3 pages)" in question.why
    assert f"{recomputed_12} tokens recomputed. Yet" in question.why
    assert len(question.why.split()) <= 85


def _finishes(num_pages: int) -> tuple[int, dict[str, int]]:
    """(the step D is admitted in, req id -> the step it finished in) of section 6's run."""
    model = TinyLM.pretrained()
    pool = KVCachePool(model.cache_config(num_pages=num_pages, page_size=4))
    sched = Scheduler(SequenceManager(pool), model, max_num_seqs=3, max_num_batched_tokens=40)
    for req_id, text in zip("ABCD", PROMPTS):
        sched.add_request(req_id, model.encode(text), 12)
    d_start, finished = 0, {}
    while sched.has_unfinished:
        record = sched.step()
        if "D" in dict(record.prefill) and not d_start:
            d_start = record.step
        finished.update(dict.fromkeys(record.finished, record.step))
    return d_start, finished


def test_05_try_explains_why_the_preemption_costs_no_step():
    """The run ends when D finishes; D starts after A and B finish in every pool of 12 pages
    or more, and C, preempted in the 12-page pool, finishes before D."""
    (question,) = questions.all_questions()["quiz"]["05-try"].questions
    for n in (12, 13, 16, 24, 30):
        d_start, finished = _finishes(n)
        assert d_start == 13 and finished["A"] == finished["B"] == 12, n
        assert max(finished.values()) == finished["D"] == 24 > finished["C"], n
    assert _finishes(12)[1]["C"] == 20
    assert "the run ends when D finishes" in question.why
    assert "D starts at step 13, after A and B finish at step 12" in question.why
    # the wrong picks' hints differ and neither reasons from admission alone
    hints = list(question.hints.values())
    assert len(set(hints)) == 2 and all("finishes last" in h or "last finish" in h for h in hints)
