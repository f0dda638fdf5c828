"""The same workload in a paged pool and in contiguous memory, drawn side by side.

`plot_paged_vs_contiguous` draws both memories slot by slot in the vLLM paper's categories
(`pagedkv.viz.slot_layout`: tokens, reserved, internal and external fragmentation, cached,
free), reserved slots in a light tint of their request's colour, dotted (the key shows each
tint), next to the share bars.

Leaves out: the time dimension (see `plot_usage`) and allocators other than first fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.legend_handler import HandlerTuple
from matplotlib.patches import Patch, Rectangle

from pagedkv.core.observe.snapshot import PoolSnapshot
from pagedkv.core.page import PageState
from pagedkv.labs.contiguous import Reservation
from pagedkv.viz.palette import DEFAULT_PALETTE, SequencePalette
from pagedkv.viz.projector import projector
from pagedkv.viz.share_bars import draw_shares
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


def _row_width(num_slots: int, page_size: int) -> int:
    width = page_size
    while width * 2 <= 64 and num_slots / (width * 2) >= 4:
        width *= 2
    return width


def _draw_strip(
    ax: Axes,
    colors: np.ndarray,
    marks: dict[str, np.ndarray],
    boxes: list[tuple[int, int]],
    width: int,
    title: str,
    ylabel: str = "first slot of row",
) -> None:
    """Slots in flat order wrapped into rows of `width`; boxes outline (start, length) runs."""
    n = len(colors)
    rows = -(-n // width)
    image = np.ones((rows * width, 4))
    image[:n] = colors
    ax.imshow(image.reshape(rows, width, 4), interpolation="nearest", aspect="auto")
    for marker, slots in marks.items():
        if len(slots):
            ax.scatter(slots % width, slots // width, marker=marker, s=14, color="#333333", linewidths=0.7)
    for start, length in boxes:
        slot = start
        while slot < start + length:  # one outline per row the run crosses
            r, c = divmod(slot, width)
            span = min(width - c, start + length - slot)
            ax.add_patch(Rectangle((c - 0.5, r - 0.5), span, 1, fill=False, edgecolor="black", linewidth=1.3))
            slot += span
    ax.set_xticks([])
    ax.set_yticks(range(rows), [str(r * width) for r in range(rows)], fontsize=7)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.set_title(title, fontsize=10, loc="left")


def plot_paged_vs_contiguous(
    snapshots: Sequence[PoolSnapshot],
    policy: str = "max",
    max_seq_len: int | None = None,
    step: int | None = None,
    palette: SequencePalette | None = None,
) -> Figure:
    """Side by side at `step` (default: the last): the paged pool, the contiguous replay and
    the share bars.
    The legend names every sequence's colour and only the categories the picture shows."""
    palette, step = palette if palette is not None else DEFAULT_PALETTE, check_step(snapshots, step)
    cache, refused = contiguous_replay(snapshots, policy, max_seq_len, step)
    snap = snapshots[step]
    size, num_slots = snap.page_size, snap.num_pages * snap.page_size
    width = _row_width(num_slots, size)
    counts = {"paged": paged_counts(snap), "contiguous": contiguous_counts(cache)}
    # Strips and bars side by side: with the text about it on one 1280x720 screen (~310 px at 850 wide).
    fig = Figure(figsize=(11, 2.4 + 0.42 * -(-num_slots // width)), dpi=90, layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(1, 3, width_ratios=[1, 1, 0.8])
    paged, empty = paged_slots(snap, palette)
    _draw_strip(
        fig.add_subplot(grid[0, 0]),
        paged,
        {"x": empty},
        [(pid * size, size) for pid in range(snap.num_pages) if snap.state[pid] != PageState.FREE],
        width,
        f"paged: {snap.num_pages} pages of {size} slots,\n{len(snap.seq_ids)} sequences, "
        f"{counts['paged']['tokens'] / num_slots:.0%} hold tokens",
    )
    reserve = f"{cache.max_seq_len} slots reserved per request"
    how = reserve if policy == "max" else f"{policy!r}, max_seq_len {cache.max_seq_len}"
    title = f"contiguous ({how}):\n{len(cache)} sequences, "
    title += f"{counts['contiguous']['tokens'] / num_slots:.0%} hold tokens"
    if refused:
        title += f";\nrefused (no hole fits): {', '.join(map(str, refused))}"
    reservations = cache.accounting().reservations
    contiguous, marks = contiguous_slots(cache, palette, num_slots)
    ranges = [(r.start, r.length) for r in reservations]
    _draw_strip(fig.add_subplot(grid[0, 1]), contiguous, marks, ranges, width, title, ylabel="")
    shown = [c for c in CATEGORIES if counts["paged"][c] or counts["contiguous"][c]]
    draw_shares(fig.add_subplot(grid[0, 2]), counts, shown, num_slots, STYLES)
    # One key for strips and bars: a swatch per sequence (a refused one too), then the categories.
    seq_ids = list(dict.fromkeys([*snap.seq_ids, *(r.req_id for r in reservations), *refused]))
    key: list[tuple[Any, str]] = [(Patch(facecolor=palette.color(s)), f"token of {s}") for s in seq_ids]
    key += _reserved_key(reservations, palette)
    for category in shown:
        face, hatch, label = STYLES[category]
        label = "tokens, in the share bars" if category == "tokens" else label
        key.append((Patch(facecolor=face, hatch=hatch, edgecolor="#555555"), label))
    key.append(
        (Patch(fill=False, lw=2.5), "outline: a page handed out (paged),\n  a request's range (contiguous)")
    )
    fig.legend([h for h, _ in key], [label for _, label in key], loc="outside lower center", ncols=3,
               fontsize=8, frameon=False, handlelength=3, handleheight=1.2,
               handler_map={tuple: HandlerTuple(ndivide=None, pad=0)})  # fmt: skip
    return projector(fig)


def _reserved_key(reservations: Sequence[Reservation], palette: SequencePalette) -> list[tuple[Any, str]]:
    """The key of reserved slots as the strips draw them: each request's tint, dotted."""
    tints = [light_tint(palette.rgba(r.req_id)) for r in reservations if r.final_len > r.used]
    swatch = tuple(Patch(facecolor=t, hatch="..", edgecolor="#555555", lw=0) for t in tints)
    label = "reserved: written by its request later\n(its request's colour, light)"
    return [(swatch, label)] if tints else []
