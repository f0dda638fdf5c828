"""Notebook 00's dashboard text: the copy-on-write recipe and the slot example it quotes,
replayed on a real Dashboard and a real run."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from pagedkv import TinyLM
from pagedkv.scenarios import ScenarioRun
from pagedkv.viz import Dashboard
from pagedkv.viz.controls import PROMPT_TEXT

NB00 = Path(__file__).resolve().parent.parent / "notebooks" / "00_start_here.ipynb"


def dashboard_text() -> str:
    cells = nbformat.read(NB00, as_version=4).cells
    return next(c.source for c in cells if c.get("id") == "dashboard-parts")


def press(step: int, prefix: str) -> Dashboard:
    """Add request (with `prefix`, "" for none), Fork, Decode all, at `step`."""
    dash = Dashboard("walkthrough")
    dash.goto(step)
    dash.prefix_picker.value = prefix
    dash.add_request()
    dash.fork()
    dash.decode_all()
    return dash


@pytest.mark.parametrize("step", [0, 10, 22])
def test_the_copy_on_write_recipe_makes_one_copy(step):
    text = " ".join(dashboard_text().split())
    assert "with Prefix of (none), **Add request** (13 tokens" in text
    assert "**Fork**, then **Decode all**: the status line counts 1." in text
    page_size = Dashboard("walkthrough").run.pool.config.page_size
    tokens = len(TinyLM.pretrained().encode(PROMPT_TEXT))
    assert tokens == 13 and tokens % page_size  # the last page is part full
    assert press(step, "").run.pool.stats.cow_copies == 1


def test_with_a_prefix_that_fills_the_last_page_there_is_no_copy():
    # at step 2 request_A holds 19 tokens: 19 + 13 = 32 fill 8 pages, so each copy's next token
    # gets a new page and nothing is copied (the recipe's "(none)" matters)
    run = ScenarioRun("walkthrough")
    run.goto(2)
    assert run.seqs.get("request_A").num_tokens == 19
    assert press(2, "request_A").run.pool.stats.cow_copies == 0


def test_the_slot_example_is_the_logs():
    assert "`request_A`'s token 19\n  goes to slot 18: page 4, place 2." in dashboard_text()
    run = ScenarioRun("walkthrough")
    run.step()  # step 1: the 18-token prompt
    run.step()  # step 2: its token 19
    assert run.seqs.block_table("request_A")[4] == 4
    assert any("token 19," in line and "in slot 18" in line for line in run.records[-1].lines())
    assert 4 * run.pool.config.page_size + 2 == 18  # slot = page x page_size + place


def test_the_recipe_says_reset_first_because_step_43_has_no_page_left():
    # a learner who followed "step it to 43" got no copy: the text must send them back first
    assert "press **Reset** first" in " ".join(dashboard_text().split())
    late = press(43, "")
    assert late.run.pool.stats.cow_copies == 0 and late.run.pool.num_free_pages == 0
    dash = press(43, "")
    dash.reset()
    dash.prefix_picker.value = ""
    dash.add_request()
    dash.fork()
    dash.decode_all()
    assert dash.run.pool.stats.cow_copies == 1
