"""The dashboard's main picture: the pool's state and owner views beside the event log.

On a 1280x720 screen the dashboard (controls, tab bar, this picture and your actions) fits in
JupyterLab's notebook view, so the picture is 330 px tall at most (`VIEW_HEIGHT_PX`). Its two
views are stacked at 90 dpi (text 16 px) for a few rows of pages, or side by side at 82 dpi
(15 px) for a square pool, drawn as wide as they are shown with the file browser open
(`BESIDE_PX`), so their text is never scaled below what was drawn; whichever gives larger
cells is used.

Leaves out: the other views (the dashboard's tabs draw them at the cell's width).
"""

from __future__ import annotations

from pagedkv.viz.controls import VIEW_HEIGHT_PX
from pagedkv.viz.grid import cell_inches
from pagedkv.viz.heatmap import PoolHeatmap
from pagedkv.viz.palette import SequencePalette

__all__ = ["BESIDE_PX", "MAIN_HEIGHT_PX", "MAIN_PX", "MAIN_VIEWS", "main_heatmap"]

MAIN_PX, BESIDE_PX, MAIN_HEIGHT_PX, STACKED_DPI, BESIDE_DPI = 720, 560, VIEW_HEIGHT_PX, 90, 82
MAIN_VIEWS = ("state", "owner")
KEY_MIN_PX = 88  # a key this wide shows "CACHED" whole beside its swatch
STACKED_BONUS_PX = 1.0  # cells this much smaller still win stacked: its keys have the width


def main_heatmap(num_pages: int, page_size: int, palette: SequencePalette) -> PoolHeatmap:
    """The main picture: its two views stacked (in MAIN_PX) or side by side (in BESIDE_PX),
    MAIN_HEIGHT_PX tall at most, whichever draws larger cells (their size in pixels decides;
    within STACKED_BONUS_PX, stacked: side by side, an owner legend of four names folds into
    "+4"), unless that leaves a key narrower than KEY_MIN_PX (its labels would be cut) or cuts an
    axis label and the other layout does neither."""
    cells = {
        (cols, dpi, px): dpi * cell_inches(num_pages, 2, cols, px / dpi / cols, MAIN_HEIGHT_PX / dpi)
        for cols, dpi, px in ((1, STACKED_DPI, MAIN_PX), (2, BESIDE_DPI, BESIDE_PX))
    }
    made = []
    for columns, dpi, px in sorted(cells, key=lambda k: -cells[k] - STACKED_BONUS_PX * (k[0] == 1)):
        heatmap = PoolHeatmap(
            num_pages, page_size, MAIN_VIEWS, palette, dpi, px / dpi / columns, show_clock=False,
            columns=columns, max_height=MAIN_HEIGHT_PX / dpi,
        )  # fmt: skip
        x0, _, x1, _ = heatmap.panels["state"].frame.key_box
        if x1 - x0 >= KEY_MIN_PX and not heatmap._frame.cut_texts:  # noqa: SLF001
            return heatmap
        made.append(heatmap)
    return made[0]  # neither keeps its key and axes whole: the larger cells
