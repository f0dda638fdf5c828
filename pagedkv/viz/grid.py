"""The page grid's geometry: rows and columns for a pool, a cell's side and a picture's size.

A pool's pages are drawn as a grid, page id = row + column, 8 columns for small pools (two rows
for 17 to 24) and wider for large ones; `cell_inches` and `figure_inches` size the cells so
each panel keeps room for its title, page-id ticks and legend. `pagedkv.viz.frame` lays the
panels out with these sizes.

Leaves out: drawing (frame.py does it).
"""

from __future__ import annotations

import math

__all__ = ["FIGURE_TEXT_IN", "PANEL_TEXT_IN", "cell_inches", "figure_inches", "grid_shape", "legend_inches"]


def grid_shape(num_pages: int) -> tuple[int, int]:
    """(rows, cols) of the page grid: 8 columns for small pools, two rows for 17 to 24 pages
    (9 to 12 columns: a picture only so tall, such as the dashboard's, draws them half again as
    large as three rows of 8, and the fewer columns the wider the key beside), wider for large ones."""
    cols = 8 if num_pages <= 64 else 16 if num_pages <= 256 else 32 if num_pages <= 1024 else 64
    if 16 < num_pages <= 24:
        cols = math.ceil(num_pages / 2)
    cols = min(cols, num_pages)
    return math.ceil(num_pages / cols), cols


PANEL_TEXT_IN, FIGURE_TEXT_IN = 0.95, 0.45  # a panel's title and labels; the picture's title


def legend_inches(panel_width: float) -> float:
    return min(1.6, 0.4 * panel_width)  # 0.29 of 5.5 inches, kept when narrower


def cell_inches(num_pages: int, nviews: int, columns: int, panel_width: float, height: float | None) -> float:
    """Side of a grid cell in inches: as wide as the panel allows beside its legend and,
    given the picture's `height` in inches, as tall as `nviews` panels in `columns` allow."""
    rows, cols = grid_shape(num_pages)
    cell = (panel_width - legend_inches(panel_width)) * 0.95 / cols
    if height is not None:
        cell = min(cell, ((height - FIGURE_TEXT_IN) / math.ceil(nviews / columns) - PANEL_TEXT_IN) / rows)
    return cell


def figure_inches(
    num_pages: int, nviews: int, columns: int, panel_width: float, max_height: float | None
) -> tuple[float, float, float]:
    """(panel width, picture height, grid width) in inches. Cells as large as the panel's
    width allows, or, when `max_height` stops them first, a picture `max_height` tall whose
    panels are only as wide as their grid and legend (and 3/4 of `panel_width` at least, for
    the picture's title): no empty band at the right."""
    rows, cols = grid_shape(num_pages)
    nrows, legend_in = math.ceil(nviews / columns), legend_inches(panel_width)
    cell = cell_inches(num_pages, nviews, columns, panel_width, None)
    height = (rows * cell + 1.2) * nrows + 0.5  # little white above and below
    if max_height is None or height <= max_height:
        return panel_width, height, panel_width - legend_in
    grid_in = cell_inches(num_pages, nviews, columns, panel_width, max_height) * cols
    width = min(panel_width, max(0.75 * panel_width, grid_in + legend_in + 0.45))  # 0.45: row ids
    return width, max_height, grid_in
