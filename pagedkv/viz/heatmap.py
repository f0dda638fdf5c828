"""Heatmaps of the page pool: one cell per physical page, laid out as a grid of page ids.

Five views of the same `PoolSnapshot`, each a panel:

- `state`: FREE / ACTIVE / CACHED, with the page id in each cell;
- `occupancy`: filled slots / `page_size` (a partial last page is internal fragmentation);
- `owner`: the oldest sequence holding the page, in that sequence's colour everywhere;
- `ref_count`: how many block tables hold the page (shared prefix pages count > 1);
- `lru`: the eviction order among CACHED pages (#1 = next victim, outlined), with FREE pages
  (used before anything is evicted) and ACTIVE pages (never evicted) greyed out. Given the
  pool's events, each CACHED cell also names the sequence that last held the page (from its
  `cache` event), so a finished sequence's pages can be told apart.

Grid positions past the last page are hatched: they are not pages.

`PoolHeatmap` draws nothing twice: its static frame (axes, page-id ticks, colour bars,
legends) is laid out and rendered once per geometry by `pagedkv.viz.frame`; `update(snapshot)`
recomputes only cell colours, labels and titles, and `png()` composes them onto a copy of the
frame (numpy for cells, Pillow for text). A 256-page pool redraws in a few ms. Pools larger
than `MAX_LABELLED_PAGES` have no cell labels (cells are too small); the axes carry the ids.

vLLM has no such picture; its nearest relative is the `kv_cache_usage_perc` gauge, one
number for all of this. Leaves out: per-slot detail (`pagedkv.viz.usage.plot_slots`) and
hover tooltips.
"""

from __future__ import annotations

import io
from collections.abc import Hashable, Iterable, Sequence

import numpy as np
from PIL import Image, ImageDraw

from pagedkv.core.observe.snapshot import PoolSnapshot
from pagedkv.core.page import PageState
from pagedkv.core.plumbing.events import Event
from pagedkv.core.plumbing.validation import check_choice, check_instance, check_int, check_number
from pagedkv.viz.frame import FONT_PT, SUPTITLE_PT, TITLE_PT, build_frame
from pagedkv.viz.glyphs import fit_text, pack_rgba, stamp_text
from pagedkv.viz.grid import grid_shape
from pagedkv.viz.heatmap_views import (
    MAX_LEGEND_SEQUENCES,
    VIEWS,
    Panel,
    ViewContext,
    last_holders,
    view_cells,
    wrap_seq_id,
)
from pagedkv.viz.heatmap_views import legend_lines as _legend_lines
from pagedkv.viz.palette import DEFAULT_PALETTE, VICTIM_COLOR, SequencePalette

__all__ = [
    "DPI", "MAX_LABELLED_PAGES", "MAX_LEGEND_SEQUENCES", "VIEWS", "PoolHeatmap", "plot_lru", "plot_pool",
]  # fmt: skip

MAX_LABELLED_PAGES = 64  # above this (or when the largest id does not fit a cell) the axes carry the ids
DPI = 110  # with the default panel widths a picture is ~1200 px wide: it fills a cell

_LUMA = np.array([0.299, 0.587, 0.114])


class PoolHeatmap:
    """Page-grid panels for one pool geometry, redrawn in place from snapshots.

    `views` picks the panels (any of `VIEWS`, in order). Use the same `palette` for every
    picture of one run so each sequence keeps its colour. Jupyter displays the object as
    its PNG (`_repr_png_`). The static frame is built once per geometry and shared.
    `show_clock=False` leaves the logical clock out of the title (the dashboard shows its
    own step counter instead); a `label` (one line of at most 40 characters) takes the
    clock's place: "pool after scheduler step 8: ...". `panel_width` is in inches (default
    5.5, or 11 for a single view): with the default dpi the picture fills a JupyterLab cell
    and its text stays >= 12 pt on a projector. `columns` (1 or 2) stacks the panels or sets
    them side by side; `max_height` (inches) caps the picture's height: cells shrink to fit.
    """

    def __init__(
        self,
        num_pages: int,
        page_size: int,
        views: Sequence[str] = ("state", "occupancy", "owner", "ref_count"),
        palette: SequencePalette | None = None,
        dpi: int = DPI,
        panel_width: float | None = None,
        show_clock: bool = True,
        columns: int | None = None,
        max_height: float | None = None,
        label: str | None = None,
    ) -> None:
        self.num_pages, self.page_size = (
            check_int("num_pages", num_pages, 1),
            check_int("page_size", page_size, 1),
        )
        views = (views,) if isinstance(views, str) else tuple(views)
        for i, view in enumerate(views):
            check_choice(f"views[{i}]", view, VIEWS)
        if not views or len(set(views)) != len(views):
            raise ValueError(f"views must be distinct names from {VIEWS}, got {views!r}")
        if palette is not None:
            check_instance("palette", palette, SequencePalette)
        check_int("dpi", dpi, 30, 300)
        if "lru" in views and len(views) > 1 and columns is None and panel_width is None:
            columns = 1  # stacked, full width: beside another panel the LRU key and title are cramped
        if panel_width is None:  # a lone panel gets room for its legend and a long title
            panel_width = 11.0 if len(views) == 1 or columns == 1 else 5.5
        if check_number("panel_width", panel_width, 2.0) > 20:
            raise ValueError(f"panel_width must be a number of inches in [2, 20], got {panel_width!r}")
        if columns is not None:
            check_int("columns", columns, 1, 2)
        if max_height is not None:
            max_height = check_number("max_height", max_height, 2.0)
        self.views = views
        self.show_clock = bool(show_clock)
        if label is not None and not (
            0 < len(check_instance("label", label, str)) <= 40 and label.isprintable()
        ):
            raise ValueError(f"label must be one line of 1 to 40 characters, got {label!r}")
        self.label = label
        self.palette = palette if palette is not None else DEFAULT_PALETTE
        self.rows, self.cols = grid_shape(self.num_pages)
        self.snapshot: PoolSnapshot | None = None
        self._holders: dict[int, Hashable] = {}  # CACHED page id -> sequence that last held it
        self.active_owners = False  # the LRU view also names each ACTIVE page's owner
        self.suptitle = ""
        self._png: bytes | None = None  # the current picture, encoded once
        self._key: tuple = ()  # everything the current picture shows
        geometry = (views, dpi, float(panel_width), columns, max_height)
        self._frame_args = (self.num_pages, self.page_size, *geometry)
        self._use_frame()

    def _use_frame(self, cached: bool = True) -> None:
        """Draw on the frame of this geometry: an LRU view keys its eviction order only if `cached`."""
        frame = build_frame(*self._frame_args, lru_key=cached or "lru" not in self.views)
        if frame is getattr(self, "_frame", None):
            return
        self._frame, self._key = frame, ()
        self.panels = {p.view: Panel(p) for p in frame.panels}
        widest = str(self.num_pages - 1)
        fits = fit_text(widest, frame.label_px, frame.label_room) == widest
        self.labelled = self.num_pages <= MAX_LABELLED_PAGES and fits  # else the axes carry the ids

    def update(self, snapshot: PoolSnapshot, events: Iterable[Event] | None = None) -> None:
        """Show `snapshot` (same num_pages and page_size as this heatmap). `events`: the
        pool's events since its creation (e.g. `ScenarioRun.events`), for the LRU view's
        "last held by" labels."""
        check_instance("snapshot", snapshot, PoolSnapshot)
        if (snapshot.num_pages, snapshot.page_size) != (self.num_pages, self.page_size):
            raise ValueError(
                f"snapshot has {snapshot.num_pages} pages of {snapshot.page_size} slots; this "
                f"heatmap draws {self.num_pages} pages of {self.page_size}"
            )
        self.snapshot = snapshot
        self._use_frame(cached=bool((snapshot.lru_rank >= 0).any()))  # none: no eviction order to key
        self._holders = last_holders(snapshot, events, self.active_owners) if "lru" in self.panels else {}
        counts = np.bincount(snapshot.state, minlength=3)
        # A lone panel leaves the clock out, so its picture changes only when its cells do.
        clocked = len(self.views) > 1 and self.show_clock
        when = f"pool at clock {snapshot.clock}: " if clocked else "pool: "
        when = f"pool {self.label}: " if self.label else when
        self.suptitle = (
            f"{when}{counts[PageState.ACTIVE]} ACTIVE, {counts[PageState.CACHED]} CACHED, "
            f"{counts[PageState.FREE]} FREE of {self.num_pages} pages"
        )
        context = ViewContext(self.palette, self._frame, self._holders)
        for panel in self.panels.values():
            rgba, panel.labels = view_cells(snapshot, panel, context)
            panel.colors = pack_rgba(rgba)
            panel.dark = rgba[:, :3] @ _LUMA < 0.5
        panels = self.panels.values()
        marks = [(p.colors.tobytes(), tuple(p.labels), p.title, p.victim, tuple(p.legend)) for p in panels]
        key = (self.suptitle, *marks)
        if key != self._key:  # an unchanged picture keeps its PNG: no encoding at all
            self._key, self._png = key, None

    def _wrap(self, seq_id: Hashable) -> str:
        """`seq_id` as the LRU view labels it in this heatmap's cells (`wrap_seq_id`)."""
        return wrap_seq_id(seq_id, self._frame)

    @property
    def min_font_px(self) -> float:
        """The smallest text of the picture in pixels (frame and stamped labels): at display
        size it is `min_font_px * shown width / size[0]` CSS pixels."""
        return min(self._frame.min_font_px, round(FONT_PT * self._frame.px))

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the PNG in pixels."""
        height, width = self._frame.background.shape[:2]
        return width, height

    def cell_box(self, view: str, page_id: int) -> tuple[int, int, int, int]:
        """Pixel box (x0, y0, x1, y1, inclusive) of a page's cell in `view` of the PNG."""
        check_choice("view", view, self.views)
        check_int("page_id", page_id, 0, self.num_pages - 1)
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
        dpi = round(72 * self._frame.px)  # in the PNG, so a reader can tell its point sizes
        buffer = io.BytesIO()
        # NOTE: zlib level 1, not Pillow's default 6: a 256-page heatmap encodes in ~8 ms
        # instead of ~14 ms (most of a dashboard step), for a file about twice as large.
        image.save(buffer, format="PNG", compress_level=1, dpi=(dpi, dpi))
        self._png = buffer.getvalue()
        return self._png

    def _stamp(self, image: Image.Image) -> None:
        """Text and marks that change with the snapshot."""
        px, cell, draw = self._frame.px, self._frame.cell_px, ImageDraw.Draw(image)
        stamp_text(image, (image.width / 2, 3 * px), self.suptitle, round(SUPTITLE_PT * px), "black", "ma")
        size = round(FONT_PT * px)
        room = self._frame.label_room  # widest label line that stays inside its cell
        for panel in self.panels.values():
            boxes = panel.frame.boxes
            for line, x, y in self.title_rows(panel):
                stamp_text(image, (x, y), line, round(TITLE_PT * px), "black", "ls")
            if panel.legend:
                self._stamp_legend(image, draw, panel)
            if panel.victim >= 0:
                x0, y0, x1, y1 = boxes[panel.victim]
                w = max(2, round(cell / 12))
                draw.rectangle((x0 - 1, y0 - 1, x1 + 1, y1 + 1), outline=VICTIM_COLOR, width=w)
            if not self.labelled:
                continue
            centers = (boxes[:, :2] + boxes[:, 2:]) / 2
            one_line = self._frame.label_px if panel.view != "lru" else size  # lru: up to 3 lines
            for (x, y), label, dark in zip(centers.tolist(), panel.labels, panel.dark.tolist(), strict=True):
                color = "white" if dark else "black"
                lines = label.split("\n")
                sizes = [size] * len(lines) if len(lines) > 1 else [one_line]  # none shrinks
                top = y - 0.55 * sum(sizes) + 0.55 * sizes[0]
                for line, line_size in zip(lines, sizes, strict=True):
                    stamp_text(image, (x, top), fit_text(line, line_size, room), line_size, color, "mm")
                    top += 1.1 * line_size

    def title_rows(self, panel: Panel) -> list[tuple[str, float, float]]:
        """(text, left x, baseline y) of each line of `panel`'s changing title as stamped:
        the last line just above the grid, the others above it."""
        (x, y), lines = panel.frame.title_xy, panel.title.split("\n") if panel.title else []
        step = 1.3 * TITLE_PT * self._frame.px
        return [(line, x, y + (k + 1 - len(lines)) * step) for k, line in enumerate(lines)]

    def legend_rows(self, panel: Panel) -> list[tuple[str, list[str], float, float]]:
        """(colour, text lines, left x, top y) of each row of `panel`'s legend as stamped:
        from its title's line where that title ends before the key, else below the grid's top
        edge (never over a title), each name whole or wrapped after its last "_" / "." to fit
        before the next panel or the picture's edge (no two names look the same), then
        "+k more". Names that fit whole in half that room flow into two columns when one
        column is too short for them (a short grid with a wide key beside it)."""
        x0, y0, _, y1 = panel.frame.key_box
        px, size = self._frame.px, round(FONT_PT * self._frame.px)
        line = 1.45 * FONT_PT * px
        right = min(
            [p.frame.boxes[0, 0] for p in self.panels.values() if p.frame.boxes[0, 0] > x0],
            default=self.size[0],
        )
        room = right - (x0 + 22 * px) - 4 * px
        top = max(y0, min(panel.frame.key_top, float(panel.frame.boxes[:, 1].min())))
        per_column = max(2, int((max(y1, top) - top) // line))  # lines
        half = (right - x0) / 2 - 23 * px  # a column's width less its swatch (22 px) and 1 px
        columns = 2 if len(panel.legend) > per_column and all(
            fit_text(label, size, half) == label for _, label in panel.legend
        ) else 1  # fmt: skip
        room = half if columns == 2 else room
        every = [(color, _legend_lines(label, size, room)) for color, label in panel.legend]
        cut = len(every) - panel.fixed_rows  # the fixed rows (the states) come last, whole
        named, fixed = every[:cut], every[cut:]
        hidden = sum(int(label[1:].split()[0]) for color, label in panel.legend[:cut] if not color)
        named = [row for row in named if row[0]]
        keep, fits, tail = len(named), per_column * columns, sum(len(lines) for _, lines in fixed)
        while (
            keep
            and sum(len(lines) for _, lines in named[:keep]) + tail + (keep < len(named) or hidden) > fits
        ):
            keep -= 1
        rows = named[:keep]
        if hidden + len(named) - keep:
            more = f"+{hidden + len(named) - keep} more"
            rows.append(("", [more if fit_text(more, size, room) == more else more.split()[0]]))
        out, used = [], 0  # lines so far
        for color, lines in [*rows, *fixed]:
            column, k = divmod(used, per_column) if columns == 2 else (0, used)
            out.append((color, lines, x0 + column * (right - x0) / 2, top + k * line))
            used += len(lines)
        return out

    def _stamp_legend(self, image: Image.Image, draw: ImageDraw.ImageDraw, panel: Panel) -> None:
        px = self._frame.px
        line, size = 1.45 * FONT_PT * px, round(FONT_PT * px)
        for color, lines, x, y in self.legend_rows(panel):
            x += 4 * px
            if color:
                draw.rectangle((x, y + 2, x + 14 * px, y + line - 2), fill=color, outline="#999999")
            for k, text in enumerate(lines):
                stamp_text(image, (x + 18 * px, y + (k + 0.5) * line), text, size, "black", "lm")

    def _repr_png_(self) -> bytes:
        return self.png()

    def __repr__(self) -> str:
        clock = None if self.snapshot is None else self.snapshot.clock
        when = f"label={self.label!r}" if self.label else f"clock={clock}"  # the title's counter
        geometry = f"num_pages={self.num_pages}, page_size={self.page_size}, views={self.views}"
        return f"PoolHeatmap({geometry}, {when})"


def plot_pool(
    snapshot: PoolSnapshot,
    views: Sequence[str] = ("state", "occupancy", "owner", "ref_count"),
    palette: SequencePalette | None = None,
    events: Iterable[Event] | None = None,
    label: str | None = None,
    columns: int | None = None,
) -> PoolHeatmap:
    """Heatmaps of one snapshot, shown as a PNG. `events` name the last holder of CACHED pages
    (LRU view); a `label` ("after scheduler step 8") titles it instead of the pool's clock;
    `columns=1` stacks the views, each as wide, and its text as large, as a view alone."""
    check_instance("snapshot", snapshot, PoolSnapshot)
    heatmap = PoolHeatmap(
        snapshot.num_pages, snapshot.page_size, views, palette, columns=columns, label=label
    )
    heatmap.update(snapshot, events)
    return heatmap


def plot_lru(snapshot: PoolSnapshot, events: Iterable[Event] | None = None, label: str | None = None,
             owners: bool = False) -> PoolHeatmap:  # fmt: skip
    """The LRU-order heatmap alone: CACHED pages in eviction order (#1 outlined), the sequence
    that last held each (given the pool's `events`) and, with `owners`, each ACTIVE page's
    owner. `label` ("before doc_C's step") names the moment in the title."""
    heatmap = plot_pool(snapshot, ("lru",), label=label)  # checks the snapshot
    heatmap.active_owners = bool(owners)
    heatmap.update(snapshot, events)
    return heatmap
