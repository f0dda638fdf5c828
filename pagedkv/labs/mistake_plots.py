"""Axis options for notebook 08's per-request pictures: ticks, range, a log y axis and a
larger type size, set here so a cell passes options instead of plotting plumbing.

`room(fig, xticks=[1, 4, 8])` returns the figure with those x ticks and every text at
least `min_pt` points (16 pt at 110 dpi stays above 16 px when JupyterLab shrinks the
picture to an 850 px column). `markers_only=True` drops the lines between markers, for
values that are separate elements, not a curve."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Text

ROOM_PT = 16.0
LegendLoc = Literal["upper left", "upper right", "lower left", "lower right", "center left", "center right"]


def room(
    fig: Figure,
    xticks: Sequence[int] | None = None,
    ylim: tuple[float, float] | None = None,
    yticks: Sequence[float] | None = None,
    log_y: bool = False,
    legend_loc: LegendLoc | None = None,
    min_pt: float = ROOM_PT,
    markers_only: bool = False,
    xlabel: str | None = None,
    height_in: float | None = None,
) -> Figure:
    """`fig` (changed in place, returned) with its first axes' options set and every text of
    every axes raised to `min_pt`. With `log_y`, `yticks` are labelled as the counts
    themselves ("1,000", not "10^3") and minor ticks are dropped. With `markers_only`, every
    line that has markers (legend keys included) keeps its markers and loses its line.
    `xlabel` replaces every axes' x label; `height_in` sets the figure's height (inches), room
    for the ticks of larger type."""
    ax = fig.axes[0]
    if log_y:
        ax.set_yscale("log")
    if xticks is not None:
        ax.set_xticks(list(xticks))
    if yticks is not None:
        ax.set_yticks(list(yticks), [f"{y:,}" for y in yticks])
    if log_y:
        ax.minorticks_off()
    if ylim is not None:
        ax.set_ylim(*ylim)
    legend = ax.get_legend()
    if legend_loc is not None and legend is not None:
        legend.set_loc(legend_loc)
    _restyle(fig, markers_only, xlabel, height_in)
    for axes in fig.axes:
        axes.tick_params(labelsize=min_pt)
    for text in fig.findobj(Text):
        if text.get_text().strip():
            text.set_fontsize(max(text.get_fontsize(), min_pt))
    return fig


def _restyle(fig: Figure, markers_only: bool, xlabel: str | None, height_in: float | None) -> None:
    """`room`'s figure-wide options: lines dropped between markers, every x label, the height."""
    if xlabel is not None:
        for axes in fig.axes:
            axes.set_xlabel(xlabel)
    if height_in is not None:
        fig.set_size_inches(fig.get_size_inches()[0], height_in)
    if markers_only:
        for line in fig.findobj(Line2D):
            if line.get_marker() not in (None, "None", "", " "):
                line.set_linestyle("None")
