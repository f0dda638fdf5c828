"""The page-lifecycle diagram, drawn from `pagedkv.core.observe.lifecycle.TRANSITIONS`.

Three boxes (FREE, ACTIVE, CACHED) in the state colours of every other picture, one arrow per
(source, target) pair of the table, labelled with the names of its transitions; ACTIVE's
self-loop carries the ref-count changes. Transitions named in `highlight` (the dashboard
passes the ones the last step took) are drawn bold in vermillion, the others grey. Only the
arrows' positions are laid out here: what they say comes from the table, so a new row in
the table appears in the picture.

Leaves out: per-page animation (the heatmaps show which pages moved).
"""

from __future__ import annotations

import functools
import io
from collections.abc import Iterable

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch

from pagedkv.core.observe.lifecycle import GLOSSARY, TRANSITIONS
from pagedkv.core.page import PageState
from pagedkv.viz.palette import STATE_COLORS, VICTIM_COLOR

FREE, ACTIVE, CACHED = PageState.FREE, PageState.ACTIVE, PageState.CACHED
NODES = {ACTIVE: (0.5, 0.64), FREE: (0.13, 0.16), CACHED: (0.87, 0.16)}  # axes coordinates
EDGES = {  # (source, target) -> (arc curvature, first label's position, text alignment)
    (FREE, ACTIVE): (-0.25, (0.35, 0.68), "right"),  # outside the arc, each row a step left
    (ACTIVE, FREE): (-0.1, (0.41, 0.3), "right"),  # each beside its own arrow, rows slanted
    (ACTIVE, CACHED): (0.1, (0.52, 0.3), "left"),
    (CACHED, ACTIVE): (0.25, (0.65, 0.68), "left"),  # outside the arc, each row a step right
    (CACHED, FREE): (-0.12, (0.5, 0.02), "center"),
    (ACTIVE, ACTIVE): (0.0, (0.5, 0.86), "center"),  # labels beside the loop, left and right
}
ROW_STEP = {
    (FREE, ACTIVE): -0.045,
    (CACHED, ACTIVE): 0.045,
    (ACTIVE, FREE): -0.03,
    (ACTIVE, CACHED): 0.03,
}  # rows follow a slanted arc
NOTES = {"evict": "(to its new owner)"}  # said under a transition's name, on its arrow
SUBTITLES = {FREE: "empty", ACTIVE: "ref_count ≥ 1", CACHED: "ref_count 0, full, hashed"}
IDLE_COLOR = "#666666"
FONT_PT = 13  # every text of the diagram is at least this size at the figure's own size
WIDTH_IN = 11.0


def plot_lifecycle(highlight: Iterable[str] = (), width: float = WIDTH_IN) -> Figure:
    """The lifecycle diagram; transitions named in `highlight` are drawn bold in vermillion.
    Example: plot_lifecycle(["evict"]) -> the CACHED -> ACTIVE arrow and "evict" stand out."""
    lit = set(highlight)
    unknown = lit - {t.name for t in TRANSITIONS}
    if unknown:
        raise ValueError(f"highlight must name transitions of TRANSITIONS, got unknown {sorted(unknown)}")
    fig = Figure(figsize=(width, width * 0.5), dpi=110, layout=None)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.04, 1.04)
    ax.axis("off")
    boxes = {}  # state -> its box patch, so arrows end at the box edge
    for state, (x, y) in NODES.items():
        dark = state is ACTIVE
        boxes[state] = ax.text(
            x, y, f"{state.name}\n{SUBTITLES[state]}", ha="center", va="center",
            fontsize=FONT_PT + 1, linespacing=1.5,
            color="white" if dark else "black",
            bbox={"boxstyle": "round,pad=0.6", "fc": STATE_COLORS[state], "ec": "#333333"},
        ).get_bbox_patch()  # fmt: skip
    fig.canvas.draw()  # lays the boxes out: the arrows are clipped to them
    for (source, target), (rad, (lx, ly), align) in EDGES.items():
        rows = [t for t in TRANSITIONS if (t.source, t.target) == (source, target)]
        if not rows:
            continue
        on = any(t.name in lit for t in rows)
        color = VICTIM_COLOR if on else IDLE_COLOR
        if source is target:
            x, y = NODES[source]
            arrow = FancyArrowPatch(
                (x - 0.05, y + 0.11), (x + 0.05, y + 0.11), connectionstyle="arc3,rad=-1.4",
                arrowstyle="-|>", mutation_scale=22, lw=3 if on else 1.6, color=color,
            )  # fmt: skip
        else:
            arrow = FancyArrowPatch(
                NODES[source], NODES[target], connectionstyle=f"arc3,rad={rad}",
                arrowstyle="-|>", mutation_scale=24, lw=3 if on else 1.6, color=color,
                patchA=boxes[source], patchB=boxes[target], shrinkA=4, shrinkB=4,
            )  # fmt: skip
        ax.add_patch(arrow)
        _label(ax, rows, lit, source is target, (lx, ly, ROW_STEP.get((source, target), 0.0)), align)
    return fig


def _label(ax, rows, lit: set[str], loop: bool, at: tuple[float, float, float], align: str) -> None:
    """The names of one arrow's transitions, one per row; a loop's alternate left and right
    of it, a slanted arc's a step (`at`'s third number) further out per row. A transition
    with a note (NOTES) gets it on the row below its name."""
    lines = []  # (text, transition name, is a note)
    for t in rows:
        lines.append((t.name, t.name, False))
        if t.name in NOTES:
            lines.append((NOTES[t.name], t.name, True))
    for k, (text, name, note) in enumerate(lines):
        hit = name in lit
        if loop:  # first row left of the loop, the next right of it
            x, y = at[0] + (0.09 if k % 2 else -0.09), at[1] - 0.075 * (k // 2)
            ha = "left" if k % 2 else "right"
        else:
            x, y, ha = at[0] + at[2] * k, at[1] - 0.075 * k, align
        ax.text(
            x, y, text, ha=ha, va="top", fontsize=FONT_PT, style="italic" if note else "normal",
            color=VICTIM_COLOR if hit else "#222222", weight="bold" if hit else "normal",
        )  # fmt: skip


def lifecycle_png(highlight: Iterable[str] = (), width: float = WIDTH_IN, dpi: int = 110) -> bytes:
    """The diagram as PNG bytes (for `ipywidgets.Image`). A few transitions make few
    pictures: each is drawn once (~0.3 s of arrow clipping) and then kept."""
    return _png(frozenset(highlight), float(width), int(dpi))


@functools.lru_cache(maxsize=64)
def _png(highlight: frozenset[str], width: float, dpi: int) -> bytes:
    out = io.BytesIO()
    plot_lifecycle(highlight, width).savefig(out, format="png", dpi=dpi)
    return out.getvalue()


def glossary_markdown() -> str:
    """The states and transitions of the table as a Markdown list (a glossary cell)."""
    lines = [f"- **{s.name}**: {text}" for s, text in GLOSSARY.items()]
    lines += [f"- *{t.name}* ({t.source.name} → {t.target.name}): {t.says}" for t in TRANSITIONS]
    return "\n".join(lines)
