"""Notebook 08's four pictures, one call each: the series come from the cell, the axis
choices (ticks, range, log scale, type size) live here, set by `room`."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure

from pagedkv.labs.mistake_plots import room
from pagedkv.viz.kernel import plot_query_outputs
from pagedkv.viz.usage import plot_series

REQUEST = "request (1 = the first)"
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
    return room(figure, xticks=FORTY_TICKS, ylim=(-1, 30), yticks=[0, 10, 20, 28], legend_loc="upper left")


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
    return room(figure, markers_only=True, min_pt=18.5, xlabel="output element", height_in=4.0)
