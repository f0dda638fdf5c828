"""The static frame of a pool heatmap, rendered once, and fast text stamping.

matplotlib lays out a `PoolHeatmap`'s panels (page-id ticks, titles, colour bars, legends)
and renders them once per geometry into a background bitmap (`build_frame`, cached); the
cell rectangles are measured in pixels so a picture can be composed with one numpy scatter.
Text that changes with the snapshot is stamped with Pillow from glyph masks rendered once
(`pagedkv.viz.glyphs.stamp_text`). Why: on a 2-core machine matplotlib spends about 1 ms
laying out each `Text` and several ms resampling each image, so re-drawing labelled panels
costs hundreds of ms per step; composing pixels costs a few.

Leaves out: interactive backends (ipympl); the pictures are PNG bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cm import ScalarMappable
from matplotlib.colors import BoundaryNorm, ListedColormap, Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.text import Text

from pagedkv.core.page import PageState
from pagedkv.core.plumbing.words import count
from pagedkv.viz.glyphs import wrap_text
from pagedkv.viz.grid import figure_inches, grid_shape
from pagedkv.viz.palette import LRU_CMAP, OCCUPANCY_CMAP, REF_COUNT_CMAP, STATE_COLORS, VICTIM_COLOR

TITLES = {
    "state": "page state",
    "occupancy": "occupancy: slots holding tokens",
    "owner": "owner (oldest holder)",  # short: the owner key may start beside it
    "ref_count": "ref count: block tables holding the page",
    "lru": "LRU order",  # replaced by a stamped title naming the next victim
}
REF_COUNT_MAX = 4  # colours saturate at "4+"; the cell label still shows the exact count
# the LRU view draws FREE and ACTIVE pages in their state colours, as every picture does
LRU_FREE_COLOR, LRU_ACTIVE_COLOR = STATE_COLORS[PageState.FREE], STATE_COLORS[PageState.ACTIVE]
GRID_COLOR = "#BDBDBD"  # the one-pixel lines between cells, so white cells keep an outline
# Projector sizes: a heatmap is about 11 inches wide at 110 dpi (~1200 px), so it fills a
# JupyterLab cell on a 1280x720 projector and every text stays >= 12 pt on screen.
FONT_PT = 13  # ticks, axis labels, legends, colour bars, cell labels
TITLE_PT = 14  # panel titles
SUPTITLE_PT = 15  # the title over all panels


def lru_title(victim: int, free: int) -> str:
    """The LRU panel's title (unwrapped): the next victim, or that there is none (-1).

    Two short lines, so that wrapping to a narrow panel never leaves a word alone on a line."""
    if victim < 0:
        return "LRU order: no CACHED page, nothing to evict\n(only CACHED pages are evictable)"
    when = f"after the {count(free, 'FREE page')}" if free else "at the next allocation"
    return (
        f"LRU: page {victim} (#1) is evicted next, {when},\n"
        "unless a prefix hit revives it: released longest ago (pages are freed tail first)"
    )


@dataclass(frozen=True, eq=False)
class PanelFrame:
    """Where one view's cells, title and key sit in the rendered frame (image pixels)."""

    view: str
    pixels: np.ndarray  # flat frame indices of cell pixels (one-pixel borders excluded)
    pixel_page: np.ndarray  # page id of each of those pixels
    boxes: np.ndarray  # [num_pages, 4] cell box x0, y0, x1, y1
    title_xy: tuple[float, float]  # baseline-left of a title that changes with the snapshot
    key_box: tuple[float, float, float, float]  # x0, y0, x1, y1 beside the grid (legend room)
    title_room: float = 0.0  # px a changing title's lines may take: up to the key beside the grid
    key_top: float = 0.0  # a legend's first row: the title's top where the title ends before the key


@dataclass(frozen=True, eq=False)
class Frame:
    """The static part of a heatmap: laid out and rendered once per geometry, then shared."""

    background: np.ndarray  # [H, W, 4] uint8 (read-only)
    panels: tuple[PanelFrame, ...]
    cell_px: float  # width of a grid cell in pixels
    px: float  # pixels per point
    min_font_px: float  # the smallest text matplotlib drew into the frame, in pixels
    cut_texts: tuple[str, ...] = ()  # texts that run past the picture's edge (none, once laid out)

    @property
    def label_px(self) -> int:
        """Size of a one-line cell label (a page id, a count): FONT_PT, larger in large cells
        (a third of the cell, up to 1.5 x), so a big picture is not mostly empty cells, and
        smaller in small ones, down to MIN_LABEL_PX, so a two-digit page id fits whole."""
        base = round(FONT_PT * self.px)
        if self.cell_px < 1.3 * base + 4 * self.px:  # "31" would not fit at FONT_PT
            return max(MIN_LABEL_PX, int(self.label_room / 1.3))
        return max(base, min(round(1.5 * base), round(0.34 * self.cell_px)))

    @property
    def label_room(self) -> float:
        """The widest label line that stays inside its cell (a thinner margin in small cells)."""
        return self.cell_px - (4 if self.cell_px >= 24 * self.px else 2) * self.px


MIN_LABEL_PX = 12  # a cell label is never smaller (readable at the back of a room)


@lru_cache(maxsize=32)
def build_frame(
    num_pages: int,
    page_size: int,
    views: tuple[str, ...],
    dpi: int,
    panel_width: float,
    columns: int | None = None,
    max_height: float | None = None,
    lru_key: bool = True,
) -> Frame:
    """Lay the panels out with matplotlib, render them once and measure where cells are.
    `columns`: panels per row (default 2 for two views or more); `max_height`: inches the picture
    may take at most (cells shrink to fit); `lru_key` False: no eviction-order bar or "#1" in the LRU key."""
    rows, cols = grid_shape(num_pages)
    ncols = columns or (2 if len(views) >= 2 else 1)  # two views side by side fill a cell's width
    nrows = math.ceil(len(views) / ncols)
    panel_width, height, grid_in = figure_inches(num_pages, len(views), ncols, panel_width, max_height)
    figure = Figure(figsize=(panel_width * ncols, height), dpi=dpi, layout="constrained")
    canvas = FigureCanvasAgg(figure)
    figure.suptitle(" ", fontsize=SUPTITLE_PT + 1)  # reserves the room the stamped title takes
    specs = figure.add_gridspec(nrows, 2 * ncols, width_ratios=[grid_in, panel_width - grid_in] * ncols)
    axes = []
    for k, view in enumerate(views):
        r, c = divmod(k, ncols)
        ax, key_ax = figure.add_subplot(specs[r, 2 * c]), figure.add_subplot(specs[r, 2 * c + 1])
        _make_axes(view, ax, key_ax, num_pages, cols, page_size, lru_key)
        axes.append((view, ax, key_ax))
    _draw_wrapping_cut_texts(figure, canvas)
    _reserve_lru_title(figure, canvas, axes, num_pages, dpi / 72)
    background = np.array(canvas.buffer_rgba())  # a copy
    background.flags.writeable = False
    height, width = background.shape[:2]
    px, panels = dpi / 72, []
    for view, ax, key_ax in axes:
        xs = ax.transData.transform(np.c_[np.arange(cols + 1) - 0.5, np.zeros(cols + 1)])[:, 0]
        ys = height - ax.transData.transform(np.c_[np.zeros(rows + 1), np.arange(rows + 1) - 0.5])[:, 1]
        xe, ye = np.round(xs).astype(int), np.round(ys).astype(int)  # cell edges in pixels
        pixels, owners, boxes = [], [], []
        for pid in range(num_pages):
            r, c = divmod(pid, cols)
            x0, x1, y0, y1 = xe[c] + 1, xe[c + 1], ye[r] + 1, ye[r + 1]  # one white pixel apart
            yy, xx = np.mgrid[y0:y1, x0:x1]
            pixels.append((yy * width + xx).ravel())
            owners.append(np.full(yy.size, pid))
            boxes.append((x0, y0, x1 - 1, y1 - 1))
        bbox, key = ax.get_window_extent(), key_ax.get_window_extent()
        key_box = (key.x0, height - key.y1, key.x1, height - _key_floor(ax, key))
        cells = (np.concatenate(pixels), np.concatenate(owners), np.array(boxes, dtype=float))
        title = ((bbox.x0, height - bbox.y1 - 9 * px), key_box, _title_room(ax, key_ax))
        panels.append(PanelFrame(view, *cells, *title, _key_top(ax, key, height)))
    min_font_px = _smallest_pt(figure) * px
    return Frame(background, tuple(panels), float(xe[1] - xe[0]), px, min_font_px, _cut_texts(figure))


def _key_floor(ax, key) -> float:
    """The key's lowest edge (matplotlib's y, from the bottom): its axes' bottom, or the top of
    the axis label under the grid where that label runs across the key's column."""
    label = ax.xaxis.label.get_window_extent()
    return max(key.y0, label.y1 + 2) if label.x1 > key.x0 else key.y0


def _key_top(ax, key, height: int) -> float:
    """Where a legend beside the grid may start (image y): level with the panel's static title
    when that title ends before the key's column, else at the grid's top edge."""
    title = [t for t in ax.get_children() if isinstance(t, Text) and t.get_text() == ax.get_title(loc="left")]
    box = title[0].get_window_extent() if title and title[0].get_text().strip() else None
    top = ax.get_window_extent().y1 if box is None or box.x1 > key.x0 else box.y1
    return max(height - key.y1, height - top)


def _title_room(ax, key_ax) -> float:
    """Pixels from the grid's left edge to the key beside it, less a small gap."""
    return key_ax.get_window_extent().x0 - ax.get_window_extent().x0 - 6.0


def _reserve_lru_title(figure: Figure, canvas: FigureCanvasAgg, axes: list, n: int, px: float) -> None:
    """Give an LRU panel's title (and the picture) as many blank lines as its longest title
    takes wrapped to the room before the key; re-laid out until the count holds."""
    big = n - 1  # n pages: the most digits a page id or a FREE count can have
    titles = [lru_title(-1, 0), lru_title(big, 0), lru_title(big, big)]
    for _, ax, key_ax in [a for a in axes if a[0] == "lru"]:
        for _ in range(3):  # the room shifts a little with the lines
            room = _title_room(ax, key_ax)
            lines = max(wrap_text(t, round(TITLE_PT * px), room).count("\n") + 1 for t in titles)
            if (more := lines - ax.get_title(loc="left").count("\n") - 1) == 0:
                break
            width, height = figure.get_size_inches()  # taller by the lines added
            figure.set_size_inches(width, height + more * 1.3 * TITLE_PT / 72)
            ax.set_title("\n".join([" "] * lines), fontsize=TITLE_PT, loc="left", linespacing=1.3)
            canvas.draw()


def _smallest_pt(figure: Figure) -> float:
    """The size in points of the smallest text drawn into `figure`."""
    sizes = [
        float(t.get_fontsize())  # points; the stubs also allow a size name, which Text never returns
        for t in figure.findobj(Text)
        if t.get_visible() and t.get_text().strip()
    ]
    return min(sizes, default=FONT_PT)


def _draw_wrapping_cut_texts(figure: Figure, canvas: FigureCanvasAgg) -> None:
    """Draw; a label or title that runs past the picture's edge or into another text, a
    colour bar or a legend is wrapped (at "; " or ": " first, then at a middle space)."""
    canvas.draw()
    for _ in range(3):
        cut = _cut_texts(figure)
        if not cut:
            return
        for t in figure.findobj(Text):
            if t.get_text() in cut:
                t.set_text(_wrapped(t.get_text()))
        canvas.draw()


def _wrapped(text: str) -> str:
    """`text` with its longest line broken once more."""
    if "\n" not in text and ("; " in text or ": " in text):
        return text.replace("; ", "\n") if "; " in text else text.replace(": ", ":\n", 1)
    lines = text.split("\n")
    k = max(range(len(lines)), key=lambda i: len(lines[i]))
    spaces = [i for i, c in enumerate(lines[k]) if c == " "]
    if not spaces:
        return text
    cut = min(spaces, key=lambda i: abs(i - len(lines[k]) / 2))
    lines[k : k + 1] = [lines[k][:cut], lines[k][cut + 1 :]]
    return "\n".join(lines)


def _cut_texts(figure: Figure) -> tuple[str, ...]:
    """The drawn texts of `figure` that reach past its left or right edge, or overlap
    another text, a colour bar or a legend (a title running into the key beside it)."""
    width = figure.bbox.width
    texts = [t for t in figure.findobj(Text) if t.get_visible() and t.get_text().strip()]
    boxes = [t.get_window_extent() for t in texts]
    keys = [child.get_window_extent() for ax in figure.axes for child in ax.child_axes]
    keys += [legend.get_window_extent() for ax in figure.axes if (legend := ax.get_legend()) is not None]
    cut = []
    for k, (t, box) in enumerate(zip(texts, boxes)):
        others = [b for j, b in enumerate(boxes) if j != k]
        if (
            box.x0 < -0.5
            or box.x1 > width + 0.5
            or any(box.overlaps(b) for b in others)
            or any(box.overlaps(b) for b in keys if not _inside_box(box, b))
        ):
            cut.append(t.get_text())
    return tuple(cut)


def _inside_box(box, key) -> bool:
    return key.x0 <= box.x0 and box.x1 <= key.x1 and key.y0 <= box.y0 and box.y1 <= key.y1


def _make_axes(
    view: str, ax, key_ax, num_pages: int, cols: int, page_size: int, lru_key: bool = True
) -> None:
    """The static parts of one panel: title, page-id ticks, grid, colour bar or legend."""
    rows = math.ceil(num_pages / cols)
    # The LRU title names the next victim: stamped lines, reserved here (`_reserve_lru_title`).
    ax.set_title(" \n " if view == "lru" else TITLES[view], fontsize=TITLE_PT, loc="left", linespacing=1.3)
    ax.set_xlim(-0.5, cols - 0.5)
    ax.set_ylim(rows - 0.5, -0.5)
    ax.set_aspect("equal")
    ax.set_facecolor(GRID_COLOR)  # shows through the gaps between the cells painted later
    # Grid positions after the last page are not pages: hatched, never painted.
    for position in range(num_pages, rows * cols):
        r, c = divmod(position, cols)
        ax.add_patch(
            Rectangle(
                (c - 0.5, r - 0.5), 1, 1, facecolor="white", edgecolor="#C8C8C8", hatch="////",
                linewidth=0,
            )
        )  # fmt: skip
    step = 1 if cols <= 9 else 2 if cols <= 12 else 4  # narrower cells: "10" "11" would touch
    ax.set_xticks(range(0, cols, step))
    ax.set_yticks(range(0, rows, 1 if cols <= 12 else 4))  # every row, but in small cells
    ax.set_yticklabels([str(r * cols) for r in ax.get_yticks()])
    ax.tick_params(labelsize=FONT_PT, length=0)
    filler = "; hatched: no page" if num_pages < rows * cols else ""
    # With the note, from the grid's left edge: centred, it would run past a narrow picture's.
    ax.set_xlabel(f"page id = row + column{filler}", fontsize=FONT_PT, loc="left" if filler else "center")
    for spine in ax.spines.values():
        spine.set_visible(False)
    _make_key(view, key_ax, page_size, lru_key)


def _make_key(view: str, key_ax, page_size: int, lru_key: bool = True) -> None:
    """The panel's key beside it: the state legend, or the colour bar of its measure (the LRU
    order's bar and "#1" entry only with `lru_key`: with no CACHED page there is no order)."""
    key_ax.set_axis_off()
    figure = key_ax.figure
    if view == "state":
        handles = [Patch(color=STATE_COLORS[s], label=s.name) for s in PageState]
        key_ax.legend(handles=handles, loc="center left", fontsize=FONT_PT, frameon=False)
    elif view == "occupancy":
        sm = ScalarMappable(Normalize(0, page_size), colormaps[OCCUPANCY_CMAP])
        ticks = sorted({0, page_size // 2, page_size})
        bar = figure.colorbar(sm, cax=key_ax.inset_axes([0.05, 0.1, 0.15, 0.8]), ticks=ticks)
        bar.ax.tick_params(labelsize=FONT_PT)
    elif view == "ref_count":
        cmap = ListedColormap(colormaps[REF_COUNT_CMAP](np.linspace(0, 1, REF_COUNT_MAX + 1)))
        sm = ScalarMappable(BoundaryNorm(np.arange(-0.5, REF_COUNT_MAX + 1), cmap.N), cmap)
        cax = key_ax.inset_axes([0.05, 0.1, 0.15, 0.8])
        bar = figure.colorbar(sm, cax=cax, ticks=range(REF_COUNT_MAX + 1))
        bar.ax.set_yticklabels([*map(str, range(REF_COUNT_MAX)), f"{REF_COUNT_MAX}+"])
        bar.ax.tick_params(labelsize=FONT_PT)
    elif view == "lru":
        handles = [
            Patch(facecolor=LRU_FREE_COLOR, edgecolor="#999999", label="FREE (if any): used first"),
            Patch(facecolor=LRU_ACTIVE_COLOR, label="ACTIVE (held, kept)"),
        ]
        if lru_key:
            sm = ScalarMappable(Normalize(0, 1), LRU_CMAP)
            bar = figure.colorbar(sm, cax=key_ax.inset_axes([0.05, 0.45, 0.15, 0.53]), ticks=[0, 1])
            bar.ax.set_yticklabels(["CACHED:\nevicted last", "CACHED:\nevicted next"])
            bar.ax.tick_params(labelsize=FONT_PT)
            victim = Patch(facecolor="none", edgecolor=VICTIM_COLOR, linewidth=2.5, label="#1: next victim")
            handles.insert(0, victim)
        key_ax.legend(
            handles=handles,
            loc="lower left",
            fontsize=FONT_PT,
            frameon=False,
            borderaxespad=0,
            bbox_to_anchor=(0, 0),
        )
