"""pagedkv.viz.mistake_figures: notebook 08's pictures carry the axis choices read back from
the axes, and every text stays at the projector's type size."""

from __future__ import annotations

import numpy as np

from pagedkv.viz.mistake_figures import (
    plot_available,
    plot_heap_entries,
    plot_refusals,
    plot_two_queries,
)
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
    assert _labels(ax.get_yticklabels()) == ["0", "10", "20", "28"]  # ends at 28 refused
    assert ax.get_ylim() == (-1, 30)
    assert min(min_font_pt(available), min_font_pt(refusals)) >= 16


def test_heap_entries_log_axis() -> None:
    fig = plot_heap_entries({"naive": [8 * r for r in range(1, 501)], "pagedkv": [8] * 500})
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    assert _labels(ax.get_yticklabels()) == ["8", "100", "1,000", "4,000"]


def test_two_queries_markers_only() -> None:
    fig = plot_two_queries({"p": [[[1.0, 2.0]]], "q": [[[2.0, 1.0]]]})
    assert all(ax.get_xlabel() == "output element" for ax in fig.axes)
    assert fig.get_size_inches()[1] == 4.0 and min_font_pt(fig) >= 18.5
    marked = [line for ax in fig.axes for line in ax.get_lines() if line.get_marker() not in ("None", "")]
    assert marked and all(line.get_linestyle() == "None" for line in marked)
