"""What new learners found misleading in the widgets and pictures: a release note listing
pages in another order than the log, an LRU key for an order that does not exist."""

from __future__ import annotations

import io
import re

import numpy as np
from matplotlib.colors import to_rgb
from PIL import Image

from pagedkv.scenarios import ScenarioRun
from pagedkv.viz.heatmap import plot_lru, plot_pool
from pagedkv.viz.palette import LRU_CMAP, VICTIM_COLOR


def test_a_finish_lists_the_pages_going_cached_in_the_order_the_pool_released_them():
    """The oracle: the record's own `cache` events, in the order the pool raised them."""
    for name in ("walkthrough", "prefix", "eviction"):
        run, seen = ScenarioRun(name), 0
        while run.can_step:
            record = run.step()
            said = re.search(r"pages? ([\d, ]+) go(?:es)? CACHED", record.note)
            if record.action.op != "free" or not said:
                continue
            cached = [e.page_id for e in record.events if e.kind == "cache"]
            assert [int(p) for p in said.group(1).split(", ")] == cached, (name, record.note)
            seen += len(cached) > 1
        assert name == "eviction" or seen, name  # an order was checked


def _pixels_near(png: bytes, color: tuple[float, float, float], tolerance: int = 6) -> int:
    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    target = np.round(np.array(color) * 255).astype(int)
    return int((np.abs(rgb - target).max(axis=2) <= tolerance).sum())


def _lru_key_pixels(png: bytes) -> tuple[int, int]:
    """Pixels of the eviction-order bar's light end (its other end is the CACHED orange, which
    the state view's legend shows too) and of the next-victim outline colour."""
    return _pixels_near(png, LRU_CMAP(0.0)[:3]), _pixels_near(png, to_rgb(VICTIM_COLOR))


def test_the_lru_picture_keys_an_eviction_order_only_when_a_page_is_cached():
    run = ScenarioRun("walkthrough")
    for _ in range(8):  # request_A holds pages; none is CACHED yet
        run.step()
    snap = run.snapshots[-1]
    assert not (snap.lru_rank >= 0).any()
    for heatmap in (
        plot_lru(snap, run.events, owners=True),
        plot_pool(snap, ("state", "lru"), events=run.events),
    ):
        assert _lru_key_pixels(heatmap.png()) == (0, 0)  # no bar, no "#1" swatch, no outline
        assert not heatmap._frame.cut_texts  # noqa: SLF001  # no label cut or overlapping
        while not (run.snapshots[-1].lru_rank >= 0).any():
            run.step()
        heatmap.update(run.snapshots[-1], run.events)  # the same heatmap, once pages are CACHED
        bar, victim = _lru_key_pixels(heatmap.png())
        assert bar > 100 and victim > 100  # the bar, and the outline and its legend swatch
        run = ScenarioRun("walkthrough")
        for _ in range(8):
            run.step()


def test_the_step_box_is_an_input_that_jumps_and_follows_the_step():
    import ipywidgets as widgets

    from pagedkv.viz import Dashboard

    dash = Dashboard()
    assert isinstance(dash.step_box, widgets.BoundedIntText) and dash.step_box.description == "go to step"
    assert not dash.step_slider.readout  # one place shows the step number: the box
    assert dash.step_box in dash.stepping_row.children
    dash.step_box.value = 7  # typed, then Enter
    assert dash.run.cursor == 7 and dash.step_slider.value == 7
    dash.step_button.click()
    assert dash.step_box.value == dash.run.cursor == 8
    assert dash.step_box.max == len(dash.run.steps)
