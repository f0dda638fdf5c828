"""pagedkv.viz.mistake_figures: notebook 08's pictures carry the axis choices read back from
the axes, and every text stays at the projector's type size."""

from __future__ import annotations

import numpy as np
from matplotlib.colors import to_hex

from pagedkv.viz.chains import CROSSED
from pagedkv.viz.mistake_figures import (
    plot_available,
    plot_heap_entries,
    plot_lru_strip,
    plot_refusals,
    plot_two_queries,
)
from pagedkv.viz.palette import EVICTED_FILL, EVICTED_HATCH
from pagedkv.viz.projector import min_font_pt


def _labels(ticks) -> list[str]:
    return [t.get_text() for t in ticks]


def test_available_and_refusals_ticks() -> None:
    available = plot_available({"a": list(range(40)), "b": [32] * 40})
    ax = available.axes[0]
    assert list(ax.get_xticks()) == [1, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40]
    assert _labels(ax.get_yticklabels()) == ["0", "8", "16", "24", "32"]
    refusals = plot_refusals({"a": np.cumsum([0] * 12 + [1] * 28), "b": np.zeros(40)})
    ax = refusals.axes[0]
    assert _labels(ax.get_yticklabels()) == ["0", "7", "14", "21", "28"]  # ends at 28, evenly spaced
    assert ax.get_ylim() == (-1, 30)
    assert min(min_font_pt(available), min_font_pt(refusals)) >= 16


def test_heap_entries_log_axis() -> None:
    fig = plot_heap_entries({"naive": [8 * r for r in range(1, 501)], "pagedkv": [8] * 500})
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    assert _labels(ax.get_yticklabels()) == ["8", "100", "1,000", "4,000"]


def test_two_queries_markers_only() -> None:
    fig = plot_two_queries({"p": [[[1.0, 2.0]]], "q": [[[2.0, 1.0]]]})
    assert fig.get_size_inches()[1] == 4.0 and min_font_pt(fig) >= 18.5
    marked = [line for ax in fig.axes for line in ax.get_lines() if line.get_marker() not in ("None", "")]
    assert marked and all(line.get_linestyle() == "None" for line in marked)


def test_lru_strip_ranks_and_marks_the_evicted_pages() -> None:
    # section 4 by hand: request_A held pages 0-4; 0-3 CACHED, page 4 FREE; two evicted
    steps = {
        "one stamp": {"pages_a": [0, 1, 2, 3, 4], "lru_order": [0, 1, 2, 3], "evicted": [0, 1]},
        "pagedkv": {"pages_a": [0, 1, 2, 3, 4], "lru_order": [3, 2, 1, 0], "evicted": [3, 2]},
    }
    fig = plot_lru_strip(steps)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts[0] == "one stamp" and texts.index("pagedkv") == 11  # 1 name + 5 pages x 2
    assert texts[2:11:2] == ["#1, evicted", "#2, evicted", "#3", "#4", "FREE"]
    assert texts[13::2] == ["#4", "#3", "#2, evicted", "#1, evicted", "FREE"]
    boxes = fig.axes[0].patches
    hatched = [i for i, box in enumerate(boxes) if box.get_hatch()]
    assert hatched == [0, 1, 7, 8]  # the evicted pages' boxes, row by row
    # evicted pages look as they do in notebook 09: hatched grey, never CACHED orange
    assert {to_hex(boxes[i].get_facecolor()) for i in hatched} == {EVICTED_FILL.lower()}
    assert {boxes[i].get_hatch() for i in hatched} == {EVICTED_HATCH} == {CROSSED["evicted"]}
    # at 1280x720 JupyterLab shows it 848 px wide: at most 300 px tall, text at least 13 px
    width_px, height_px = fig.get_size_inches() * fig.dpi
    shown = 848 / width_px
    assert height_px * shown <= 300
    assert min_font_pt(fig) * fig.dpi / 72 * shown >= 13


def test_two_queries_axis_says_how_elements_count() -> None:
    fig = plot_two_queries({"p": [[[1.0, 2.0]]], "q": [[[2.0, 1.0]]]})
    assert all(ax.get_xlabel() == "element (head × 8 + index)" for ax in fig.axes)
