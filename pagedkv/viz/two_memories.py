"""Notebook 01's paged-against-contiguous pictures, split in two for a projector.

`plot_two_memories` draws the paged pool and the contiguous replay slot by slot, side by side,
with each page's id in the paged grid (so its cells match the block tables) and marks large
enough for a room: × on empty slots of a last page or a range's unused end, / on a hole too
small to use, dots on slots a range reserves for its request's later tokens.
`plot_share_bars` draws the two memories' slot counts as stacked bars, every count inside or
beside its own segment.

Leaves out: the time dimension (see `plot_usage`); both reuse `pagedkv.viz.slot_layout`'s
replay, counts and colours, so their numbers are `compare_layouts`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from pagedkv.core.observe.snapshot import PoolSnapshot
from pagedkv.viz.palette import DEFAULT_PALETTE, SequencePalette
from pagedkv.viz.projector import projector
from pagedkv.viz.slot_layout import (
    CATEGORIES,
    STYLES,
    check_step,
    contiguous_counts,
    contiguous_replay,
    contiguous_slots,
    light_tint,
    paged_counts,
    paged_slots,
)

MARK_S = 260  # scatter size (points²) of × and /: ~16 pt, ≥ 12 px on screen at 848 px
LABEL_PT = 14  # page ids and row numbers


def _grid(ax: Axes, colors: np.ndarray, marks: dict[str, np.ndarray], width: int) -> None:
    """Slots in flat order, `width` to a row; each mark drawn in the lower part of its slot."""
    rows = -(-len(colors) // width)
    image = np.ones((rows * width, 4))
    image[: len(colors)] = colors
    ax.imshow(image.reshape(rows, width, 4), interpolation="nearest", aspect="auto")
    for marker, slots in marks.items():
        if len(slots):
            ax.scatter(slots % width, slots // width + 0.12, marker=marker, s=MARK_S, color="#222222", lw=1.6)
    ax.set_xticks([])
    ax.set_yticks(range(rows), [str(r * width) for r in range(rows)], fontsize=LABEL_PT)


def _outline(ax: Axes, start: int, length: int, width: int, label: str = "") -> None:
    """Outline the slots start..start+length-1, one box per row; `label` above its first slot."""
    slot = start
    while slot < start + length:
        r, c = divmod(slot, width)
        span = min(width - c, start + length - slot)
        ax.add_patch(Rectangle((c - 0.5, r - 0.5), span, 1, fill=False, edgecolor="black", lw=2))
        slot += span
    if label:
        r, c = divmod(start, width)
        ax.text(
            c - 0.42,
            r - 0.42,
            label,
            ha="left",
            va="top",
            fontsize=LABEL_PT,
            bbox={"fc": "white", "pad": 0.5, "lw": 0},
        )


def plot_two_memories(
    snapshots: Sequence[PoolSnapshot],
    policy: str = "oracle",
    max_seq_len: int | None = None,
    step: int | None = None,
    palette: SequencePalette | None = None,
) -> Figure:
    """At `step` (default: the last): the paged pool (page ids in its pages) and the contiguous
    replay under `policy`, slot by slot, with one key below."""
    palette, step = palette if palette is not None else DEFAULT_PALETTE, check_step(snapshots, step)
    cache, refused = contiguous_replay(snapshots, policy, max_seq_len, step)
    snap = snapshots[step]
    size = snap.page_size
    num_slots = snap.num_pages * size
    width = 4 * size
    fig = Figure(figsize=(11, 1.7 + 0.6 * -(-num_slots // width)), layout="constrained")  # 64 slots: 451 px
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2)
    colors, empty = paged_slots(snap, palette)
    _grid(left, colors, {"x": empty}, width)
    for pid in range(snap.num_pages):
        _outline(left, pid * size, size, width, f"page {pid}")
    left.set_title(f"paged: {snap.num_pages} pages of {size} slots", fontsize=LABEL_PT, loc="left")
    colors, marks = contiguous_slots(cache, palette, num_slots)
    _grid(right, colors, marks, width)
    reservations = cache.accounting().reservations
    for r in reservations:
        _outline(right, r.start, r.length, width)
    title = f"contiguous {policy!r}: one range per request"
    right.set_title(title + (f"; refused: {', '.join(map(str, refused))}" if refused else ""),
                    fontsize=LABEL_PT, loc="left")  # fmt: skip
    seq_ids = list(dict.fromkeys([*snap.seq_ids, *(r.req_id for r in reservations), *refused]))
    key: list[tuple[Any, str]] = [(Patch(facecolor=palette.color(s)), f"token of {s}") for s in seq_ids]
    if any(r.final_len > r.used for r in reservations):
        tint = light_tint(palette.rgba(reservations[0].req_id))
        key.append(
            (Patch(facecolor=tint, hatch="..", edgecolor="#555555"), "reserved (light): for a later token")
        )
    for category, mark in (("internal_fragmentation", "×"), ("external_fragmentation", "/"), ("free", "")):
        face, hatch, _ = STYLES[category]
        label = {"×": "× empty: internal fragmentation", "/": "/ hole too small: external", "": "free"}[mark]
        key.append((Patch(facecolor=face, hatch=hatch, edgecolor="#555555"), label))
    fig.legend([h for h, _ in key], [label for _, label in key], loc="outside lower center", ncols=3,
               fontsize=LABEL_PT, frameon=False, handlelength=2.5, handleheight=1.2)  # fmt: skip
    return projector(fig)


def _bars(ax: Axes, counts: dict[str, dict[str, int]], shown: list[str]) -> None:
    """One stacked bar per memory, in slots; every segment carries its count inside it."""
    for y, memory in ((1.0, "paged"), (0.0, "contiguous")):
        start = 0
        for category in shown:
            n = counts[memory][category]
            face, hatch, _ = STYLES[category]
            ax.barh(y, n, left=start, height=0.7, color=face, hatch=hatch, lw=0.8, ec="#555555")
            if n:
                ax.text(start + n / 2, y, str(n), ha="center", va="center", fontsize=LABEL_PT + 1,
                        bbox={"fc": "white", "pad": 1, "lw": 0})  # fmt: skip
            start += n


def plot_share_bars(
    snapshots: Sequence[PoolSnapshot],
    policy: str = "oracle",
    max_seq_len: int | None = None,
    step: int | None = None,
) -> Figure:
    """The slot counts of both memories at `step` as two stacked bars, keyed below."""
    step = check_step(snapshots, step)
    cache, _ = contiguous_replay(snapshots, policy, max_seq_len, step)
    snap = snapshots[step]
    num_slots = snap.num_pages * snap.page_size
    counts = {"paged": paged_counts(snap), "contiguous": contiguous_counts(cache)}
    shown = [c for c in CATEGORIES if counts["paged"][c] or counts["contiguous"][c]]
    fig = Figure(figsize=(11, 3.6), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    _bars(ax, counts, shown)
    ax.set_xlim(0, num_slots)
    ax.set_yticks([1.0, 0.0], ["paged", f"contiguous\n{policy!r}"], fontsize=LABEL_PT)
    ax.set_title(f"slots of each kind, out of {num_slots}", fontsize=LABEL_PT, loc="left")
    labels = {c: STYLES[c][2].split(":")[0].split(",")[0] for c in shown}
    handles = [Patch(facecolor=STYLES[c][0], hatch=STYLES[c][1], edgecolor="#555555") for c in shown]
    fig.legend(
        handles, [labels[c] for c in shown], loc="outside right center", fontsize=LABEL_PT, frameon=False
    )
    return projector(fig)
