"""Notebook 08's five pictures, one call each: the series come from the cell, the axis
choices (ticks, range, log scale, type size) live here, set by `room`."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from pagedkv.core.page import PageState
from pagedkv.labs.mistake_plots import room
from pagedkv.viz.kernel import plot_query_outputs
from pagedkv.viz.palette import EVICTED_FILL, EVICTED_HATCH, STATE_COLORS
from pagedkv.viz.usage import plot_series

REQUEST = "request (1 = the first)"
ELEMENT = "element (head × 8 + index)"  # head 1's element 0 is 8
STRIP_PT = 14.0  # at 110 dpi, shown 848 px wide: about 15 px
FORTY_TICKS = [1, *range(4, 41, 4)]  # requests 1 to 40


def plot_available(series: dict[str, Sequence[float]]) -> Figure:
    """Section 2: FREE + CACHED pages after each of 40 requests on a 32-page pool."""
    figure = plot_series(
        series, REQUEST, "pages free to allocate", "FREE + CACHED pages after each request, 32-page pool"
    )
    return room(figure, xticks=FORTY_TICKS, ylim=(0, 34), yticks=range(0, 33, 8), legend_loc="center right")


def plot_refusals(series: dict[str, Sequence[float]]) -> Figure:
    """Section 3: requests refused so far, over 40 requests on a 32-page pool."""
    figure = plot_series(series, REQUEST, "requests refused so far", "the run of 40 requests, 32-page pool")
    return room(figure, xticks=FORTY_TICKS, ylim=(-1, 30), yticks=[0, 7, 14, 21, 28], legend_loc="upper left")


def plot_heap_entries(series: dict[str, Sequence[float]]) -> Figure:
    """Section 5: entries in the eviction structure over 500 requests, log y axis."""
    figure = plot_series(
        series, REQUEST, "entries (log scale)", "entries in the eviction structure, 32-page pool"
    )
    return room(
        figure, xticks=[1, 100, 200, 300, 400, 500], ylim=(5, 6000), yticks=[8, 100, 1000, 4000], log_y=True
    )


def plot_two_queries(panels: dict[str, Sequence]) -> Figure:
    """Section 6: each program's output for two queries, as markers, one panel each."""
    figure = plot_query_outputs(panels, "two different queries (same keys and values)")
    return room(figure, markers_only=True, min_pt=18.5, xlabel=ELEMENT, height_in=4.0)


def plot_lru_strip(steps: dict[str, dict]) -> Figure:
    """Section 4: one row per cache, one box per page of `request_A` once it finished. A CACHED
    page shows its eviction rank (#1 goes first), a FREE page says FREE; a page the other
    request evicted is hatched grey, as evicted pages are in notebook 09 (palette's
    EVICTED_FILL), with its rank and "evicted" on a white label. `steps` maps a cache's name to
    its `lru_steps` result."""
    fig = Figure(figsize=(11.1, 0.35 + 1.4 * len(steps)), dpi=110)
    ax = fig.add_axes((0.2, 0.02, 0.79, 0.96))
    for row, (name, s) in enumerate(steps.items()):
        y = len(steps) - 1 - row
        ax.text(-0.15, y + 0.44, name, ha="right", va="center", fontsize=STRIP_PT)
        for x, page in enumerate(s["pages_a"]):
            cached = page in s["lru_order"]
            state = PageState.CACHED if cached else PageState.FREE
            evicted = page in s["evicted"]
            fill = EVICTED_FILL if evicted else STATE_COLORS[state]
            hatch = EVICTED_HATCH if evicted else None
            ax.add_patch(Rectangle((x, y), 0.92, 0.88, facecolor=fill, edgecolor="black", hatch=hatch))
            label = f"#{s['lru_order'].index(page) + 1}" if cached else "FREE"
            label += ", evicted" if evicted else ""
            white = {"bbox": dict(fc="white", ec="#333333", lw=1, pad=2)} if evicted else {}
            ax.text(x + 0.46, y + 0.62, f"page {page}", ha="center", va="center", fontsize=STRIP_PT, **white)
            ax.text(
                x + 0.46, y + 0.24, label, ha="center", va="center", fontsize=STRIP_PT, weight="bold", **white
            )
    ax.set_xlim(-0.05, len(next(iter(steps.values()))["pages_a"]) + 0.05)
    ax.set_ylim(-0.1, len(steps))
    ax.axis("off")
    return fig
