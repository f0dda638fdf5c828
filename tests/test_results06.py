"""Notebook 06's closed-box texts (pagedkv.labs.results06) against hand-made runs, and the
notebook's visible cells, which must not hold the answers those texts give."""

import re
from pathlib import Path

import nbformat

from pagedkv.bench import page_size
from pagedkv.labs import results06

NOTEBOOK = Path(__file__).parents[1] / "notebooks" / "06_benchmarks.ipynb"


def test_memory_text_gives_the_shares_and_not_the_batch_ratio():
    shares = {
        "oracle": {"token_states": 48.04, "mean_batch": 20.0},
        "paged": {"token_states": 96.0, "mean_batch": 50.0, "free": 1.44, "head_blocked_steps": 9,
                  "loaded_steps": 10},
    }  # fmt: skip
    text = results06.memory_text(shares)
    assert "paging fills 96.0% of the slots with K/V, the oracle 48.0%" in text
    # why the free share stays free: the queue's first request needed more pages
    flat = " ".join(text.split())
    assert (
        "Paging's free 1.4% stays free because the first waiting request needed more pages than"
        " were left, in 9 of the 10 steps averaged." in flat
    )
    shares["paged"]["head_blocked_steps"] = 10
    assert "in all 10 steps averaged" in results06.memory_text(shares)
    # the batch ratio would give the tokens-per-second prediction away: it waits for the answer
    assert "batch (" not in text and "after the prediction below" in text
    assert all(len(line) <= 80 for line in text.split("\n"))


def test_sharing_text_quotes_width_6_of_each_mode():
    data = {
        "parallel sampling": {2: {"saving_pct": 1.0}, 6: {"saving_pct": 12.4}},
        "beam search": {2: {"saving_pct": 30.0}, 6: {"saving_pct": 58.6}},
    }
    text = results06.sharing_text(data, [5, 15, 16, 40])
    assert "parallel sampling\n(59% against 12% at width 6)." in text
    # 5 and 15 fill no page of 16; 40 fills 2 (16 + 16 + 8)
    assert "2 of these 4 prompts fill no full page of 16 (the longest, 40, fills 2)" in text
    copied = "a shared page is copied each time a sequence writes to it while another still shares it"
    assert f"copy-on-write, notebook 04: {copied}" in " ".join(text.split("\n"))
    # not "only the full pages": the partial last page is shared too, until the first write
    assert "partial last page only until their first write" in " ".join(text.split("\n"))


def test_settings_text_divides_the_output_tokens_by_the_steps():
    run = {"mean_batch": 3.25, "preemptions": 2, "prefix_hit_rate_pct": 12.5, "max_batch": 3,
           "max_batch_step": 1, "steps": 8, "first_lookups": (40, 10)}  # fmt: skip
    text = results06.settings_text(run, run, run, [4, 6, 10])
    assert "mean running = 20 output tokens / 8 steps = 2.5" in text  # 4 + 6 + 10 = 20
    assert "prefix hits 10 of 40 = 25.0%" in text
    assert "outputs: mean 7 tokens, longest 10" in text  # 20 / 3 = 6.7
    assert "mean batch" not in text  # section 1's batch is another mean
    # each line names the try-it setting it answers, in the order of the questions
    facts = [line for line in text.split("\n") if not line.startswith("  ")]
    labels = [line.split(",")[0].split(":")[0].split(" (")[0] for line in facts]
    assert labels == ["setting 2", "setting 3", "setting 4", "setting 5", "setting 5"]
    assert facts[3].startswith("setting 5 (the page-256 run of setting 3): outputs:")
    assert all(len(line) <= 80 for line in text.split("\n"))  # no wrap in a projector's box


def test_clauses_breaks_between_parts_only_where_the_next_would_pass_the_width():
    text = results06.clauses("head:", ["a 1,000", "bb 22", "c 3"], width=16)
    # "head: a 1,000, bb 22" is 20 > 16; "  bb 22, c 3" is 12 <= 16
    assert text == "head: a 1,000,\n  bb 22, c 3"
    assert results06.clauses("h:", ["x", "y"], width=80) == "h: x, y"


def test_copy_share_text_splits_the_named_bar_in_three_parts_that_add_up_to_100():
    # the named bar: 2.0x, so dense 50 %; copies 0.27 of the paged step's 1.0 s; the rest 23 %
    points = [
        {"batch": 2, "context": 256, "ratio": 4.0, "gather_s": 1.0, "paged_s": 4.0},
        {"batch": 8, "context": 1024, "ratio": 2.0, "gather_s": 0.27, "paged_s": 1.0},
        {"batch": 8, "context": 256, "ratio": 3.0, "gather_s": 3.0, "paged_s": 5.0},
    ]
    text = results06.copy_share_text({"points": points})
    first, key = text.split("\n")[:2]
    second = text.split("\n")[2]
    assert first == "bar B=8 L=1024, shares of its paged step's time (this run, wall clock):"
    assert key == "  the dense step 50 % (1 ÷ the bar), the page copies alone 27 %, the rest 23 %"
    parts = [int(x) for x in re.findall(r"(\d+) %", key)]
    assert parts == [50, 27, 23] and sum(parts) == 100
    # another bar of the same data: its own parts, from its own timings (1/3, 0.6)
    other = results06.copy_share_text({"points": points}, bar=(8, 256)).split("\n")[1]
    assert [int(x) for x in re.findall(r"(\d+) %", other)] == [33, 60, 7]
    assert second == "the page copies at all 3 points: 25 % to 60 % of the paged step's time"
    assert "wall clock" in first and "this machine" in text
    assert all(len(line) <= 80 for line in text.split("\n"))


def test_copy_share_text_calls_a_split_over_100_percent_noise():
    points = [{"batch": 8, "context": 1024, "ratio": 1.5, "gather_s": 0.5, "paged_s": 1.0}]
    text = results06.copy_share_text({"points": points})
    assert "dense step 67 % (1 ÷ the bar), the page copies alone 50 %:" in text
    assert "timing noise" in text
    assert "the rest" not in text and all(len(line) <= 80 for line in text.split("\n"))


def test_describe_calls_the_whole_run_mean_mean_running():
    point = page_size.one_run(256, 4096)
    assert f"mean running {point['mean_batch']:.1f}," in page_size.describe(point)


def test_no_visible_cell_of_notebook_06_spells_out_an_answer():
    cells = nbformat.read(NOTEBOOK, as_version=4).cells
    visible = "\n".join(
        c.source
        for c in cells
        if c.cell_type == "code" and not c.metadata.get("jupyter", {}).get("source_hidden")
    )
    for answer in ("far more pages", "running by step", "Result: beam", "copy-on-write"):
        assert answer not in visible
    assert all(len(line) <= 90 for line in visible.splitlines())


def test_the_closing_quiz_transfer_question_matches_a_run():
    """06-check's sharing question: the answer saves the most in a run summed as section 2
    sums, and in a hand count of the last moment (shared: the prompt's full pages)."""
    import math
    import re

    from pagedkv.bench import sharing
    from pagedkv.engine.request import Request
    from pagedkv.viz import questions

    (q,) = [x for x in questions.quiz("06-check").questions if "Parallel sampling, n = 4" in x.text]
    run, hand = {}, {}
    for option in q.options:
        prompt, new = map(int, re.findall(r"(\d+)[- ]", option)[:2])
        one = Request(req_id="q", prompt_token_ids=list(range(prompt)), max_new_tokens=new + 1)
        run[option] = sharing.parallel_saving([one], 4, page_size=16, appended=new)["saving_pct"]
        own = math.ceil((prompt + new) / 16)  # a sample's pages without sharing
        hand[option] = 1 - (prompt // 16 + 4 * (own - prompt // 16)) / (4 * own)
    assert max(run, key=run.get) == max(hand, key=hand.get) == q.answer
    assert [round(v) for v in run.values()] == [1, 61, 28]  # the explanation's 61 % and 28 %
    assert "61 %" in q.why and "28 %" in q.why


def test_each_prediction_opens_the_boxes_of_its_own_question():
    """A "Predict" quiz opens the closed boxes made in its cell and the next one
    (`reveal.await_result`): in notebooks 06 and 08 that next code cell must make the boxes the
    question is about (06-predict-batch asks about tokens per second: the bytes box), and no
    other cell between must make boxes it would take instead."""
    want = {
        "06-predict-batch": "Quick run: the bytes each system's step reads",
        "06-predict-sharing": "Result: what sharing saves",
        "08-predict-checks": "What the four checks report",
    }
    for name in ("06_benchmarks.ipynb", "08_common_mistakes.ipynb"):
        cells = [c for c in nbformat.read(NOTEBOOK.parent / name, 4).cells if c.cell_type == "code"]
        for i, cell in enumerate(cells):
            qid = next((q for q in want if f'Quiz("{q}")' in cell.source), None)
            if qid is not None:
                assert "revealed(" not in cell.source, qid
                assert want[qid] in cells[i + 1].source, qid


def test_recompute_text_names_paging_s_preemptions_and_the_systems_without():
    shares = {
        "max": {"preemptions": 0},
        "oracle": {"preemptions": 0},
        "paged": {"preemptions": 150, "preempted_requests": 69, "recomputed_tokens": 34_443},
    }
    text = results06.recompute_text(shares, 24_497)
    # as many preemptions as requests is a coincidence: the line says they fall on fewer
    assert "paged: 150 preemptions, of 69 requests (some preempted several times)" in text
    assert "34,443 tokens computed again (all the prompts hold 24,497)" in text
    assert "max, oracle: no preemption" in text
    assert all(len(line) <= 80 for line in text.split("\n"))


def test_recompute_price_text_prices_the_recompute_against_the_counted_steps():
    from pagedkv.labs import costs

    row = {"token_states": 96.6, "mean_batch": 41.7, "recomputed_tokens": 34_443, "loaded_steps": 932,
           "recomputed_while_queued": 33_778,
           "queued_steps": [(41.7, 0.966 * 15_728, 33_778 / 932)] * 932}  # fmt: skip
    shares = {"paged": row, "oracle": {"token_states": 48.6, "mean_batch": 19.8}}
    price = results06.recompute_price(shares, costs.paper_slots())
    # 2 x 12.9e9 FLOPs at 312 TFLOP/s; 25.8 GB + 96.6 % of 15,728 x 800 KiB at 1,555 GB/s
    assert round(price["token_ms"], 3) == 0.083
    step = (2 * 12.9e9 + 0.966 * 15_728 * 819_200) / 1555e9 * 1e3
    assert abs(price["step_ms"] - step) < 1e-9
    # one window: only the tokens recomputed while a request waits, against those 932 steps
    assert abs(price["added"] - 33_778 * price["token_ms"] / (932 * step)) < 1e-12
    # the mean step's decodes: 41.7 x 0.083 ms; recompute spread evenly hides under the reading
    assert abs(price["decode_arithmetic_ms"] - 41.7 * price["token_ms"]) < 1e-9
    assert abs(price["priced_s"] - price["decode_s"]) < 1e-9 and price["arithmetic_steps"] == 0
    assert abs(price["gain"][0] - price["gain"][1]) < 1e-9 and price["own_steps_gain"] < 1.7
    text = results06.recompute_price_text(shares, costs.paper_slots())
    assert "the 932 steps" in text
    # the window's tokens against all the recomputed ones: 34,443 - 33,778 = 665 in the drain
    assert "which recompute 33,778 of the 34,443 tokens (665 fall in the drain)" in text
    assert "2 FLOPs x 12.9 billion weights / 312 TFLOP/s = 0.083 ms" in text
    lines = text.split("\n")
    assert lines[-2].startswith("paged's tokens/s against the oracle's: 1.8x counting decode")
    assert lines[-1] == "  1.8x with each step's recompute priced in that step"
    assert "decodes 0.083 ms x batch 41.7 = 3.4 ms, reading 24.6 ms" in text
    assert len(lines) <= 8 and all(len(line) <= 80 for line in lines)


def test_price_steps_takes_the_longer_of_reading_and_arithmetic_in_each_step():
    # worked by hand: weights 10 ms, 0.01 ms a K/V slot, 1 ms a token's arithmetic
    steps = [(2, 100, 0), (3, 200, 20), (4, 300, 5)]
    # reading 11, 12, 13 ms; arithmetic 2, 23, 9 ms: only the second step is arithmetic-bound
    priced = results06.price_steps(steps, 10.0, 0.01, 1.0)
    assert [(round(r, 9), round(a, 9)) for r, a in priced] == [(11.0, 2.0), (12.0, 23.0), (13.0, 9.0)]
    assert round(sum(map(max, priced)), 9) == 47.0


def test_section_1_recomputes_a_whole_readmission_in_one_step():
    """06-batch-after says section 1's run recomputes each re-admission in one step, beside the
    decodes: its step budget holds the whole pool, so no re-admission is split over steps."""
    from pagedkv.labs import costs
    from pagedkv.labs.serving import paged_scheduler

    sched = paged_scheduler(costs.paper_slots(), 16, 256, 2048)
    assert sched.max_num_batched_tokens >= costs.paper_slots()


def test_recompute_price_counts_the_steps_whose_arithmetic_is_longer():
    """One of 932 steps recomputes 1,000 tokens: its arithmetic, (41.7 + 1,000) x 0.083 ms,
    outlasts its 24.6 ms reading, so it is the one arithmetic step and adds the difference."""
    from pagedkv.labs import costs

    slots = 0.966 * 15_728
    quiet, busy = (41.7, slots, 0), (41.7, slots, 1_000)
    row = {"token_states": 96.6, "mean_batch": 41.7, "recomputed_tokens": 1_000, "loaded_steps": 932,
           "recomputed_while_queued": 1_000, "queued_steps": [quiet] * 931 + [busy]}  # fmt: skip
    shares = {"paged": row, "oracle": {"token_states": 48.6, "mean_batch": 19.8}}
    price = results06.recompute_price(shares, costs.paper_slots())
    token_ms = 2 * 12.9e9 / 312e12 * 1e3
    reading = (2 * 12.9e9 + slots * 819_200) / 1555e9 * 1e3  # every step reads as much
    assert price["arithmetic_steps"] == 1
    extra = (41.7 + 1_000) * token_ms - reading
    assert extra > 0 and abs(price["priced_s"] - (price["decode_s"] + extra / 1e3)) < 1e-9
