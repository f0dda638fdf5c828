"""Notebook 01's split paged-against-contiguous pictures: page ids, marks a room can see, and
counts that are the run's own (checked against the snapshot and the contiguous cache)."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.collections import PathCollection
from matplotlib.text import Text

from pagedkv.core.page import PageState
from pagedkv.scenarios import ScenarioRun
from pagedkv.viz import contiguous_replay
from pagedkv.viz.two_memories import plot_share_bars, plot_two_memories

CELL_PX = 848  # a notebook's output width at 1280 px, as tests/test_figure_text.py


@pytest.fixture(scope="module")
def fill() -> ScenarioRun:
    run = ScenarioRun("fill")
    while not run.done:
        run.step()
    return run


def _texts(fig) -> list[str]:
    fig.canvas.draw()
    return [t.get_text() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def test_every_page_of_the_paged_grid_carries_its_id_once(fill):
    texts = _texts(plot_two_memories(fill.snapshots, "oracle", max_seq_len=64, step=9))
    assert sorted(t for t in texts if t.startswith("page ")) == sorted(f"page {p}" for p in range(16))


def test_the_marks_sit_on_the_empty_slots_and_show_at_least_12_px(fill):
    snap = fill.snapshots[9]
    fig = plot_two_memories(fill.snapshots, "oracle", max_seq_len=64, step=9)
    fig.canvas.draw()
    scale = fig.dpi / 72 * min(1.0, CELL_PX / (fig.get_size_inches()[0] * fig.dpi))
    paged_marks = [c for c in fig.axes[0].collections if isinstance(c, PathCollection)]
    # independent count: the empty slots of ACTIVE pages, from the snapshot's fill
    active = snap.state == PageState.ACTIVE
    empty = int((snap.page_size - snap.fill[active]).sum())
    assert sum(len(c.get_offsets()) for c in paged_marks) == empty == 3
    cache, _ = contiguous_replay(fill.snapshots, "oracle", 64, 9)
    hole = [len(c.get_offsets()) for c in fig.axes[1].collections if c.get_paths()]
    assert sum(hole) == 15 + 4 == sum(r.final_len - r.used for r in cache.accounting().reservations) + 4
    for c in [*paged_marks, *fig.axes[1].collections]:
        assert np.sqrt(c.get_sizes()).min() * scale >= 12  # marker side, in CSS px


def test_every_count_of_the_share_bars_is_written_inside_its_segment(fill):
    fig = plot_share_bars(fill.snapshots, "oracle", max_seq_len=64, step=9)
    ax = fig.axes[0]
    fig.canvas.draw()
    numbers = {(round(t.get_position()[1]), t.get_text()) for t in ax.texts}
    assert numbers == {(1, "45"), (1, "3"), (1, "16"), (0, "45"), (0, "15"), (0, "4")}
    for t in ax.texts:
        x, y = t.get_position()
        inside = [
            b
            for b in ax.patches
            if b.get_y() <= y <= b.get_y() + b.get_height()
            and b.get_x() <= x <= b.get_x() + b.get_width()
            and b.get_width() == int(t.get_text())
        ]
        assert inside, t.get_text()
