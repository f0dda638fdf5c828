"""The Pool size sliders take effect at once, at any step, and say so; the icon-only Play
widget has a tooltip.

Oracle: a fresh `ScenarioRun` built on the new geometry and stepped as far, with no
dashboard involved, and ⌈tokens / page size⌉ for a block table's length.
"""

from __future__ import annotations

import math

import pytest

from pagedkv.scenarios import ScenarioRun
from pagedkv.viz import Dashboard


def stepped(name: str, num_pages: int, page_size: int, steps: int) -> ScenarioRun:
    run = ScenarioRun(name, num_pages, page_size)
    for _ in range(steps):
        run.step()
    return run


@pytest.mark.parametrize("steps", [0, 4, 9, 16])  # before, after the forks, mid-decode, done
def test_page_size_slider_rebuilds_parallel_at_once_at_any_step(steps):
    dash = Dashboard("parallel")
    dash.play.value = steps  # as Play would
    assert dash.run.cursor == steps
    dash.page_size_slider.value = 10
    assert (dash.run.num_pages, dash.run.page_size) == (20, 10) and dash.run.cursor == steps
    want = stepped("parallel", 20, 10, steps).seqs.snapshot()
    assert dash.run.seqs.snapshot() == want
    for seq_id, table in want.block_tables.items():
        assert len(table) == math.ceil(len(dash.run.seqs.get(seq_id).token_ids) / 10)
    said = f"rebuilt on 20 pages × 10 slots and replayed step {steps} of 16"
    assert said in dash.caption.value  # the line under the buttons, above every tab
    assert "20 pages × 10 slots" in dash.geometry_note.value  # in the Pool size tab itself
    assert not dash.page_size_slider.disabled and not dash.pages_slider.disabled


def test_geometry_note_follows_both_sliders_and_a_scenario_switch():
    dash = Dashboard("beam")
    dash.open_tab("Pool size")
    dash.pages_slider.value = 30
    dash.page_size_slider.value = 10
    assert "30 pages × 10 slots" in dash.geometry_note.value
    assert dash.geometry_note in dash.panes["Pool size"].children
    dash.scenario_picker.value = "parallel"  # no actions of one's own: switches at once
    assert "20 pages × 4 slots" in dash.geometry_note.value
    assert dash.page_size_slider.value == 4


@pytest.mark.parametrize("num_pages", [16, 22])
def test_pool_size_tab_says_when_the_free_pages_run_out(num_pages):
    """The Pool size tab names the step where the scenario's own steps take the last FREE page
    and the first refused step. Oracle: a fresh run stepped one step at a time, its pool's
    FREE-page counter and each step's record read after every step."""
    dash = Dashboard("fill")
    dash.pages_slider.value = num_pages
    run = ScenarioRun("fill", num_pages, 4)
    full = refused = None
    for step in range(1, len(run.steps) + 1):
        record = run.step()
        full = full or (step if run.pool.num_free_pages == 0 else None)
        refused = refused or (step if record.refused else None)
    assert full is not None and refused is not None and refused > full  # the pool fills first
    said = f"the last FREE page goes at step {full} of {len(run.steps)}; the first refused step is {refused}."
    assert said in dash.geometry_note.value


def test_icon_only_controls_have_tooltips():
    dash = Dashboard("parallel")
    assert dash.play.tooltip.startswith("Play: step on by itself") and "Stop" in dash.play.tooltip
    for button in (dash.step_button, dash.back_button, dash.reset_button):
        assert button.description  # icon and a word: no tooltip needed
