"""The buddy arena of notebook 11 as bars: one bar per moment, one segment per block.

Each request's block shows the slots it asked for (its colour) and the slots the buddy
allocator rounded away (the same colour, hatched and paler); a free block is white. A part
too thin for a label inside (C's 28 rounded-away slots) gets a callout under its bar. Each
bar's title sums what it shows, so two bars side by side link their totals. Leaves out:
which slots hold tokens and which are reserved for outputs (the printed table splits them).
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure

from pagedkv.labs.contiguous import Reservation
from pagedkv.viz.palette import REQUEST_COLORS_BESIDE_SYSTEMS
from pagedkv.viz.projector import projector

NARROW_IN = 9.0  # inches, as the capacity figures: text of 12 pt stays >= 15 px in an 848 px cell

# (title, the reservations, the free blocks as (start, slots)) of one moment of the arena
Moment = tuple[str, Sequence[Reservation], Sequence[tuple[int, int]]]
ROOM = 0.07  # a segment narrower than this share of the arena carries its short label only
SHORT_ROOM = 0.04  # and one narrower than this a callout under the bar (C's 28 rounded away)
BAR = 0.4  # half the bar's height; the callouts sit under it, at CALLOUT_Y
CALLOUT_Y = -0.8


def plot_buddy_arena(moments: Sequence[Moment], num_slots: int) -> Figure:
    """One bar of `num_slots` slots per moment, top to bottom: per request, the slots it
    asked for (labelled `name asked`) and those rounded away (labelled with their count);
    free blocks white, labelled `free N`. A part too thin for its label is named by a callout
    under the bar. A request keeps its colour in every bar, one no serving system has."""
    fig = Figure(figsize=(11, 1.5 + 1.6 * len(moments)))
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(moments), 1, squeeze=False)[:, 0]
    names = sorted({r.req_id for _, reservations, _ in moments for r in reservations}, key=str)
    # request colours of the shared palette, none a serving system's (section 4's figure is near)
    beside = REQUEST_COLORS_BESIDE_SYSTEMS
    colour = {name: beside[i % len(beside)] for i, name in enumerate(names)}
    for ax, (title, reservations, free) in zip(axes, moments, strict=True):
        for r in reservations:
            fill, rounded = colour[r.req_id], r.length - r.asked
            _segment(
                ax, r.start, r.asked, fill, (f"{r.req_id} {r.asked}", f"{r.req_id}\n{r.asked}"), num_slots
            )
            _segment(ax, r.start + r.asked, rounded, fill, (f"{rounded}",) * 2, num_slots, hatch=True)
        for start, length in free:  # the short label on two lines: "free" stays on every block
            _segment(ax, start, length, "white", (f"free {length}", f"free\n{length}"), num_slots)
        ax.set_xlim(0, num_slots)
        ax.set_ylim(-1.0, 0.5)
        ax.set_yticks([])
        ax.spines[["top", "left", "right"]].set_visible(False)  # the white under a bar is no block
        ax.set_xticks(range(0, num_slots + 1, num_slots // 4))
        ax.set_title(title, loc="left", fontsize=12)
    axes[-1].set_xlabel("slot of the arena")
    fig.tight_layout()
    return projector(fig, width=NARROW_IN)


def _segment(
    ax, start: int, length: int, colour, labels: tuple[str, str], num_slots: int, hatch: bool = False
) -> None:
    """One block part as a bar segment, labelled inside with the (long, short) label that fits,
    or, when even the short one does not fit, by a callout under the bar."""
    if length <= 0:
        return
    ax.barh(
        0,
        length,
        left=start,
        height=2 * BAR,
        color=colour,
        alpha=0.45 if hatch else 1.0,
        hatch="//" if hatch else None,
        edgecolor="black",
    )
    if length >= SHORT_ROOM * num_slots:
        label = labels[0] if length >= ROOM * num_slots else labels[1]
        r, g, b = to_rgb(colour)
        dark = not hatch and 0.299 * r + 0.587 * g + 0.114 * b < 0.55  # white text on dark fills only
        middle, ink = start + length / 2, "white" if dark else "black"
        ax.text(middle, 0, label, ha="center", va="center", fontsize=12, color=ink)
    else:
        ax.annotate(
            labels[1],
            xy=(start + length / 2, -BAR),
            xytext=(start + length / 2, CALLOUT_Y),
            ha="center",
            va="center",
            fontsize=12,
            arrowprops=dict(arrowstyle="-", color="black", lw=1.2, shrinkA=2, shrinkB=0),
        )
