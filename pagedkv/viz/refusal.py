"""A refused operation and the pool it left alone, before and after.

When the pool cannot give the pages an operation needs it raises `OutOfPagesError` before
changing anything (docs/design.md: a failed call leaves the state exactly as before).
`plot_refusal(before, after, error)` draws the page states and fill of both snapshots, one above
the other, under the exception a caller's code gets (its class and message), and says
whether the two snapshots are equal. vLLM's scheduler sees the same situation as
`allocate_slots` returning None and preempts; here the caller decides.

Leaves out: which operation was refused (the caller's message names it).
"""

from __future__ import annotations

import textwrap

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from pagedkv.core.observe.snapshot import PoolSnapshot
from pagedkv.core.page import PageState
from pagedkv.core.plumbing.validation import check_instance
from pagedkv.viz.frame import grid_shape
from pagedkv.viz.palette import STATE_COLORS
from pagedkv.viz.projector import projector


def plot_refusal(before: PoolSnapshot, after: PoolSnapshot, error: BaseException) -> Figure:
    """Page states and fill before (top) and after (below) a refused call, titled with the
    exception."""
    check_instance("before", before, PoolSnapshot)
    check_instance("after", after, PoolSnapshot)
    check_instance("error", error, BaseException)
    rows, cols = grid_shape(before.num_pages)
    fig = Figure(figsize=(11, 1.4 + 1.4 * rows), layout="constrained")
    FigureCanvasAgg(fig)
    cmap = ListedColormap([STATE_COLORS[s] for s in PageState])
    same = before == after
    message = textwrap.fill(f"{type(error).__name__}: {error}", 90)
    fig.suptitle(f"{message}\nsnapshot after == snapshot before: {same}", fontsize=13, x=0.01, ha="left")
    for ax, snap, title in zip(
        fig.subplots(2, 1), (before, after), ("before the call", "after the refused call"), strict=True
    ):
        grid = np.full(rows * cols, np.nan)
        grid[: snap.num_pages] = snap.state
        ax.imshow(grid.reshape(rows, cols), cmap=cmap, vmin=0, vmax=2, aspect="auto")
        for pid in range(snap.num_pages):
            r, c = divmod(pid, cols)
            dark = snap.state[pid] == PageState.ACTIVE
            ax.text(c, r, f"{pid}\n{snap.fill[pid]}/{snap.page_size}", ha="center", va="center",
                    fontsize=15, color="white" if dark else "black")  # fmt: skip
        free = int((snap.state == PageState.FREE).sum())
        ax.set_title(f"{title}: {free} FREE pages (each cell: page id, then slots filled)",
                     fontsize=14, loc="left")  # fmt: skip
        ax.set_xticks(np.arange(cols + 1) - 0.5, minor=True)  # a white line between pages
        ax.set_yticks(np.arange(rows + 1) - 0.5, minor=True)
        ax.grid(which="minor", color="white", linewidth=2)
        ax.tick_params(which="both", length=0, labelbottom=False, labelleft=False)
    return projector(fig)
