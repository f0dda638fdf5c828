"""The stacked share bars of `plot_paged_vs_contiguous`: one bar per memory, one segment per
slot category, each segment labelled with its slot count.

A segment wide enough for its number carries it inside; a thin one (a few slots, e.g. the
paged pool's internal fragmentation) gets its number outside the bar, above the paged bar or
below the contiguous one, joined to the segment by a leader line, and thin labels of the same
bar are pushed apart so they never overlap. Leaves out: the legend (the figure's key names
the hatches). `name_thin_top` names the thin top slices of a 0-100 % stack (the serving
run's `paged` bar) in a callout above it.
"""

from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes

INSIDE = 0.15  # a segment at least this share of the bar (10 of 64 slots) carries its number inside:
# a narrower one would crowd its number against its hatch
GAP = 0.07  # the least distance, in bar shares, between two outside labels of one bar
BARS = {"paged": 1.0, "contiguous": 0.0}  # y of each bar
OUTSIDE = {"paged": 1.85, "contiguous": -0.85}  # y of its outside labels: a visible leader line
LABEL_PT = 15  # the slot counts: ≥ 14 px on screen with the figure shown 850 px wide
BOX = {"facecolor": "white", "edgecolor": "none", "pad": 1}


def draw_shares(
    ax: Axes,
    counts: dict[str, dict[str, int]],
    shown: list[str],
    num_slots: int,
    styles: dict[str, tuple[str, str, str]],
) -> None:
    """One stacked bar per memory (`counts[memory][category]`, slots) in the `shown`
    categories, drawn with `styles[category]` = (face colour, hatch, label)."""
    left = np.zeros(2)
    thin: dict[str, list[tuple[float, int]]] = {memory: [] for memory in BARS}
    for category in shown:
        values = np.array([counts[m][category] for m in BARS]) / num_slots
        face, hatch, label = styles[category]
        ax.barh(
            list(BARS.values()), values, left=left, color=face, hatch=hatch, lw=0.6, ec="#555555", label=label
        )
        for (memory, y), share, start in zip(BARS.items(), values, left, strict=True):
            slots = counts[memory][category]
            if share >= INSIDE:
                at = (start + share / 2, y)
                ax.text(*at, f"{slots}", ha="center", va="center", fontsize=LABEL_PT, bbox=BOX)
            elif slots:
                thin[memory].append((start + share / 2, slots))
        left += values
    for memory, labels in thin.items():
        _label_outside(ax, labels, BARS[memory], OUTSIDE[memory])
    ax.set_yticks(list(BARS.values()), list(BARS))
    ax.set_ylim(-1.2, 2.2)
    ax.set_xlim(0, 1)
    ax.xaxis.set_major_formatter(lambda v, _: f"{v:.0%}")
    ax.set_title("share of slots (slot counts)", fontsize=10, loc="left")


def _label_outside(ax: Axes, labels: list[tuple[float, int]], bar_y: float, y: float) -> None:
    """Each (x of a thin segment, its slot count) as a number at height `y`, with a leader
    line to the bar's edge; labels at least `GAP` apart, kept inside the axes."""
    edge = bar_y + (0.4 if y > bar_y else -0.4)  # barh's default height is 0.8
    placed = -1.0
    for x, slots in sorted(labels):
        at = min(max(x, placed + GAP, 0.04), 0.96)
        placed = at
        ax.annotate(f"{slots}", xy=(x, edge), xytext=(at, y), ha="center", va="center", fontsize=LABEL_PT,
                    bbox=BOX, arrowprops={"arrowstyle": "-", "color": "#333333", "lw": 1.5})  # fmt: skip


def name_thin_top(ax: Axes, x: int, shares: dict) -> None:
    """A callout above bar `x` of a 0-100 % stack naming its two thin top slices, too thin to
    see at screen size: `shares`' internal fragmentation (amber) and free slots (grey), in %."""
    text = (
        f"paged's thin top:\n{shares['internal_fragmentation']:.1f}% internal (amber),\n"
        f"{shares['free']:.1f}% free (grey)"
    )
    ax.annotate(
        text,
        xy=(x, 100 - shares["free"] / 2),
        xytext=(x - 0.3, 106),
        ha="right",
        va="bottom",
        fontsize=12,  # as large as the legend beside it: >= 12 px at 850 px
        annotation_clip=False,
        arrowprops=dict(arrowstyle="-", color="black", lw=1.2, relpos=(1, 0.2)),
    )
