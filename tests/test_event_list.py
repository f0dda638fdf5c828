"""event_list: a scheduler run's page events, one a line, checked against the run's own
block tables and page states (snapshots), not against the events it reads."""

import re

from pagedkv.core.page import PageState
from pagedkv.scenarios import ScenarioRun
from pagedkv.viz.event_list import event_list


def _finished_run(name: str) -> ScenarioRun:
    run = ScenarioRun(name)
    while run.can_step:
        run.step()
    return run


def _pages(text: str) -> list[int]:
    found = re.search(r"pages? (\[[\d, ]+\]|\d+)", text).group(1)
    return [int(p) for p in found.strip("[]").split(", ")]


def test_lines_agree_with_the_snapshots():
    run = _finished_run("preempt")
    lines = event_list(run)
    assert not any(re.match(r"\d", line) for line in lines)  # no list number to misread as a step
    for line in lines:
        step, seq_id, what = re.match(r"step +(\d+) \([^)]*\) \| (\S+) (.*)", line).groups()
        before, after = run.snapshots[int(step) - 1], run.snapshots[int(step)]
        if what.startswith("admitted: pages"):  # every page of its new block table
            assert _pages(what) == list(after.block_tables[seq_id])
        elif what.startswith("preempted"):  # the pages now CACHED, from its old table
            cached = [p for p in before.block_tables[seq_id] if after.state[p] == PageState.CACHED]
            assert sorted(_pages(what)) == sorted(cached)
        elif what.startswith("takes"):  # pages at the end of its table (or released with it)
            table = after.block_tables.get(seq_id, ())
            assert all(p in table or seq_id not in after.block_tables for p in _pages(what))
        elif what.startswith("resumes: prefix hits"):  # the first pages of its new table
            hits = _pages(what)
            assert list(after.block_tables[seq_id][: len(hits)]) == hits
        elif what.startswith("finishes"):
            assert seq_id in before.block_tables and seq_id not in after.block_tables
            held = len(before.block_tables[seq_id])
            said = sum(int(n) for n in re.findall(r"(\d+) pages? turns?", what))
            assert said >= held  # every page it held, plus one taken and released that step


def test_quiet_steps_are_left_out_and_the_range_is_kept():
    run = _finished_run("preempt")
    first_ten = event_list(run, 1, 10)
    # by hand: 3 queueings, 2 admissions, pages taken at steps 5, 7 and 9; the scheduler's
    # k-th step is scenario step k + 3
    assert [line.split(" | ")[0] for line in first_ten] == [
        "step  1 (queues req1)", "step  2 (queues req2)", "step  3 (queues req3)",
        "step  4 (scheduler step 1)", "step  4 (scheduler step 1)", "step  5 (scheduler step 2)",
        "step  7 (scheduler step 4)", "step  9 (scheduler step 6)",
    ]  # fmt: skip
    assert first_ten[3] == (
        "step  4 (scheduler step 1) | req1 admitted: pages [0, 1, 2, 3], room for its tokens 1-16"
    )
    assert event_list(run, 11, 11) == [
        "step 11 (scheduler step 8) | req2 preempted (recompute): pages [10, 8, 7, 6, 5, 4] turn CACHED"
    ]


def test_abort_and_finish_count_the_pages():
    run = _finished_run("chunked")
    lines = event_list(run, 12, 12)
    assert lines == ["step 12 (aborts chat) | chat aborted: 4 pages turn CACHED, 1 page turns FREE"]


def test_a_page_taken_and_released_in_one_step_says_so():
    """A learner read "long takes page 16" as a truncated line: a page a request takes in the
    step it finishes has no room left to name, so the line says it went in the same step.
    Oracle: the snapshots, where the page is in neither block table after the step."""
    run = _finished_run("chunked")
    (line,) = [t for t in event_list(run, 11, 11) if "takes" in t]
    assert line == "step 11 (scheduler step 9) | long takes page 16, released in the same step"
    assert 16 not in run.snapshots[10].block_tables["long"] and "long" not in run.snapshots[11].block_tables
