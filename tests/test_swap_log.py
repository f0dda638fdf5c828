"""swap_log: each swap preemption's pages out and back, checked against the scheduler's own
byte counters and against notebook 05's four requests worked out by hand."""

from pagedkv import TinyLM
from pagedkv.bench import preempt
from pagedkv.labs.swap_log import swap_log, swap_totals
from pagedkv.labs.workloads import Request, generate


def test_the_notebook_requests_by_hand():
    # Section 3's story: B is preempted at step 9 holding 20 tokens (5 full pages of 4); A
    # takes B's fifth page, so at B's resume (step 13) 4 pages hit and the fifth comes back.
    model = TinyLM.pretrained()
    prompts = {"A": "Pages fill up", "B": "Tokens arrive", "C": "Queues wait", "D": "Batches grow"}
    requests = [Request(r, model.encode(t), 12) for r, t in prompts.items()]
    log = swap_log(model, requests, num_pages=10, page_size=4, max_num_seqs=3,
                   max_num_batched_tokens=40, swap_space_pages=8)  # fmt: skip
    b = log[0]
    assert (b.req_id, b.step, b.tokens, b.pages_out, b.partial_out) == ("B", 9, 20, 5, 0)
    assert (b.resume_step, b.prefix_hits, b.pages_back, b.evicted) == (13, 4, 1, 1)
    assert [e.req_id for e in log] == ["B", "D"]


def test_totals_match_the_benchmark_bytes():
    trace = generate("alpaca", 10, 0, vocab_size=256)
    log = swap_log(TinyLM(seed=0), trace, num_pages=12)
    swap = preempt.run(quick=True).data["swap"]
    page_bytes = 16 * swap["bytes_per_token"]
    assert len(log) == swap["preemptions"]
    assert sum(e.pages_out for e in log) * page_bytes == swap["swap_out_bytes"]
    assert sum(e.pages_back for e in log) * page_bytes == swap["swap_in_bytes"]
    for e in log:
        assert e.pages_out == -(-e.tokens // 16)  # every page it held, the partial one too
        assert e.partial_out == (e.tokens % 16 != 0)
        assert e.step < e.resume_step and e.pages_back >= e.partial_out
        assert e.prefix_hits + e.pages_back == e.pages_out
        assert e.row()[3] == e.pages_out


def test_swap_totals_add_up_to_the_scheduler_byte_counters():
    trace = generate("alpaca", 10, 0, vocab_size=256)
    swap = preempt.run(quick=True).data["swap"]
    page_bytes = 16 * swap["bytes_per_token"]
    rows = dict(swap_totals(swap_log(TinyLM(seed=0), trace, num_pages=12), page_bytes))
    assert rows["bytes out"] == swap["swap_out_bytes"] and rows["bytes back"] == swap["swap_in_bytes"]
    keys = (
        "pages out (every page a victim held)",
        "prefix hits at the resume (not copied)",
        "pages back (copied)",
    )
    out, hits, back = (rows[k] for k in keys)
    assert out == hits + back and back == rows["  of them partial"] + rows["  of them evicted"]
