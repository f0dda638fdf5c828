"""The page-lifecycle diagram, drawn from `pagedkv.core.observe.lifecycle.TRANSITIONS`.

Three boxes (FREE, ACTIVE, CACHED) in the state colours of every other picture, one arrow per
(source, target) pair of the table, labelled with the names of its transitions; ACTIVE's
self-loop carries the ref-count changes, its labels above it. Transitions named in `highlight`
(the dashboard passes the ones the last step took) are drawn bold in vermillion, the others
grey; a key in the top corners says so, and what *reset* is. Only the arrows' positions are
laid out here: what they say comes from the table, so a new row in the table appears in the
picture.

Leaves out: per-page animation (the heatmaps show which pages moved).
"""

from __future__ import annotations

import functools
import io
import math
from collections.abc import Iterable

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch

from pagedkv.core.observe.lifecycle import GLOSSARY, TRANSITIONS
from pagedkv.core.page import PageState
from pagedkv.viz.palette import STATE_COLORS, VICTIM_COLOR

FREE, ACTIVE, CACHED = PageState.FREE, PageState.ACTIVE, PageState.CACHED
NODES = {ACTIVE: (0.5, 0.64), FREE: (0.13, 0.16), CACHED: (0.87, 0.16)}  # axes coordinates
# (source, target) -> (arc curvature, where its labels go). A label place is one of
# ("outside", (x, y), step, align): rows from (x, y) down, each `step` further out, beside an
# outer arc; ("along", None, curvature, ""): rotated along the arrow, the first row above its
# middle, the next below, so the arrow runs between its own labels; ("loop", (x, y), 0, ""):
# rows centred above the self-loop, the first on top, clear of the other arrows' stacks.
EDGES = {
    (FREE, ACTIVE): (-0.25, ("outside", (0.38, 0.72), -0.05, "right")),
    (ACTIVE, FREE): (-0.1, ("along", None, -0.1, "")),
    (ACTIVE, CACHED): (0.1, ("along", None, 0.1, "")),
    (CACHED, ACTIVE): (0.25, ("outside", (0.62, 0.72), 0.05, "left")),
    (CACHED, FREE): (-0.12, ("outside", (0.5, 0.06), 0.0, "center")),
    (ACTIVE, ACTIVE): (0.0, ("loop", (0.5, 1.035), 0.0, "")),
}
# The key, in the top corners: what the arrows' colours mean (left; the orange line only when
# an arrow is orange) and what the reset arrow is (right).
KEY_LEFT = ("grey arrow: a move a page can make", "bold orange: a move the last step made")
KEY_RIGHT = ("reset: reset_prefix_cache() empties", "every CACHED page at once")
NOTES = {"evict": "(to its new owner)"}  # said on the row under a transition's name
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
    for (source, target), (rad, place) in EDGES.items():
        rows = [t for t in TRANSITIONS if (t.source, t.target) == (source, target)]
        if not rows:
            continue
        on = any(t.name in lit for t in rows)
        color = VICTIM_COLOR if on else IDLE_COLOR
        if source is target:
            x, y = NODES[source]
            arrow = FancyArrowPatch(
                (x - 0.05, y + 0.11), (x + 0.05, y + 0.11), connectionstyle="arc3,rad=-1.0",
                arrowstyle="-|>", mutation_scale=22, lw=3 if on else 1.6, color=color,
            )  # fmt: skip
        else:
            arrow = FancyArrowPatch(
                NODES[source], NODES[target], connectionstyle=f"arc3,rad={rad}",
                arrowstyle="-|>", mutation_scale=24, lw=3 if on else 1.6, color=color,
                patchA=boxes[source], patchB=boxes[target], shrinkA=4, shrinkB=4,
            )  # fmt: skip
        ax.add_patch(arrow)
        _label(ax, _lines(rows), lit, place, (source, target))
    _key(ax, bool(lit))
    return fig


def _key(ax, lit: bool) -> None:
    """The key: the arrows' colours in the top-left corner (the orange line, in orange, only
    when `lit`: some arrow is orange), what reset does in the top-right one."""
    for k, text in enumerate(KEY_LEFT[: 1 + lit]):
        color = VICTIM_COLOR if k else IDLE_COLOR
        ax.text(0.01, 1.03 - 0.07 * k, text, ha="left", va="top", fontsize=FONT_PT, color=color)
    for k, text in enumerate(KEY_RIGHT):
        ax.text(0.99, 1.03 - 0.07 * k, text, ha="right", va="top", fontsize=FONT_PT, color="#222222")


def _lines(rows) -> list[tuple[str, str, bool]]:
    """(text, transition name, is a note) of one arrow's label rows: each transition's name,
    and its note (NOTES) on the row below it."""
    lines = []
    for t in rows:
        lines.append((t.name, t.name, False))
        if t.name in NOTES:
            lines.append((NOTES[t.name], t.name, True))
    return lines


def _label(ax, lines, lit: set[str], place: tuple, edge: tuple[PageState, PageState]) -> None:
    """One arrow's label rows, placed as `place` says (EDGES): beside an outer arc, each row a
    step further out; centred above the loop; or rotated along a straight arrow, the
    first row above it and the next below it, each at the middle of the arrow."""
    how, at, step, align = place
    if how == "outside" and len(lines) > 1:  # a stack of rows: say which arrow it labels
        head = f"{edge[0].name} → {edge[1].name}:"
        ax.text(at[0] - step, at[1] + 0.075, head, ha=align, va="top", fontsize=FONT_PT, color=IDLE_COLOR)
    for k, (text, name, note) in enumerate(lines):
        style = {
            "fontsize": FONT_PT,
            "style": "italic" if note else "normal",
            "color": VICTIM_COLOR if name in lit else "#222222",
            "weight": "bold" if name in lit else "normal",
        }
        if how == "loop":  # rows centred above the loop, the first on top
            ax.text(at[0], at[1] - 0.07 * k, text, ha="center", va="top", **style)
        elif how == "outside":
            ax.text(at[0] + step * k, at[1] - 0.075 * k, text, ha=align, va="top", **style)
        else:
            _along(ax, edge, step, text, k, style)


def _along(ax, edge: tuple[PageState, PageState], rad: float, text: str, k: int, style: dict) -> None:
    """Row `k` of a straight arrow's labels, rotated to read along it (left to right): row 0
    just above the middle of the arc, row 1 just below it."""
    to_display = ax.transData.transform
    (sx, sy), (tx, ty) = to_display([NODES[edge[0]], NODES[edge[1]]])
    # an arc3 curve is a quadratic Bezier: its middle is the chord's middle plus half the
    # control point's offset, rad * (dy, -dx)
    mid = ((sx + tx) / 2 + rad * (ty - sy) / 2, (sy + ty) / 2 - rad * (tx - sx) / 2)
    angle = math.degrees(math.atan2(abs(ty - sy), abs(tx - sx)))
    angle = angle if (tx - sx) * (ty - sy) > 0 else -angle  # reads left to right
    gap = (1 if k == 0 else -1) * 0.4 * FONT_PT * ax.figure.dpi / 72  # off the line, in px
    normal = (-math.sin(math.radians(angle)), math.cos(math.radians(angle)))  # up, unit length
    x, y = ax.transData.inverted().transform((mid[0] + gap * normal[0], mid[1] + gap * normal[1]))
    ax.text(
        x, y, text, ha="center", va="bottom" if k == 0 else "top", rotation=angle,
        rotation_mode="anchor", **style,
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
