"""The dashboard's log and controls say what happened in terms a newcomer can check: why a
request was never admitted, why a finished page went CACHED or FREE, how many tokens an
admitted prompt has, what Reset restores, and how finely the Pages slider moves."""

from __future__ import annotations

import math
import re

import pytest

from pagedkv import PageState
from pagedkv.scenarios import ScenarioRun, default_model
from pagedkv.scenarios.text import token_ids_of
from pagedkv.viz import Dashboard
from pagedkv.viz.controls import PAGES_RANGE, PROMPT_TEXT
from pagedkv.viz.dashboard_text import scrolls


def test_a_request_never_admitted_says_its_prompt_needs_more_pages_than_the_pool_has():
    run = ScenarioRun("walkthrough", 4)
    while run.can_step:
        run.step()
    adds = {a.seq_id: a for a in run.steps if a.op == "add"}
    for seq_id, add in adds.items():  # the oracle: the prompt's tokens, counted by the model
        n = len(default_model().encode(add.text))
        said = f"{seq_id} never admitted: its {n}-token prompt needs {math.ceil(n / 4)} pages; the pool has 4"
        assert any(said in r.note for r in run.records if r.action.op == "decode"), said


def test_a_finish_says_which_pages_go_cached_and_which_free_as_the_pool_then_shows():
    run = ScenarioRun("prefix")
    while run.can_step:
        run.step()
    finishes = [k for k, r in enumerate(run.records) if r.action.op == "free" and not r.refused]
    assert finishes
    for k in finishes:
        after = run.snapshots[k + 1]  # snapshots[0] is the pool before the first step
        for pages, state in re.findall(r"pages? ([\d, ]+) goe?s? (CACHED|FREE)", run.records[k].note):
            for page in map(int, pages.split(", ")):
                assert after.state[page] == PageState[state], (run.records[k].note, page)


def test_an_admission_says_how_many_tokens_the_prompt_has_when_its_pages_have_room_for_more():
    run = ScenarioRun("walkthrough")
    run.step()  # request_A's 18-token prompt on 4-slot pages: 5 pages, room for 20
    n = run.seqs.get("request_A").num_tokens
    line = next(t for k, t in run.records[0].entries(grouped=True) if k == "allocate")
    assert f"room for its tokens 1-{math.ceil(n / 4) * 4}" in line
    assert f"(it has {n}: {n + 1}-{math.ceil(n / 4) * 4} wait for its next ones)" in line


def test_reset_puts_the_prompt_text_back():
    dash = Dashboard()
    dash.prompt.value = "something typed"
    dash.reset_button.click()
    assert dash.prompt.value == PROMPT_TEXT == "Hello, pages!"


def test_the_pages_slider_moves_a_page_at_least_every_12_px():
    dash = Dashboard()
    width = int(dash.pages_slider.layout.width.removesuffix("px"))
    assert width / (PAGES_RANGE[1] - PAGES_RANGE[0]) >= 12


def test_the_scroll_note_shows_only_when_the_block_tables_may_scroll():
    dash = Dashboard("walkthrough")
    note = dash.panes["Block tables"].children[1]
    dash.goto(2)  # one sequence: nothing scrolls
    assert len(dash.run.snapshots[-1].seq_ids) == 1 and note.layout.display == "none"
    dash = Dashboard("parallel")
    dash.goto(10)  # four sequences: the rows run past the box
    snap = dash.run.snapshots[-1]
    note = dash.panes["Block tables"].children[1]
    assert len(snap.seq_ids) == 4 and scrolls(snap, token_ids_of(dash.run.seqs))
    assert note.layout.display != "none"


@pytest.mark.parametrize("name", ["beam", "parallel", "walkthrough", "prefix", "eviction"])
def test_a_copy_on_writes_heading_names_the_writer_and_holds_only_its_events(name):
    """Beam step 8 frees beam.3's page 9 and then copies beam.1's last page into page 9: the
    free is not part of the copy (the log once put it under "copy-on-write for beam.3").
    Oracle: the pool's own events — each heading names the sequence of a `cow` event, and
    every line under a heading ("– ") is an event of that same sequence."""
    run = ScenarioRun(name)
    while not run.done:
        record = run.step()
        writers = {e.seq_id for e in record.events if e.kind == "cow"}
        heading = None
        for kind, text in record.entries(grouped=True):
            if text.startswith("copy-on-write for "):
                heading = text.removeprefix("copy-on-write for ").split(":")[0]
                assert heading in {str(w) for w in writers}, (name, record.step, text)
            elif text.startswith("– "):
                assert heading is not None and kind != "free", (name, record.step, text)
            else:
                heading = None


def test_a_prefix_hit_names_the_holders_of_each_page_it_shares():
    """A request you add after user1's prompt shares user1's pages 0-10, of which only 0-6
    are held by user2 and user3 too: the log splits the line by holders (it once said all
    eleven were "held by user1, user2, user3"). Oracle: the block tables before the step."""
    from pagedkv.scenarios.actions import Action

    run = ScenarioRun("prefix")
    run.goto(6)
    before = run.snapshots[-1].block_tables
    record = run.apply(Action("add", "yours1", parent="user1", text=" and more", caption="yours"))
    lines = [t for k, t in record.entries(grouped=True) if k == "prefix_hit"]
    said = {}
    for line in lines:
        pages, holders = re.fullmatch(
            r"prefix hit shares pages ([\d, ]+) for yours1 \(ACTIVE, held by (.+) too\)", line
        ).groups()
        for page in map(int, pages.split(", ")):
            said[page] = set(holders.split(", "))
    want = {p: {s for s, table in before.items() if p in table} for p in before["user1"]}
    assert said == {p: h for p, h in want.items() if p in said} and len(said) >= 8
    assert len({frozenset(h) for h in said.values()}) == len(lines) > 1  # one line per holder set
