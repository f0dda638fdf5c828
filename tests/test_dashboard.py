"""The dashboard under plain pytest (no kernel): press its buttons, check the pool.

Oracles: the pool rules worked out by hand for the walkthrough's first steps, and a fresh
`ScenarioRun` stepped to the same point. The widget labels and CSS classes are the DOM
contract the browser tests rely on.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys

import ipywidgets as widgets
import pytest

from pagedkv import PageState
from pagedkv.scenarios import SCENARIOS, ScenarioRun
from pagedkv.viz import Dashboard

CONTRACT = [  # attribute, widget type, description, CSS class
    ("step_button", widgets.Button, "Step", "pagedkv-step"),
    ("back_button", widgets.Button, "Back", "pagedkv-back"),
    ("reset_button", widgets.Button, "Reset", "pagedkv-reset"),
    ("play", widgets.Play, None, "pagedkv-play"),
    ("scenario_picker", widgets.Dropdown, "Scenario", "pagedkv-scenario"),
    ("step_counter", widgets.HTML, None, "pagedkv-step-counter"),
    ("heatmap", widgets.Image, None, "pagedkv-heatmap"),
    ("lru", widgets.Image, None, "pagedkv-lru"),
    ("event_log", widgets.HTML, None, "pagedkv-event-log"),
]


@pytest.fixture
def dash():
    return Dashboard()


def fresh(name: str, steps: int) -> ScenarioRun:
    run = ScenarioRun(name)
    for _ in range(steps):
        run.step()
    return run


def step_number(dash: Dashboard) -> int:
    return int(re.search(r"step (\d+)", dash.step_counter.value).group(1))


def descendants(widget):
    yield widget
    for child in getattr(widget, "children", ()):
        yield from descendants(child)


def test_widgets_follow_the_dom_contract(dash):
    shown = list(descendants(dash))
    for attr, kind, description, css in CONTRACT:
        widget = getattr(dash, attr)
        assert isinstance(widget, kind) and css in widget._dom_classes, attr
        assert widget in shown, attr
        if description is not None:
            assert widget.description == description
    labels = dict(dash.scenario_picker.options)
    assert set(labels) == {s.title for s in SCENARIOS.values()}
    assert "eviction" in labels.values()
    assert dash.heatmap.format == "png" and bytes(dash.heatmap.value).startswith(b"\x89PNG")
    assert step_number(dash) == 0


def test_step_admits_request_a_on_the_lowest_pages(dash):
    dash.step_button.click()
    assert step_number(dash) == 1
    # 18 prompt tokens / 4 slots per page -> 5 pages, FREE pages lowest id first
    assert dash.run.seqs.block_table("request_A") == [0, 1, 2, 3, 4]
    assert dash.run.pool.num_active_pages == 5
    assert "allocate pages 0, 1, 2, 3, 4 for request_A" in dash.event_log.value
    text = re.sub(r"<[^>]+>", "", dash.event_log.value)  # its plain text: a heading, then entries
    assert re.search(r"^step 1\nallocate pages 0, 1, 2, 3, 4 for request_A", text, re.MULTILINE)
    for _ in range(3):  # tokens 19, 20 fill page 4; token 21 needs page 5
        dash.step_button.click()
    assert dash.run.seqs.block_table("request_A") == [0, 1, 2, 3, 4, 5]
    step_4 = [text for _, _, heading, text in _log_entries(dash.event_log.value) if heading == "step 4"]
    assert step_4[0].startswith("allocate page 5 for request_A")


def test_back_restores_the_previous_state_and_picture(dash):
    dash.open_tab("LRU order")
    for _ in range(3):
        dash.step_button.click()
    picture, lru = bytes(dash.heatmap.value), bytes(dash.lru.value)
    dash.step_button.click()
    assert bytes(dash.heatmap.value) != picture
    dash.back_button.click()
    assert step_number(dash) == 3
    assert bytes(dash.heatmap.value) == picture and bytes(dash.lru.value) == lru
    assert dash.run.seqs.snapshot() == fresh("walkthrough", 3).seqs.snapshot()


def test_reset_goes_back_to_step_zero(dash):
    start = bytes(dash.heatmap.value)
    for _ in range(5):
        dash.step_button.click()
    dash.reset_button.click()
    assert step_number(dash) == 0 and dash.run.history == []
    assert dash.run.pool.num_active_pages == 0 and bytes(dash.heatmap.value) == start
    dash.back_button.click()  # nothing to undo: says so, changes nothing
    assert "nothing to undo" in dash.caption.value and step_number(dash) == 0
    assert "nothing to undo" in dash.caption.value  # visible under the buttons, whatever tab is open


def test_reset_stops_play(dash):
    dash.play.playing = True  # ▶ pressed: the browser steps Play's value on
    dash.play.value = 2
    dash.reset_button.click()
    assert dash.play.playing is False and step_number(dash) == 0 and dash.play.value == 0


def test_play_steps_until_its_value(dash):
    dash.play.value = 4
    assert dash.run.cursor == 4 and step_number(dash) == 4
    assert dash.run.seqs.snapshot() == fresh("walkthrough", 4).seqs.snapshot()
    dash.back_button.click()
    assert dash.play.value == 3  # Play follows time travel


def test_play_is_disabled_with_step_once_the_scenario_is_done(dash):
    dash.play.value = len(dash.run.steps)
    assert dash.run.done and dash.step_button.disabled and dash.play.disabled
    dash.back_button.click()
    assert not dash.run.done and not dash.play.disabled


@pytest.mark.slow
def test_eviction_scenario_shows_evictions_and_changes_the_lru_picture(dash):
    dash.scenario_picker.value = "eviction"
    assert dash.run.scenario.name == "eviction" and dash.run.num_pages == 12
    assert dash.pages_slider.value == 12
    dash.open_tab("LRU order")
    lru_pictures = {bytes(dash.lru.value)}
    while not dash.run.done:
        dash.step_button.click()
        lru_pictures.add(bytes(dash.lru.value))
    assert "evict" in dash.event_log.value and "prefix hit" in dash.event_log.value
    assert len(lru_pictures) > 3
    assert dash.run.pool.stats.evictions > 0
    # every request finished: Step is off, and pressing it anyway changes nothing
    assert dash.step_button.disabled and not dash.run.seqs.sequences
    steps = step_number(dash)
    dash.step_button.click()
    assert step_number(dash) == steps
    assert "The scenario has ended. Press Reset to start again." in dash.caption.value
    assert "step 18 of 18" in dash.step_counter.value and "done" in dash.step_counter.value
    assert dash.decode_button.disabled  # nothing live to decode either
    dash.prompt.value = "more"
    dash.add_button.click()  # a live request gives Decode all something to do
    assert dash.step_button.disabled and not dash.decode_button.disabled
    assert "step 18 of 18" in dash.step_counter.value  # the total never grows


@pytest.mark.slow
@pytest.mark.parametrize("name, word", [("parallel", "copy-on-write"), ("preempt", "preempt")])
def test_event_log_names_copy_on_write_and_preemption(dash, name, word):
    dash.load(name)
    while not dash.run.done:
        dash.step_button.click()
    assert word in dash.event_log.value


def test_add_request_sharing_a_prefix(dash):
    dash.step_button.click()  # request_A: 18 tokens, K/V computed
    dash.prefix_picker.value = "request_A"
    dash.prompt.value = " and more"
    dash.add_button.click()
    seqs = dash.run.seqs
    assert "yours1" in seqs and seqs.get("yours1").num_cached_tokens == 16  # A's 4 full pages
    assert seqs.block_table("yours1")[:4] == [0, 1, 2, 3]
    assert all(dash.run.pool.ref_count(p) == 2 for p in range(4))
    # request_A still holds pages 0-3 (ACTIVE): the log says the hit shares them, with whom
    shares = "prefix hit shares pages 0, 1, 2, 3 for yours1 (ACTIVE, held by request_A too)"
    assert shares in dash.event_log.value
    assert ("yours1", "yours1") in [(label, value) for label, value in dash.seq_picker.options]


def test_log_groups_a_copy_on_write_and_tells_revived_hits(dash):
    dash.goto(23)  # request_B holds 7 pages, its last one (page 11) partial
    dash.seq_picker.value = "request_B"
    dash.fork()
    dash.decode_all()  # the first to write into the shared last page copies it
    words = [text for _, text in dash.run.records[-1].entries(grouped=True)]
    table = dash.run.seqs.block_table("request_B")
    assert words[0] == "copy-on-write for request_B: its last page 11 is shared, so it writes into a copy"
    assert (
        words[1]
        == f"– allocate page {table[-1]} for its copy of the shared last page (room for its tokens 25-28)"
    )
    assert words[2] == f"– copy the K/V of page 11 into page {table[-1]}" and table[-1] != 11
    hits = [text for _, text in dash.run.records[22].entries(grouped=True) if "prefix hit" in text]
    assert hits == [
        "prefix hit pages 0, 1, 2, 3 for request_B (revived from CACHED, in block-table order)"
    ]  # A had finished
    assert dash.run.records[22].lines()[0] == "prefix hit pages 0, 1, 2, 3 for request_B"  # printed cells


def test_add_request_refuses_an_empty_prompt(dash):
    dash.prompt.value = ""
    dash.prefix_picker.value = None
    dash.add_button.click()
    assert dash.run.history == [] and "needs a text" in dash.caption.value


def test_fork_and_finish(dash):
    dash.step_button.click()
    active = dash.run.pool.num_active_pages
    dash.seq_picker.value = "request_A"
    dash.fork_button.click()
    child = "request_A.f1"
    assert dash.run.seqs.block_table(child) == dash.run.seqs.block_table("request_A")
    assert dash.run.pool.num_active_pages == active  # a fork takes no page
    assert all(dash.run.pool.ref_count(p) == 2 for p in range(5))
    dash.seq_picker.value = "request_A"
    dash.finish_button.click()
    assert "request_A" not in dash.run.seqs
    assert all(dash.run.pool.ref_count(p) == 1 for p in range(5))
    dash.seq_picker.value = child
    dash.finish_button.click()
    snap = dash.run.seqs.snapshot()
    assert [PageState(s) for s in snap.state[:5]] == [PageState.CACHED] * 4 + [PageState.FREE]
    assert dash.fork_button.disabled and dash.finish_button.disabled  # no live sequence left


@pytest.mark.slow
def test_sliders_rebuild_the_pool_and_replay_what_was_done(dash):
    dash.step_button.click()
    dash.prompt.value = "mine"
    dash.add_button.click()  # an action of the learner's own
    dash.pages_slider.value = 32
    assert dash.run.pool.num_pages == 32 and step_number(dash) == 1
    assert "yours1" in dash.run.seqs and "your 1 action" in dash.caption.value  # replayed
    dash.page_size_slider.value = 8
    assert dash.run.pool.page_size == 8 and dash.run.scenario.name == "walkthrough"
    assert dash.run.seqs.block_table("request_A") == [0, 1, 2]  # 18 tokens / 8 per page
    assert "yours1" in dash.run.seqs and step_number(dash) == 1
    dash.step_button.click()
    assert step_number(dash) == 2


@pytest.mark.slow
def test_scenario_done_then_decode_all_decodes_every_live_sequence(dash):
    dash.load("fill")
    while not dash.run.done:
        dash.step_button.click()
    dash.seq_picker.value = "alpha"
    dash.finish_button.click()  # frees pages, so everyone can grow again
    before = {s: dash.run.seqs.get(s).num_tokens for s in dash.run.seqs.sequences}
    dash.step_button.click()  # refused: the scenario is over
    assert {s: dash.run.seqs.get(s).num_tokens for s in dash.run.seqs.sequences} == before
    assert "or Decode all to give every live sequence one more token" in dash.caption.value
    dash.decode_button.click()
    after = {s: dash.run.seqs.get(s).num_tokens for s in dash.run.seqs.sequences}
    assert after == {s: n + 1 for s, n in before.items()}
    n = len(dash.run.steps)
    assert f"step {n} of {n}" in dash.step_counter.value


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_scenario_ends_at_its_last_step_with_a_total_that_never_grows(name):
    dash = Dashboard(name)
    total = len(dash.run.steps)
    seen = []
    while not dash.step_button.disabled:
        dash.step_button.click()
        seen.append(dash.step_counter.value)
        assert len(seen) <= total
    assert [int(re.search(r"of (\d+)", v).group(1)) for v in seen] == [total] * total
    assert [step_number_of(v) for v in seen] == list(range(1, total + 1))
    assert "done" in seen[-1] and all("done" not in v for v in seen[:-1])
    assert len(re.findall(r"(?<!scheduler )\bstep\b", seen[-1])) == 1  # one counter in the header
    assert dash.play.max == dash.step_slider.max == total


def step_number_of(html_text: str) -> int:
    return int(re.search(r"step (\d+)", html_text).group(1))


# A step's heading, then its entries: (kind, colour, text), kind "step" for a heading.
LOG_LINE = re.compile(r"<div class='pagedkv-log-(\w+)' style='(?:color:(#\w+))?[^']*'>(.*?)</div>")


def _log_entries(log: str) -> list[tuple[str, str, str, str]]:
    """(kind, colour, the heading of its step, text) of every entry of the event log."""
    out, heading = [], ""
    for kind, colour, text in LOG_LINE.findall(log):
        if kind == "step":
            heading = re.sub(r"<[^>]+>", "", text)
        else:
            out.append((kind, colour, heading, text))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["walkthrough", "preempt"])
def test_event_log_is_newest_step_first_cause_before_effect_and_coloured_by_kind(name):
    dash = Dashboard(name)
    while not dash.step_button.disabled:
        dash.step_button.click()
    lines = _log_entries(dash.event_log.value)
    steps = [int(re.search(r"\d+", label).group()) for _, _, label, _ in lines]
    assert steps == sorted(steps, reverse=True) and steps[0] == len(dash.run.steps)
    colours: dict[str, str] = {}
    for kind, colour, _, _ in lines:
        assert colours.setdefault(kind, colour) == colour  # one colour per kind
    assert len(set(colours.values())) >= 3
    for record in dash.run.records:  # a preemption is logged before the release it causes
        entries = record.entries()
        for i, (kind, text) in enumerate(entries):
            if kind == "preempt":
                victim = text.split()[1].rstrip(":")
                released = [t for k, t in entries[:i] if k in ("cache", "free")]
                assert not [t for t in released if t.endswith(f"for {victim}")]
                assert any(t.endswith(f"for {victim}") for k, t in entries[i:] if k in ("cache", "free"))
    if name == "walkthrough":  # the eviction that makes room comes before the page it gives
        text = [t for _, _, label, t in lines if label == "step 59"]
        assert text[0].startswith("evict") and text[1].startswith("allocate")
        assert "appends" in text[2]
    else:
        assert "preempt" in colours


def test_step_slider_and_play_jump_and_keep_the_learners_actions(dash):
    dash.step_slider.value = 10
    assert step_number(dash) == 10 and dash.run == dash.run  # same run object kept
    reference = fresh("walkthrough", 10)
    assert dash.run.snapshots[-1] == reference.snapshots[-1]
    dash.prompt.value = "mine"
    dash.add_button.click()
    dash.step_slider.value = 15
    dash.step_slider.value = 12  # backwards: a replay that keeps the action taken at step 10
    assert step_number(dash) == 12 and "yours1" in dash.run.seqs
    dash.step_slider.value = 5  # before the action: it is gone
    assert step_number(dash) == 5 and "yours1" not in dash.run.seqs
    assert dash.run.snapshots[-1] == fresh("walkthrough", 5).snapshots[-1]
    dash.speed.value = 300
    assert dash.play.interval == 300


def test_switching_scenario_asks_before_discarding_the_learners_actions(dash):
    dash.step_button.click()
    dash.prompt.value = "mine"
    dash.add_button.click()
    dash.scenario_picker.value = "fill"
    assert dash.run.scenario.name == "walkthrough" and dash.confirm.layout.display == "flex"
    # the question names the scenario asked for; the picker still names the one running, and
    # the question takes the stepping row's place (the dashboard does not grow)
    assert "Switch to “Sequences grow" in dash.confirm_text.value
    assert dash.scenario_picker.value == "walkthrough" and dash.stepping_row.layout.display == "none"
    dash.stay_button.click()
    assert dash.scenario_picker.value == "walkthrough" and "yours1" in dash.run.seqs
    assert dash.stepping_row.layout.display == "" and dash.confirm.layout.display == "none"
    dash.scenario_picker.value = "fill"
    dash.discard_button.click()
    assert dash.run.scenario.name == "fill" and dash.run.history == []
    assert dash.confirm.layout.display == "none"


def test_the_lifecycle_picture_changes_with_the_transitions_of_the_last_step(dash):
    dash.open_tab("Page life")
    first = bytes(dash.lifecycle.value)
    dash.step_button.click()  # request_A: allocate
    assert dash._taken == ["allocate"] and bytes(dash.lifecycle.value) != first
    dash.step_slider.value = 59
    assert dash._taken == ["evict"]


def test_bad_arguments():
    with pytest.raises(ValueError, match="scenario must be one of"):
        Dashboard("nope")
    with pytest.raises(ValueError, match="num_pages"):
        Dashboard(num_pages=0)


@pytest.mark.slow
def test_bench_ui_quick_reports_step_times(tmp_path):
    path = tmp_path / "ui.json"
    done = subprocess.run(
        [sys.executable, "-m", "pagedkv", "bench", "ui", "--quick", "--json", str(path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "target <= 50 ms per step at 256 pages" in done.stdout
    data = json.loads(path.read_text())["data"]
    assert set(data) == {"64", "256"}
    for tabs in data.values():  # each pool timed with the default tab, More views and LRU open
        assert set(tabs) == {"Pool and log", "More views", "LRU order"}
        for row in tabs.values():
            assert 0 < row["render_ms"] < row["step_ms"] and row["live_sequences"] > 0


def test_a_refused_action_of_yours_is_not_counted_and_a_bare_fork_releases_nothing(dash):
    """The header's "your actions: N (r refused)" counts every press, a refused Add request among
    the refused, and its log heading says "refused". A fork finished before it wrote
    holds no page of its own: the log says so instead of "its 0 own pages were released"."""
    for _ in range(5):
        dash.step_button.click()
    dash.seq_picker.value = "request_A"
    dash.fork_button.click()
    dash.prompt.value = "x" * 400  # more than the pool holds: refused
    dash.add_button.click()
    assert dash.run.records[-1].note.startswith("refused")
    header = re.sub(r"<[^>]+>", "", dash.step_counter.value)
    assert f"step 5 of {len(dash.run.steps)} · your actions: 2 (1 refused)" in header  # fork + refused Add
    assert "your actions: 2 (1 refused)" in dash.status.value  # the status line says it the same way
    log = re.sub(r"<[^>]+>", "", dash.event_log.value)
    assert log.count("your action, refused, (after scenario step 5)") == 1  # the log says which
    assert log.count("your action (after scenario step 5)") == 1  # the fork
    dash.seq_picker.value = "request_A.f1"
    dash.finish_button.click()
    note = dash.run.records[-1].note
    shared = len(dash.run.snapshots[-2].block_tables["request_A.f1"])  # all its parent's
    assert shared > 1 and "no page of its own" in note and "0 own pages" not in note, note
    assert f"{shared} shared pages stay" in note, (note, shared)


def test_the_counter_counts_the_learners_own_actions_and_back_says_what_it_undid(dash):
    for _ in range(5):
        dash.step_button.click()
    dash.seq_picker.value = "request_A"
    dash.fork_button.click()
    dash.decode_button.click()
    counter = re.sub(r"<[^>]+>", "", dash.step_counter.value)
    assert counter == f"step 5 of {len(dash.run.steps)} · your actions: 2"
    assert "2 actions of your own" in dash.step_counter.value  # its tooltip says it in full
    dash.back_button.click()  # undoes Decode all: the scenario stays at step 5
    counter = re.sub(r"<[^>]+>", "", dash.step_counter.value)
    assert counter == f"step 5 of {len(dash.run.steps)} · your actions: 1"
    assert "1 action of your own" in dash.step_counter.value
    assert "Back undid your own action" in dash.caption.value and dash.run.cursor == 5
    dash.back_button.click()
    dash.back_button.click()  # now a scenario step: no message, the step moves
    assert re.sub(r"<[^>]+>", "", dash.step_counter.value).startswith("step 4 of")
    assert "Back undid" not in dash.caption.value


def test_a_step_is_drawn_in_a_visible_busy_state_and_step_stays_pressable(dash):
    """While a step is drawn the header says "drawing…" and Reset is disabled, but Step stays
    enabled: a browser drops clicks on a disabled button, so quick clicks would be lost; kept
    enabled, each click waits in the kernel's queue and is one step (the browser test clicks
    fast and counts)."""
    seen = []
    dash.busy_note.observe(lambda change: seen.append(("note", change["new"])), names="value")
    for button in (dash.step_button, dash.reset_button):
        button.observe(lambda change, b=button: seen.append((b.description, change["new"])), names="disabled")
    dash.step_button.click()
    assert step_number(dash) == 1
    assert seen[0][0] == "note" and "drawing" in seen[0][1]
    assert ("Reset", True) in seen and (dash.step_button.description, True) not in seen
    assert seen[-1] == ("note", "") and not dash.reset_button.disabled
    for _ in range(3):
        dash.step_button.click()  # clicks that waited in the queue: one step each
    assert step_number(dash) == 4
    dash.reset_button.click()
    assert step_number(dash) == 0 and not dash.reset_button.disabled and dash.back_button.disabled


def test_the_compact_layout_shows_one_view_under_the_step_button_and_the_actions_under_it(dash):
    main = next(c for c in dash.children if isinstance(c, widgets.HBox) and dash.heatmap in c.children)
    assert list(main.children) == [dash.heatmap, dash.event_log]
    kids = list(dash.children)
    picker = kids.index(dash.view_picker)
    assert kids.index(dash.caption) < picker  # the tabs come right under Step and the caption ...
    assert kids[picker + 1 : picker + 1 + len(dash.panes)] == list(dash.panes.values())  # ... then the views
    assert dash.lru in kids and dash.lifecycle in kids and dash.fork_button in kids[-1].children[-1].children
    for title in dash.view_picker.options:  # one view shown at a time, in the same place
        dash.open_tab(title)
        shown = [name for name, pane in dash.panes.items() if pane.layout.display != "none"]
        assert shown == [title]


def test_hidden_tabs_are_drawn_when_opened_to_the_same_pictures(dash):
    """A step draws the open tab's picture only; opening a tab later draws the same bytes a
    dashboard with that tab open all along shows."""
    eager = Dashboard()
    eager.open_tab("LRU order")
    assert not dash.lru.value and not dash.more_views.value and not dash.lifecycle.value
    for _ in range(30):
        dash.step_button.click()
        eager.step_button.click()
    assert not dash.lru.value  # never opened: never drawn
    dash.open_tab("LRU order")
    assert bytes(dash.lru.value) == bytes(eager.lru.value)
    dash.open_tab("More views")
    more = bytes(dash.more_views.value)
    dash.open_tab("Pool and log")
    assert dash.more_views.layout.display == "none" and dash.panes["Pool and log"].layout.display == ""
    dash.step_button.click()
    assert bytes(dash.more_views.value) == more  # hidden: left as it was
    dash.view_picker.value = "More views"  # a click on the tab
    assert bytes(dash.more_views.value) != more
    with pytest.raises(ValueError, match="title must be one of"):
        dash.open_tab("no such tab")


def test_plays_stop_button_stops_where_the_dashboard_is(dash):
    """ipywidgets' ■ sets Play's value to its `min`: the learner pressing it as pause must
    stay at the step reached, not go back to step 0."""
    dash.play.value = 38  # played to 38
    assert dash.play.min == 38 and step_number(dash) == 38
    dash.play.value = dash.play.min  # what ■ does in the browser
    assert step_number(dash) == 38
    dash.back_button.click()  # and after time travel too
    dash.play.value = dash.play.min
    assert step_number(dash) == 37 and dash.play.max == len(dash.run.steps)
    dash.load("prefix")  # a shorter scenario: Play's range follows
    assert dash.play.min == 0 and dash.play.max == len(dash.run.steps)


def test_the_pool_size_sliders_are_disabled_while_the_pool_is_rebuilt(dash):
    seen = []
    dash.pages_slider.observe(lambda change: seen.append(change["new"]), names="disabled")
    dash.pages_slider.value = 20
    assert seen == [True, False] and dash.run.num_pages == 20  # one notch at a time
    assert not dash.pages_slider.disabled and not dash.page_size_slider.disabled


def test_the_scenario_picker_is_wide_enough_for_the_longest_title(dash):
    from pagedkv.scenarios import SCENARIOS

    longest = max(len(s.title) for s in SCENARIOS.values())
    assert int(dash.scenario_picker.layout.width.removesuffix("px")) >= 8 * longest + 120


@pytest.mark.parametrize("num_pages", [4, 12, 16, 20, 24, 31, 40, 64, 100, 256])
def test_the_main_picture_fits_its_place_its_text_reads_at_14_px_and_its_ids_fit(num_pages):
    """Beside the log on a 1280x720 screen the main picture has about 560 x 330 px (the file
    browser open): it never takes more height (the tab bar and your actions stay on screen),
    its text is >= 14 px when shown 560 px wide at most, a page id is never shortened with
    "…", and a pool of a few rows of pages gets large cells (>= 28 px for two rows, 16 for
    three), not a strip of small ones with empty room under it."""
    from pagedkv.viz.glyphs import fit_text
    from pagedkv.viz.grid import grid_shape
    from pagedkv.viz.main_picture import BESIDE_PX, MAIN_HEIGHT_PX, MAIN_PX, main_heatmap
    from pagedkv.viz.palette import SequencePalette

    run = ScenarioRun("walkthrough", num_pages=max(num_pages, 12), page_size=4)
    while run.can_step and run.cursor < 8:
        run.step()
    heatmap = main_heatmap(run.num_pages, run.page_size, SequencePalette())
    heatmap.update(run.snapshots[-1])
    width, height = heatmap.size
    assert width <= MAIN_PX and height <= MAIN_HEIGHT_PX, heatmap.size
    shown = min(1, BESIDE_PX / width)  # BESIDE_PX: its width beside the log, the file browser open
    assert heatmap.min_font_px * shown >= 14, heatmap.size
    if heatmap.labelled:  # page ids in the cells: whole, and >= 12 px as shown
        assert heatmap._frame.label_px * shown >= 12, heatmap._frame.label_px  # noqa: SLF001
    assert heatmap._frame.cut_texts == ()  # noqa: SLF001
    frame = heatmap._frame  # noqa: SLF001
    for panel in heatmap.panels.values():
        if heatmap.labelled:  # each page id stamped whole inside its cell
            assert not [label for label in panel.labels if "…" in label], panel.view
            cut = [x for x in panel.labels if fit_text(x, frame.label_px, frame.label_room) != x]
            assert not cut, (panel.view, cut)
    rows, cols = grid_shape(run.num_pages)
    if rows <= 3:
        assert heatmap._frame.cell_px >= 16 + 12 * (rows < 3), heatmap._frame.cell_px  # noqa: SLF001
        assert height >= 0.9 * MAIN_HEIGHT_PX  # the picture uses the height it has


def test_the_caption_says_when_an_action_of_your_own_was_refused(dash):
    """After a refused action the picture shows no change: the caption says so and why, in the
    words of the log, instead of describing the scenario's last step."""
    dash.goto(44)
    scenario_caption = dash.caption.value
    dash.prompt.value = "x" * 60  # 15 new pages: 0 FREE and 4 evictable CACHED cannot hold them
    dash.add_request()
    record = dash.run.records[-1]
    assert record.own and record.note.startswith("refused")
    assert "your action" in dash.caption.value and html.escape(record.note) in dash.caption.value
    assert dash.caption.value != scenario_caption
    dash.back_button.click()  # back at step 44: the scenario's caption, then what Back did
    assert dash.caption.value.startswith(scenario_caption[: -len("</div>")])
    assert "refused" not in dash.caption.value


def test_a_pool_too_small_for_any_prompt_is_not_called_full():
    """Sliders at 4 pages of 1 slot: every prompt of `fill` is refused, so the last step has
    nothing to decode. The caption must say that, not the scenario's "the pool is full"
    narration: the picture shows every page FREE."""
    board = Dashboard("fill")
    board.pages_slider.value, board.page_size_slider.value = 4, 1
    board.goto(len(board.run.steps))
    last = board.run.records[-1]
    assert last.note.startswith("nothing to decode") and board.run.pool.num_free_pages == 4
    assert "the pool is full" not in board.caption.value
    assert html.escape(last.note) in board.caption.value


def test_on_a_resized_pool_the_caption_says_whose_story_it_tells():
    """A scenario's captions were written for its own pool: on another size (the sliders, and
    after Reset, which keeps the size) the caption says so; back on its own size it does not."""
    dash = Dashboard("eviction")
    dash.resize(13, 8)
    dash.step()
    caption = dash.caption.value
    assert "captions written for the" in caption and "12 × 4 pool" in caption
    dash.reset()
    assert "same pool size" in dash.caption.value and "12 × 4 pool" in dash.caption.value  # says so
    assert (dash.run.num_pages, dash.run.page_size) == (13, 8)  # Reset keeps the size
    dash.resize(12, 4)
    dash.step()
    assert "captions written for the" not in dash.caption.value


def test_the_log_names_each_slot_with_its_page_and_place(dash):
    """A slot number is pool-wide (page × page size + place): the log says the page and place."""
    for _ in range(4):  # step 4: request_A's token 21, the first in page 5
        dash.step_button.click()
    log = re.sub(r"<[^>]+>", "", dash.event_log.value)
    slot = dash.run.records[-1].slots["request_A"]
    assert slot == 5 * 4 + 0
    assert "appends its token 21, " in log and f"in slot {slot} (page 5, place 0)" in log


def test_switching_with_only_scenario_steps_asks_nothing_and_says_step_0(dash):
    """Scenario steps replay with Step, so losing them needs no question; the caption then
    says the new scenario starts at step 0. With an action of your own it asks, and the
    question names only your actions."""
    dash.step_button.click()
    dash.scenario_picker.value = "fill"
    assert dash.run.scenario.name == "fill" and dash.confirm.layout.display == "none"
    assert "new scenario, at step 0: " in dash.caption.value and dash.run.cursor == 0
    dash.step_button.click()
    assert "new scenario" not in dash.caption.value
    dash.prompt.value = "mine"
    dash.add_button.click()
    dash.scenario_picker.value = "walkthrough"
    assert "You would lose your 1 action (a scenario's steps replay with Step)." in dash.confirm_text.value
    assert "step 1" not in dash.confirm_text.value
    dash.reset_button.click()
    assert "new scenario" not in dash.caption.value


def test_status_line_counts_active_of_all_pages_and_names_cached_apart(dash):
    """ "ACTIVE k of N pages (u%)": CACHED and FREE are counted apart, never called free."""
    dash.goto(23)
    snap = dash.run.snapshots[-1]
    counts = [int((snap.state == s).sum()) for s in (PageState.ACTIVE, PageState.CACHED, PageState.FREE)]
    text = re.sub(r"<[^>]+>", "", dash.status.value)
    assert f"ACTIVE {counts[0]} of 16 pages ({counts[0] / 16:.0%})" in text
    assert f"CACHED {counts[1]} (reusable or evictable) · FREE {counts[2]}" in text
    assert "count as free" not in text and "prefix hits 16 of 43 tokens looked up at admission" in text
    assert "at every admission" in html.unescape(dash.status.value)  # the tooltip says what is counted


def test_the_log_says_tokens_count_from_1_and_slots_from_0(dash):
    dash.step_button.click()
    assert "tokens count from 1, slots from 0" in dash.event_log.value
    assert "slots and places count from 0" in dash.event_log.value


def test_your_request_is_never_coloured_like_cached_orange(dash):
    from pagedkv.viz.palette import YOURS_COLORS

    dash.prompt.value = "mine"
    dash.add_button.click()
    color = dash.palette.color("yours1")
    assert color == YOURS_COLORS[0] and color not in {"#DDCC77", "#BBCC33"}
    used = {dash.palette.color(s) for s in ("request_A", "request_B")}
    assert color not in used


def test_done_stays_inside_the_headers_one_unbreakable_line():
    """A learner forked beam.0 at the beam scenario's last step: the header read "step 9 of 9 ·
    your actions: 1 ·" and "done" wrapped onto a second line. "done" is now inside the
    counter's nowrap part, so the header is one line (the scenario picker narrows instead)."""
    beam = Dashboard("beam")
    beam.goto(len(beam.run.steps))
    beam.seq_picker.value = "beam.0"
    beam.fork()
    value = beam.step_counter.value
    nowrap = re.search(r"<b style='white-space:nowrap'>(.*?)</b>", value)
    assert nowrap and nowrap.group(1) == "step 9 of 9 · your actions: 1 · done", value
    assert value.endswith(f"{nowrap.group(0)}</span>")  # nothing after it that could wrap
