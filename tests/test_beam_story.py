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


def test_the_log_names_each_beam_drop_before_the_releases_it_causes():
    # every beam a step drops gets a line naming it and the pages of its block table (read
    # from the snapshot before the step), before its own pages' "cache"/"free" lines; the
    # pages another block table also holds before the step are the ones it says stay
    run = _finished("beam")
    for record in run.records:
        before = run.snapshots[record.step - 1].block_tables
        after = run.snapshots[record.step].block_tables
        lines = record.lines()
        for beam in [s for s in before if s not in after]:
            table = list(before[beam])
            held = {p for s, t in before.items() if s != beam for p in t}
            stay = [p for p in table if p in held]
            said = f"{beam} dropped: releases pages {', '.join(map(str, table))}"
            k = next(i for i, line in enumerate(lines) if line.startswith(said))
            if stay:
                assert f"pages {', '.join(map(str, stay))} stay with the other beams" in lines[k]
            released = [i for i, line in enumerate(lines) if line.endswith(f"for {beam}")]
            assert released and min(released) > k  # the cause comes first
    step6 = run.records[5].lines()
    assert step6[:2] == [
        "beam.2 dropped: releases pages 0, 1, 2, 3, 6; pages 0, 1, 2, 3 stay with the other beams"
        " (ref count down by one)",
        "cache (ref count 0, kept for reuse) page 6 for beam.2",
    ]
