"""Heatmaps of the page pool: one cell per physical page, laid out as a grid of page ids.

Five views of the same `PoolSnapshot`, each a panel:

- `state`: FREE / ACTIVE / CACHED, with the page id in each cell;
- `occupancy`: filled slots / `page_size` (a partial last page is internal fragmentation);
- `owner`: the oldest sequence holding the page, in that sequence's colour everywhere;
- `ref_count`: how many block tables hold the page (shared prefix pages count > 1);
- `lru`: the eviction order among CACHED pages (#1 = next victim, outlined), with FREE pages
  (used before anything is evicted) and ACTIVE pages (never evicted) greyed out.

`PoolHeatmap` lays its figure out once with matplotlib (a plain `Figure` on an Agg canvas,
no pyplot): axes, page-id ticks, colour bars and legends are rendered a single time into a
background bitmap. `update(snapshot)` then only recomputes the cell colours and labels, and
`png()` writes them into a copy of that background: cell colours with one numpy scatter,
text (cell labels, titles, the sequence legend) with Pillow. Nothing is re-plotted. The
reason is speed: on a 2-core machine matplotlib spends about 1 ms laying out each `Text`
and several ms resampling each image, so redrawing four labelled panels costs hundreds of
ms, while this path redraws a 256-page pool in a few ms. Pools larger than
`MAX_LABELLED_PAGES` have no cell labels (cells are too small); the axes carry the ids.

vLLM has no such picture; its nearest relative is the `kv_cache_usage_perc` gauge, one
number for all of this. Leaves out: per-slot detail (`pagedkv.viz.usage.plot_slots`) and
hover tooltips.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from matplotlib import colormaps, font_manager
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cm import ScalarMappable
from matplotlib.colors import BoundaryNorm, ListedColormap, Normalize, to_rgba_array
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from PIL import Image, ImageDraw, ImageFont

from ..page import PageState
from ..pool import PoolSnapshot
from .palette import (
    DEFAULT_PALETTE,
    LRU_CMAP,
    NO_OWNER_COLOR,
    OCCUPANCY_CMAP,
    REF_COUNT_CMAP,
    STATE_COLORS,
    VICTIM_COLOR,
    SequencePalette,
)

VIEWS = ("state", "occupancy", "owner", "ref_count", "lru")
TITLES = {
    "state": "page state",
    "occupancy": "occupancy: filled slots / page_size",
    "owner": "owner: oldest sequence holding the page",
    "ref_count": "ref count: block tables holding the page",
    "lru": "LRU order",  # replaced by a title naming the next victim
}
MAX_LABELLED_PAGES = 64  # above this a cell is too small for a label; the axes carry the ids
REF_COUNT_MAX = 4  # colours saturate at "4+"; the cell label still shows the exact count
MAX_LEGEND_SEQUENCES = 10
LRU_FREE_COLOR, LRU_ACTIVE_COLOR = "#FFFFFF", "#A6A6A6"

_STATE_RGBA = to_rgba_array([STATE_COLORS[s] for s in PageState])  # [3, 4] by state code
_LRU_STATE_RGBA = to_rgba_array([LRU_FREE_COLOR, LRU_ACTIVE_COLOR, "#000000"])  # [3, 4]
_LUMA = np.array([0.299, 0.587, 0.114])


def grid_shape(num_pages: int) -> tuple[int, int]:
    """(rows, cols) of the page grid: 8 columns for small pools, wider for large ones."""
    cols = 8 if num_pages <= 64 else 16 if num_pages <= 256 else 32 if num_pages <= 1024 else 64
    cols = min(cols, num_pages)
    return math.ceil(num_pages / cols), cols


@lru_cache(maxsize=16)
def _font(size_px: int) -> ImageFont.FreeTypeFont:
    """DejaVu Sans, the font matplotlib ships, so stamped text matches the axes text."""
    path = font_manager.findfont(font_manager.FontProperties(family="DejaVu Sans"))
    return ImageFont.truetype(path, size_px)


@lru_cache(maxsize=8192)
def _glyphs(text: str, size_px: int, anchor: str) -> tuple[Image.Image, tuple[int, int, int, int]]:
    """`text` rendered once as an 8-bit mask, with its box relative to the anchor point.

    Pillow rasterises glyphs on every `ImageDraw.text` call (about 1 ms for a short label
    on a busy machine); pasting a cached mask costs microseconds, and a heatmap repeats the
    same few hundred labels on every step."""
    font = _font(size_px)
    box = tuple(int(v) for v in font.getbbox(text, anchor=anchor))
    mask = Image.new("L", (max(1, box[2] - box[0]), max(1, box[3] - box[1])), 0)
    ImageDraw.Draw(mask).text((-box[0], -box[1]), text, fill=255, font=font, anchor=anchor)
    return mask, box


def _text(
    image: Image.Image, xy: tuple[float, float], text: str, size_px: int, color: str, anchor: str
) -> None:
    mask, (x0, y0, x1, y1) = _glyphs(text, size_px, anchor)
    x, y = round(xy[0]), round(xy[1])
    image.paste(color, (x + x0, y + y0, x + x0 + mask.width, y + y0 + mask.height), mask)


def _rgba8(rgba: np.ndarray) -> np.ndarray:
    """Float RGBA [..., 4] in [0, 1] -> one uint32 per colour (little-endian RGBA bytes)."""
    return np.ascontiguousarray(np.round(rgba * 255).astype(np.uint8)).view(np.uint32)[..., 0]


@dataclass(frozen=True, eq=False)
class _PanelFrame:
    """Where one view's cells, title and key sit in the rendered frame (image pixels)."""

    view: str
    pixels: np.ndarray  # flat frame indices of cell pixels (one-pixel borders excluded)
    pixel_page: np.ndarray  # page id of each of those pixels
    boxes: np.ndarray  # [num_pages, 4] cell box x0, y0, x1, y1
    title_xy: tuple[float, float]  # baseline-left of a title that changes with the snapshot
    key_box: tuple[float, float, float, float]  # x0, y0, x1, y1 beside the grid (legend room)


@dataclass(frozen=True, eq=False)
class _Frame:
    """The static part of a heatmap: laid out and rendered once per geometry, then shared."""

    background: np.ndarray  # [H, W, 4] uint8 (read-only)
    panels: tuple[_PanelFrame, ...]
    cell_px: float  # width of a grid cell in pixels
    px: float  # pixels per point


@lru_cache(maxsize=32)
def _frame(
    num_pages: int, page_size: int, views: tuple[str, ...], dpi: int, panel_width: float
) -> _Frame:
    """Lay the panels out with matplotlib, render them once and measure where cells are."""
    rows, cols = grid_shape(num_pages)
    ncols = 2 if len(views) > 2 else 1
    nrows = math.ceil(len(views) / ncols)
    cell = panel_width * 0.72 / cols  # inches per grid cell
    figure = Figure(
        figsize=(panel_width * ncols, (rows * cell + 0.8) * nrows + 0.4),
        dpi=dpi,
        layout="constrained",
    )
    FigureCanvasAgg(figure)
    figure.suptitle(" ", fontsize=11)  # reserves the room the stamped title takes
    specs = figure.add_gridspec(nrows, 2 * ncols, width_ratios=[0.76, 0.24] * ncols)
    axes = []
    for k, view in enumerate(views):
        r, c = divmod(k, ncols)
        ax, key_ax = figure.add_subplot(specs[r, 2 * c]), figure.add_subplot(specs[r, 2 * c + 1])
        _make_axes(view, ax, key_ax, rows, cols, page_size)
        axes.append((view, ax, key_ax))
    figure.canvas.draw()
    background = np.array(figure.canvas.buffer_rgba())  # a copy
    background.flags.writeable = False
    height, width = background.shape[:2]
    px, panels = dpi / 72, []
    for view, ax, key_ax in axes:
        xs = ax.transData.transform(np.c_[np.arange(cols + 1) - 0.5, np.zeros(cols + 1)])[:, 0]
        ys = (
            height
            - ax.transData.transform(np.c_[np.zeros(rows + 1), np.arange(rows + 1) - 0.5])[:, 1]
        )
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
        panels.append(
            _PanelFrame(
                view,
                np.concatenate(pixels),
                np.concatenate(owners),
                np.array(boxes, dtype=float),
                (bbox.x0, height - bbox.y1 - 9 * px),
                (key.x0, height - key.y1, key.x1, height - key.y0),
            )
        )
    return _Frame(background, tuple(panels), float(xe[1] - xe[0]), px)


def _make_axes(view: str, ax, key_ax, rows: int, cols: int, page_size: int) -> None:
    """The static parts of one panel: title, page-id ticks, colour bar or legend."""
    # The LRU title names the next victim: two stamped lines, so reserve two here.
    ax.set_title(" \n " if view == "lru" else TITLES[view], fontsize=9, loc="left")
    ax.set_xlim(-0.5, cols - 0.5)
    ax.set_ylim(rows - 0.5, -0.5)
    ax.set_aspect("equal")
    ax.set_xticks(range(0, cols, 1 if cols <= 16 else 4))
    ax.set_yticks(range(0, rows, 1 if rows <= 16 else 4))
    ax.set_yticklabels([str(r * cols) for r in ax.get_yticks()])
    ax.tick_params(labelsize=6, length=0)
    ax.set_xlabel("page id = row label + column", fontsize=7)
    for spine in ax.spines.values():
        spine.set_visible(False)
    key_ax.set_axis_off()
    figure = ax.figure
    if view == "state":
        handles = [Patch(color=STATE_COLORS[s], label=s.name) for s in PageState]
        key_ax.legend(handles=handles, loc="center left", fontsize=8, frameon=False)
    elif view == "occupancy":
        sm = ScalarMappable(Normalize(0, page_size), colormaps[OCCUPANCY_CMAP])
        ticks = sorted({0, page_size // 2, page_size})
        bar = figure.colorbar(sm, cax=key_ax.inset_axes([0.05, 0.1, 0.15, 0.8]), ticks=ticks)
        bar.set_label("slots holding tokens", fontsize=7)
        bar.ax.tick_params(labelsize=7)
    elif view == "ref_count":
        cmap = ListedColormap(colormaps[REF_COUNT_CMAP](np.linspace(0, 1, REF_COUNT_MAX + 1)))
        sm = ScalarMappable(BoundaryNorm(np.arange(-0.5, REF_COUNT_MAX + 1), cmap.N), cmap)
        cax = key_ax.inset_axes([0.05, 0.1, 0.15, 0.8])
        bar = figure.colorbar(sm, cax=cax, ticks=range(REF_COUNT_MAX + 1))
        bar.ax.set_yticklabels([*map(str, range(REF_COUNT_MAX)), f"{REF_COUNT_MAX}+"])
        bar.set_label("ref count", fontsize=7)
        bar.ax.tick_params(labelsize=7)
    elif view == "lru":
        sm = ScalarMappable(Normalize(0, 1), colormaps[LRU_CMAP])
        bar = figure.colorbar(sm, cax=key_ax.inset_axes([0.05, 0.45, 0.15, 0.53]), ticks=[0, 1])
        bar.ax.set_yticklabels(["evicted last", "evicted next"])
        bar.ax.tick_params(labelsize=7)
        handles = [
            Patch(facecolor="none", edgecolor=VICTIM_COLOR, linewidth=2.5, label="#1: next victim"),
            Patch(facecolor=LRU_FREE_COLOR, edgecolor="#999999", label="FREE: used first"),
            Patch(facecolor=LRU_ACTIVE_COLOR, label="ACTIVE: never evicted"),
        ]
        key_ax.legend(
            handles=handles,
            loc="lower left",
            fontsize=7,
            frameon=False,
            borderaxespad=0,
            bbox_to_anchor=(0, 0),
        )


class _Panel:
    """One view's current picture: cell colours, labels and the marks that change."""

    def __init__(self, frame: _PanelFrame) -> None:
        self.frame, self.view = frame, frame.view
        self.colors = np.zeros(0, np.uint32)  # [num_pages] packed RGBA of each cell
        self.labels: list[str] = []  # [num_pages] "\n" splits two lines
        self.dark = np.zeros(0, bool)  # [num_pages] the cell needs white text
        self.title = ""  # a title that changes with the snapshot ("" keeps the static one)
        self.victim = -1  # page outlined as next victim (lru view), -1 for none
        self.legend: list[tuple[str, str]] = []  # (colour, label) rows of the owner legend


class PoolHeatmap:
    """Page-grid panels for one pool geometry, redrawn in place from snapshots.

    `views` picks the panels (any of `VIEWS`, in order). Use the same `palette` for every
    picture of one run so each sequence keeps its colour. Jupyter displays the object as
    its PNG (`_repr_png_`). The static frame is built once per geometry and shared.
    `panel_width` is in inches (default 4.6, or 6.4 for a single view).
    """

    def __init__(
        self,
        num_pages: int,
        page_size: int,
        views: Sequence[str] = ("state", "occupancy", "owner", "ref_count"),
        palette: SequencePalette | None = None,
        dpi: int = 72,
        panel_width: float | None = None,
    ) -> None:
        for name, value in (("num_pages", num_pages), ("page_size", page_size)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        views = (views,) if isinstance(views, str) else tuple(views)
        unknown = [v for v in views if v not in VIEWS]
        if not views or unknown or len(set(views)) != len(views):
            raise ValueError(f"views must be distinct names from {VIEWS}, got {views!r}")
        if palette is not None and not isinstance(palette, SequencePalette):
            raise TypeError(f"palette must be a SequencePalette, got {type(palette).__name__}")
        if isinstance(dpi, bool) or not isinstance(dpi, int) or not 30 <= dpi <= 300:
            raise ValueError(f"dpi must be an int in [30, 300], got {dpi!r}")
        if panel_width is None:  # a lone panel gets room for its legend and a long title
            panel_width = 6.4 if len(views) == 1 else 4.6
        if not isinstance(panel_width, (int, float)) or not 2 <= panel_width <= 20:
            raise ValueError(
                f"panel_width must be a number of inches in [2, 20], got {panel_width!r}"
            )
        self.num_pages, self.page_size, self.views = int(num_pages), int(page_size), views
        self.palette = palette if palette is not None else DEFAULT_PALETTE
        self.rows, self.cols = grid_shape(self.num_pages)
        self.labelled = self.num_pages <= MAX_LABELLED_PAGES
        self.snapshot: PoolSnapshot | None = None
        self.suptitle = ""
        self._png: bytes | None = None  # the current picture, encoded once
        self._key: tuple = ()  # everything the current picture shows
        self._frame = _frame(self.num_pages, self.page_size, views, dpi, float(panel_width))
        self.panels = {p.view: _Panel(p) for p in self._frame.panels}

    # ---- updates -------------------------------------------------------------------------------

    def update(self, snapshot: PoolSnapshot) -> None:
        """Show `snapshot` (same num_pages and page_size as this heatmap)."""
        if not isinstance(snapshot, PoolSnapshot):
            raise TypeError(f"snapshot must be a PoolSnapshot, got {type(snapshot).__name__}")
        if (snapshot.num_pages, snapshot.page_size) != (self.num_pages, self.page_size):
            raise ValueError(
                f"snapshot has {snapshot.num_pages} pages of {snapshot.page_size} slots; this "
                f"heatmap draws {self.num_pages} pages of {self.page_size}"
            )
        self.snapshot = snapshot
        counts = np.bincount(snapshot.state, minlength=3)
        # A lone panel leaves the clock out, so its picture changes only when its cells do.
        when = f"pool at clock {snapshot.clock}: " if len(self.views) > 1 else "pool: "
        self.suptitle = (
            f"{when}{counts[PageState.ACTIVE]} ACTIVE, {counts[PageState.CACHED]} CACHED, "
            f"{counts[PageState.FREE]} FREE of {self.num_pages} pages"
        )
        for panel in self.panels.values():
            rgba, panel.labels = getattr(self, f"_{panel.view}")(snapshot, panel)
            panel.colors = _rgba8(rgba)
            panel.dark = rgba[:, :3] @ _LUMA < 0.5
        key = (
            self.suptitle,
            *(
                (p.colors.tobytes(), tuple(p.labels), p.title, p.victim, tuple(p.legend))
                for p in self.panels.values()
            ),
        )
        if key != self._key:  # an unchanged picture keeps its PNG: no encoding at all
            self._key, self._png = key, None

    def _ids(self) -> list[str]:
        return [str(p) for p in range(self.num_pages)]

    def _state(self, snap: PoolSnapshot, panel: _Panel) -> tuple[np.ndarray, list[str]]:
        return _STATE_RGBA[snap.state], self._ids()

    def _occupancy(self, snap: PoolSnapshot, panel: _Panel) -> tuple[np.ndarray, list[str]]:
        rgba = colormaps[OCCUPANCY_CMAP](snap.fill / self.page_size)
        return rgba, [f"{f}/{self.page_size}" for f in snap.fill.tolist()]

    def _owner(self, snap: PoolSnapshot, panel: _Panel) -> tuple[np.ndarray, list[str]]:
        colors = [self.palette.color(s) for s in snap.seq_ids]
        rgba = to_rgba_array([*colors, NO_OWNER_COLOR])[snap.owner]  # owner -1: last row
        shown = snap.seq_ids[:MAX_LEGEND_SEQUENCES]
        panel.legend = [(c, str(s)) for c, s in zip(colors, shown, strict=False)]
        if len(snap.seq_ids) > len(shown):
            panel.legend.append(("", f"+{len(snap.seq_ids) - len(shown)} more"))
        panel.legend.append((NO_OWNER_COLOR, "no holder"))
        return rgba, self._ids()

    def _ref_count(self, snap: PoolSnapshot, panel: _Panel) -> tuple[np.ndarray, list[str]]:
        levels = np.minimum(snap.ref_count, REF_COUNT_MAX) / REF_COUNT_MAX
        return colormaps[REF_COUNT_CMAP](levels), [str(r) for r in snap.ref_count.tolist()]

    def _lru(self, snap: PoolSnapshot, panel: _Panel) -> tuple[np.ndarray, list[str]]:
        rank = snap.lru_rank
        cached = rank >= 0
        m = int(cached.sum())
        rgba = _LRU_STATE_RGBA[snap.state].copy()
        # 1.0 (bright yellow) = next victim, 0.0 (dark) = evicted last.
        rgba[cached] = colormaps[LRU_CMAP](1.0 - rank[cached] / max(m - 1, 1))
        labels = [f"{p}\n#{r + 1}" if r >= 0 else str(p) for p, r in enumerate(rank.tolist())]
        free = int(np.count_nonzero(snap.state == PageState.FREE))
        if m:
            panel.victim = int(np.flatnonzero(rank == 0)[0])
            when = f"after the {free} FREE pages are used" if free else "at the next allocation"
            panel.title = (
                f"LRU order: page {panel.victim} is evicted next, {when}:\n"
                f"it is the CACHED page released longest ago (#1)"
            )
        else:
            panel.victim = -1
            panel.title = (
                "LRU order: no CACHED page, nothing to evict\n(only CACHED pages are evictable)"
            )
        return rgba, labels

    def cell_box(self, view: str, page_id: int) -> tuple[int, int, int, int]:
        """Pixel box (x0, y0, x1, y1, inclusive) of a page's cell in `view` of the PNG."""
        if view not in self.panels:
            raise ValueError(f"view must be one of {self.views}, got {view!r}")
        if isinstance(page_id, bool) or not isinstance(page_id, (int, np.integer)):
            raise TypeError(f"page_id must be an int, got {page_id!r}")
        if not 0 <= page_id < self.num_pages:
            raise ValueError(f"page_id must be in [0, {self.num_pages - 1}], got {page_id}")
        x0, y0, x1, y1 = self.panels[view].frame.boxes[page_id]
        return int(x0), int(y0), int(x1), int(y1)

    # ---- output --------------------------------------------------------------------------------

    def png(self) -> bytes:
        """The current picture as PNG bytes (for `ipywidgets.Image`); the same snapshot always
        gives the same bytes."""
        if self._png is not None:
            return self._png
        frame = self._frame.background.copy()  # [H, W, 4] uint8
        height, width = frame.shape[:2]
        if self.snapshot is not None:
            flat = frame.view(np.uint32).reshape(-1)
            for panel in self.panels.values():
                flat[panel.frame.pixels] = panel.colors[panel.frame.pixel_page]
        image = Image.frombuffer("RGBA", (width, height), frame, "raw", "RGBA", 0, 1).convert("RGB")
        if self.snapshot is not None:
            self._stamp(image)
        out = io.BytesIO()
        image.save(out, format="png", compress_level=1)
        self._png = out.getvalue()
        return self._png

    def _stamp(self, image: Image.Image) -> None:
        """Text and marks that change with the snapshot."""
        px, cell, draw = self._frame.px, self._frame.cell_px, ImageDraw.Draw(image)
        _text(image, (image.width / 2, 3 * px), self.suptitle, round(10 * px), "black", "ma")
        size = max(7, min(13, int(cell * 0.3)))
        for panel in self.panels.values():
            boxes = panel.frame.boxes
            if panel.title:
                (x, y), lines = panel.frame.title_xy, panel.title.split("\n")
                for k, line in enumerate(lines):
                    dy = (k + 1 - len(lines)) * 12 * px
                    _text(image, (x, y + dy), line, round(9 * px), "black", "ls")
            if panel.legend:
                self._stamp_legend(image, draw, panel)
            if panel.victim >= 0:
                x0, y0, x1, y1 = boxes[panel.victim]
                w = max(2, round(cell / 12))
                draw.rectangle((x0 - 1, y0 - 1, x1 + 1, y1 + 1), outline=VICTIM_COLOR, width=w)
            if not self.labelled:
                continue
            centers = (boxes[:, :2] + boxes[:, 2:]) / 2
            for (x, y), label, dark in zip(
                centers.tolist(), panel.labels, panel.dark.tolist(), strict=True
            ):
                color = "white" if dark else "black"
                if "\n" in label:
                    top, bottom = label.split("\n")
                    _text(image, (x, y - size * 0.45), top, size, color, "mm")
                    _text(image, (x, y + size * 0.55), bottom, size - 2, color, "mm")
                else:
                    _text(image, (x, y), label, size, color, "mm")

    def _stamp_legend(self, image: Image.Image, draw: ImageDraw.ImageDraw, panel: _Panel) -> None:
        x0, y0, _, y1 = panel.frame.key_box
        px = self._frame.px
        row = 11 * px
        x, y = x0 + 4 * px, (y0 + y1) / 2 - row * len(panel.legend) / 2
        for color, label in panel.legend:
            if color:
                draw.rectangle((x, y + 2, x + 14 * px, y + row - 2), fill=color, outline="#999999")
            _text(image, (x + 18 * px, y + row / 2), label, round(7 * px), "black", "lm")
            y += row

    def _repr_png_(self) -> bytes:
        return self.png()

    def __repr__(self) -> str:
        clock = None if self.snapshot is None else self.snapshot.clock
        return (
            f"PoolHeatmap(num_pages={self.num_pages}, page_size={self.page_size}, "
            f"views={self.views}, clock={clock})"
        )


def plot_pool(
    snapshot: PoolSnapshot,
    views: Sequence[str] = ("state", "occupancy", "owner", "ref_count"),
    palette: SequencePalette | None = None,
) -> PoolHeatmap:
    """Heatmaps of one snapshot (Jupyter shows the returned heatmap as a PNG)."""
    if not isinstance(snapshot, PoolSnapshot):
        raise TypeError(f"snapshot must be a PoolSnapshot, got {type(snapshot).__name__}")
    heatmap = PoolHeatmap(snapshot.num_pages, snapshot.page_size, views, palette, dpi=90)
    heatmap.update(snapshot)
    return heatmap


def plot_lru(snapshot: PoolSnapshot) -> PoolHeatmap:
    """The LRU-order heatmap alone: which CACHED page is evicted next (outlined), and in what
    order the others follow."""
    return plot_pool(snapshot, ("lru",))
