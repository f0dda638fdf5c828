"""A refused operation and the pool it left alone.

When the pool cannot give the pages an operation needs it raises `OutOfPagesError` before
changing anything (docs/design.md: a failed call leaves the state exactly as before).
`plot_refusal(before, after, error, seq_id)` draws the pool under the exception a caller's
code gets (its class and message) and says whether the snapshots taken before and after the
call are equal. Each page is drawn in its owner's colour with its fill, so the reason shows:
every page is held. `seq_id`'s last page, the full one its next token cannot go into, is
outlined. Equal snapshots are drawn once; different ones (a bug) side by side, so the change
shows. vLLM's scheduler sees the same situation as `allocate_slots` returning None and
preempts; here the caller decides.

Leaves out: which operation was refused (the caller's message names it).
"""

from __future__ import annotations

import textwrap
from collections.abc import Hashable

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from pagedkv.core.observe.snapshot import PoolSnapshot
from pagedkv.core.page import PageState
from pagedkv.core.plumbing.validation import check_instance
from pagedkv.viz.grid import grid_shape
from pagedkv.viz.palette import STATE_COLORS, SequencePalette
from pagedkv.viz.projector import projector

OUTLINE = "#B91C1C"  # the page the refused token needed a successor for


def plot_refusal(
    before: PoolSnapshot,
    after: PoolSnapshot,
    error: BaseException,
    seq_id: Hashable | None = None,
    palette: SequencePalette | None = None,
) -> Figure:
    """The pool after a refused call (and before it, if the two differ), titled with the
    exception; `seq_id`'s full last page outlined."""
    check_instance("before", before, PoolSnapshot)
    check_instance("after", after, PoolSnapshot)
    check_instance("error", error, BaseException)
    if seq_id is not None and seq_id not in after.block_tables:
        raise ValueError(
            f"seq_id {seq_id!r} is not a live sequence of the snapshot; live: {list(after.seq_ids)}"
        )
    palette = palette if palette is not None else SequencePalette()
    same = before == after
    rows, cols = grid_shape(before.num_pages)
    panels = [(after, "the pool, unchanged by the refused call")] if same else [
        (before, "before the call"), (after, "after the refused call: it changed!")
    ]  # fmt: skip
    fig = Figure(figsize=(11, 1.9 + 1.1 * rows * len(panels)), layout="constrained")
    FigureCanvasAgg(fig)
    message = textwrap.fill(f"{type(error).__name__}: {error}", 90)
    fig.suptitle(f"{message}\nsnapshot after == snapshot before: {same}", fontsize=13, x=0.01, ha="left")
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, (snap, title) in zip(axes, panels, strict=True):
        _draw(ax, snap, rows, cols, palette, seq_id)
        free = int((snap.state == PageState.FREE).sum())
        ax.set_title(f"{title}: {free} FREE pages; each cell: page id, then slots filled",
                     fontsize=14, loc="left")  # fmt: skip
    owners = [Patch(color=palette.color(s), label=str(s)) for s in after.seq_ids]
    if seq_id is not None:
        owners.append(
            Patch(facecolor="none", edgecolor=OUTLINE, linewidth=3, label=f"{seq_id}'s full last page")
        )
    fig.legend(handles=owners, loc="outside lower left", ncols=len(owners), fontsize=13, frameon=False)
    return projector(fig)


def _draw(
    ax: Axes, snap: PoolSnapshot, rows: int, cols: int, palette: SequencePalette, seq_id: Hashable | None
) -> None:
    """One snapshot's pages as a grid of cells in their owners' colours (state colours for
    pages nobody holds), each with its id and fill."""
    ax.set_xlim(-0.5, cols - 0.5)
    ax.set_ylim(rows - 0.5, -0.5)
    last = snap.block_tables[seq_id][-1] if seq_id is not None and snap.block_tables.get(seq_id) else None
    for pid in range(snap.num_pages):
        r, c = divmod(pid, cols)
        k = int(snap.owner[pid])
        holder = snap.seq_ids[k] if k >= 0 else None
        color = palette.color(holder) if holder is not None else STATE_COLORS[PageState(int(snap.state[pid]))]
        ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, facecolor=color, edgecolor="white", linewidth=2))
        ink = palette.text_color(holder) if holder is not None else "black"
        ax.text(
            c,
            r,
            f"{pid}\n{snap.fill[pid]}/{snap.page_size}",
            ha="center",
            va="center",
            fontsize=15,
            color=ink,
        )
    if last is not None:
        r, c = divmod(last, cols)
        ax.add_patch(
            Rectangle((c - 0.45, r - 0.45), 0.9, 0.9, facecolor="none", edgecolor=OUTLINE, linewidth=4)
        )
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_visible(False)
