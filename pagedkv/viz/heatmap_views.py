"""What each heatmap view shows: the colour and label of every cell, per view.

`PoolHeatmap` lays out panels and stamps pictures; this module decides their content. For
one `PoolSnapshot`, `view_cells(view, ...)` gives each page's RGBA colour and its label
text, and fills the panel's changing title, next-victim outline and owner legend:

- `state`: FREE / ACTIVE / CACHED colours, the page id as label;
- `occupancy`: filled slots / `page_size`, the filled count as label;
- `owner`: the oldest holder's palette colour, with a legend of sequences; pages no one
  holds are pale grey (FREE) or orange (CACHED: full, hashed, reusable, as in `state`);
- `ref_count`: how many block tables hold the page, capped at `REF_COUNT_MAX`;
- `lru`: eviction order among CACHED pages (#1 = next victim), and, given the pool's
  events, the sequence that last held each CACHED page (`last_holders`).

vLLM computes the same facts (its free block queue order, block ref_cnt) but draws none of
them. Leaves out: pixels and text placement (`pagedkv.viz.heatmap`, `pagedkv.viz.frame`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import to_rgba_array

from pagedkv.core.observe.snapshot import PoolSnapshot
from pagedkv.core.page import PageState
from pagedkv.core.plumbing.events import Event
from pagedkv.viz.frame import (
    FONT_PT,
    LRU_ACTIVE_COLOR,
    LRU_FREE_COLOR,
    REF_COUNT_MAX,
    TITLE_PT,
    Frame,
    PanelFrame,
    lru_title,
)
from pagedkv.viz.glyphs import fit_text, wrap_text
from pagedkv.viz.palette import (
    CACHED_NO_OWNER_COLOR,
    LRU_CMAP,
    NO_OWNER_COLOR,
    OCCUPANCY_CMAP,
    REF_COUNT_CMAP,
    STATE_COLORS,
    SequencePalette,
)

VIEWS = ("state", "occupancy", "owner", "ref_count", "lru")
MAX_LEGEND_SEQUENCES = 10

_STATE_RGBA = to_rgba_array([STATE_COLORS[s] for s in PageState])  # [3, 4] by state code
_LRU_STATE_RGBA = to_rgba_array([LRU_FREE_COLOR, LRU_ACTIVE_COLOR, "#000000"])  # [3, 4]


class Panel:
    """One view's current picture: cell colours, labels and the marks that change."""

    def __init__(self, frame: PanelFrame) -> None:
        self.frame, self.view = frame, frame.view
        self.colors = np.zeros(0, np.uint32)  # [num_pages] packed RGBA of each cell
        self.labels: list[str] = []  # [num_pages] "\n" splits up to three lines
        self.dark = np.zeros(0, bool)  # [num_pages] the cell needs white text
        self.title = ""  # a title that changes with the snapshot ("" keeps the static one)
        self.victim = -1  # page outlined as next victim (lru view), -1 for none
        self.legend: list[tuple[str, str]] = []  # (colour, label) rows of the owner legend
        self.fixed_rows = 1  # the legend's last rows, never folded into "+k more"


class ViewContext:
    """What the views read besides the snapshot: the palette, the shared frame (for label
    widths) and the last holder of each CACHED page."""

    def __init__(self, palette: SequencePalette, frame: Frame, holders: dict[int, Hashable]) -> None:
        self.palette, self.frame, self.holders = palette, frame, holders


_View = Callable[[PoolSnapshot, Panel, ViewContext], tuple[np.ndarray, list[str]]]


def view_cells(snap: PoolSnapshot, panel: Panel, ctx: ViewContext) -> tuple[np.ndarray, list[str]]:
    """[num_pages, 4] RGBA colours and [num_pages] labels of `panel`'s view of `snap`; sets
    the panel's title, victim and legend where its view has them."""
    return _VIEW_CELLS[panel.view](snap, panel, ctx)


def _ids(snap: PoolSnapshot) -> list[str]:
    return [str(p) for p in range(snap.num_pages)]


def _state(snap: PoolSnapshot, panel: Panel, ctx: ViewContext) -> tuple[np.ndarray, list[str]]:
    return _STATE_RGBA[snap.state], _ids(snap)


def _occupancy(snap: PoolSnapshot, panel: Panel, ctx: ViewContext) -> tuple[np.ndarray, list[str]]:
    rgba = colormaps[OCCUPANCY_CMAP](snap.fill / snap.page_size)
    return rgba, [str(f) for f in snap.fill.tolist()]  # of page_size: the title says so


def _owner(snap: PoolSnapshot, panel: Panel, ctx: ViewContext) -> tuple[np.ndarray, list[str]]:
    colors = [ctx.palette.color(s) for s in snap.seq_ids]
    rgba = to_rgba_array([*colors, NO_OWNER_COLOR])[snap.owner]  # owner -1: last row
    # no holder either way, but a CACHED page keeps its tokens and hash: its own colour
    rgba[(snap.owner < 0) & (snap.state == PageState.CACHED)] = to_rgba_array(CACHED_NO_OWNER_COLOR)[0]
    # the key names the sequences the picture colours: a fork that has not written yet holds
    # only pages an older sequence owns, so it has no cell of its own colour and no key row
    owning = set(snap.owner.tolist())
    owners = [(c, str(s)) for k, (c, s) in enumerate(zip(colors, snap.seq_ids, strict=True)) if k in owning]
    owners.sort(key=lambda row: _fold_rank(row[1]))  # when the key is short, forks fold first
    panel.legend = owners[:MAX_LEGEND_SEQUENCES]
    if len(owners) > len(panel.legend):
        panel.legend.append(("", f"+{len(owners) - len(panel.legend)} more"))
    # no holder: the state, named when the picture has such a cell. FREE grey only when no
    # page-state view keys it (a key with room for four rows then names sequences); CACHED
    # orange always, as no sequence colour is orange and learners look for it in this key
    keyed = any(p.view == "state" for p in ctx.frame.panels)
    fixed = []
    if (snap.state == PageState.FREE).any() and not keyed:
        fixed.append((NO_OWNER_COLOR, "FREE"))
    if (snap.state == PageState.CACHED).any():
        fixed.append((CACHED_NO_OWNER_COLOR, "CACHED"))
    panel.legend += fixed
    panel.fixed_rows = len(fixed)  # after the sequences, never folded
    return rgba, _ids(snap)


def _fold_rank(seq_id: str) -> int:
    """Where a sequence's row goes in the owner key, so that what folds into "+k more" is
    the least telling: the scenario's own sequences (0), then requests you added ("yours1",
    1), then forks you made ("req1.f1", 2). A stable sort keeps age order within each."""
    return 2 if re.search(r"\.f\d+$", seq_id) else int(seq_id.startswith("yours"))


def _ref_count(snap: PoolSnapshot, panel: Panel, ctx: ViewContext) -> tuple[np.ndarray, list[str]]:
    levels = np.minimum(snap.ref_count, REF_COUNT_MAX) / REF_COUNT_MAX
    return colormaps[REF_COUNT_CMAP](levels), [str(r) for r in snap.ref_count.tolist()]


def _lru(snap: PoolSnapshot, panel: Panel, ctx: ViewContext) -> tuple[np.ndarray, list[str]]:
    rank, holders = snap.lru_rank, ctx.holders
    cached = rank >= 0
    m = int(cached.sum())
    rgba = _LRU_STATE_RGBA[snap.state].copy()
    # 1.0 (CACHED orange) = next victim, 0.0 (a light tint of it) = evicted last.
    rgba[cached] = LRU_CMAP(1.0 - rank[cached] / max(m - 1, 1))
    names = {p: wrap_seq_id(h, ctx.frame) for p, h in holders.items()}  # "" where none fits
    labels = [
        "\n".join(x for x in (str(p), f"#{r + 1}" if r >= 0 else "", names.get(p, "")) if x)
        for p, r in enumerate(rank.tolist())
    ]
    free = int(np.count_nonzero(snap.state == PageState.FREE))
    panel.victim = int(np.flatnonzero(rank == 0)[0]) if m else -1
    size = round(TITLE_PT * ctx.frame.px)
    panel.title = wrap_text(lru_title(panel.victim, free), size, panel.frame.title_room)
    return rgba, labels


_VIEW_CELLS: dict[str, _View] = {
    "state": _state,
    "occupancy": _occupancy,
    "owner": _owner,
    "ref_count": _ref_count,
    "lru": _lru,
}


def wrap_seq_id(seq_id: Hashable, frame: Frame) -> str:
    """A sequence id that fits its cell: whole, or split after its last "_" / "." onto
    two lines (request_A -> "request_" / "A"); "" when even that does not fit (a name cut
    in the middle, "sa…le.", reads as nothing: the cell then shows its id and rank only)."""
    text, px = str(seq_id), frame.px
    room, size = frame.cell_px - 4 * px, round(FONT_PT * px)
    cut = max(text.rfind("_"), text.rfind("."))
    for parts in ([text], [text[: cut + 1], text[cut + 1 :]] if cut > 0 else []):
        if all(fit_text(part, size, room) == part for part in parts):
            return "\n".join(parts)
    return ""


def last_holders(
    snapshot: PoolSnapshot, events: Iterable[Event] | None, active: bool = False
) -> dict[int, Hashable]:
    """CACHED page id -> the sequence whose release made it CACHED (its latest `cache`
    event); empty without events. The snapshot does not keep this: a CACHED page has no
    block table, so its history is the only place that names it. With `active`, each ACTIVE
    page also maps to the first sequence whose block table holds it (its owner)."""
    holders: dict[int, Hashable] = {}
    if active:
        for seq_id, table in snapshot.block_tables.items():
            for page in table:
                holders.setdefault(int(page), seq_id)
    if events is None:
        return holders
    cached = set(np.flatnonzero(snapshot.state == PageState.CACHED).tolist())
    for event in events:
        if event.kind == "cache" and event.page_id in cached:
            holders[event.page_id] = event.seq_id
    return holders


def legend_lines(label: str, size_px: int, room: float) -> list[str]:
    """`label` on one line if it fits `room` px, else split after its last "_", "." or space
    (each part shortened in the middle with "…" only if it still does not fit)."""
    if fit_text(label, size_px, room) == label:
        return [label]
    cut = max(label.rfind("_"), label.rfind("."), label.rfind(" "))
    parts = [label[: cut + 1].rstrip(), label[cut + 1 :]] if cut > 0 else [label]
    return [fit_text(part, size_px, room) for part in parts]
