"""`describe_steps` names each beam step's forks, drops and copies; checked against the pool's
own copy log and the block tables, which it does not read."""

from __future__ import annotations

import re

from pagedkv.scenarios import ScenarioRun
from pagedkv.scenarios.beam_story import describe_steps


def _finished(name: str) -> ScenarioRun:
    run = ScenarioRun(name)
    while not run.done:
        run.step()
    return run


def test_beam_steps_match_the_copy_log_and_the_tables():
    run = _finished("beam")
    text = describe_steps(run)
    copies = [(int(a), int(b)) for a, b in re.findall(r"copied from page (\d+) to page (\d+)", text)]
    assert copies == run.seqs.cow_log == [(7, 9), (8, 7)]
    final = set(run.seqs.snapshot().block_tables)
    dropped = re.findall(r"(beam\.\d+) dropped", text)
    forked = re.findall(r"(beam\.\d+) forked from (beam\.\d+)", text)
    # every beam ever forked is either alive at the end or was dropped, never both
    born = {child for child, _ in forked} | {"beam.0"}
    assert set(dropped) | final == born and not set(dropped) & final
    # a fork's parent held exactly the pages the child starts with
    for child, parent in forked:
        step = next(r.step for r in run.records for e in r.events if e.kind == "fork" and e.seq_id == child)
        before = run.snapshots[step - 1].block_tables[parent]
        pages = [e.page_id for e in run.records[step - 1].events if e.kind == "fork" and e.seq_id == child]
        assert list(before) == pages
    assert text.splitlines()[0] == "step 2:" and "beam.2 dropped, holding [0, 1, 2, 3, 6]" in text


def test_a_run_without_forks_describes_nothing():
    run = ScenarioRun("beam")
    run.step()  # admission only
    assert describe_steps(run) == ""
