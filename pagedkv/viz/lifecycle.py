"""The page-lifecycle diagram, drawn from `pagedkv.core.observe.lifecycle.TRANSITIONS`.

Three boxes (FREE, ACTIVE, CACHED) in the state colours of every other picture, one arrow per
(source, target) pair of the table, labelled with the names of its transitions, each label
next to its arrow; ACTIVE's self-loop carries the ref-count changes, its labels right of it.
Transitions named in `highlight` (the dashboard passes the ones the last step took) are
drawn bold in vermillion, the others grey; *reset*, which no notebook uses, is drawn dashed
and lighter. A key in the top-left corner says so, and one in the bottom-right what *reset*
is. Only the arrows' positions are laid out here: what they say comes from the table, so a
new row in the table appears in the picture.

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
NODES = {ACTIVE: (0.5, 0.78), FREE: (0.17, 0.28), CACHED: (0.86, 0.28)}  # axes coordinates
# (source, target) -> (arc curvature, where its labels go). A label place is one of
# ("beside", r, 0, align): rows stacked around the middle of an outer arc (raised by r rows), just outside
# it and each shifted along it (align "right": the rows end left of the arc; "left": they
# start right of it);
# ("along", t, curvature, ""): rotated along the arrow, the first row above the point a
# fraction t of the way along it, the next below, so the arrow runs between its own labels
# (t < 0.5 keeps them clear of a wide box at the arrow's end); ("loop", (x, y), 0, ""): rows
# from (x, y) down, right of the self-loop; ("over", (x, y), 0, ""): one row, centred, above y.
EDGES = {
    (FREE, ACTIVE): (-0.35, ("beside", 0.5, 0.0, "right")),
    (ACTIVE, FREE): (-0.1, ("along", 0.55, -0.1, "")),
    (ACTIVE, CACHED): (0.1, ("along", 0.5, 0.1, "")),
    (CACHED, ACTIVE): (0.4, ("beside", 0.5, 0.0, "left")),
    (CACHED, FREE): (-0.1, ("over", (0.49, 0.235), 0.0, "")),
    (ACTIVE, ACTIVE): (0.0, ("loop", (0.57, 0.95), 0.0, "")),
}
# The wide layout notebook 00 draws (`aspect` WIDE: ~370 px tall in a 1,100 px cell): text
# keeps its size, so the boxes sit nearer the edges and the reset arrow's label follows its arc.
WIDE = 0.34
WIDE_NODES = {ACTIVE: (0.5, 0.74), FREE: (0.13, 0.29), CACHED: (0.89, 0.29)}
WIDE_PLACES = {
    (CACHED, FREE): ("over", (0.49, 0.205), 0.0, ""),
    (ACTIVE, CACHED): ("along", 0.5, 0.1, ""),
    (FREE, ACTIVE): ("beside", 0.8, 0.0, "right"),
    (ACTIVE, ACTIVE): ("loop", (0.6, 0.95), 0.0, ""),
    (CACHED, ACTIVE): ("beside", -0.2, 0.0, "left"),
}
# The key: what the arrows' colours mean in the top-left corner (the orange line only when
# an arrow is orange), what the reset arrow is in the bottom-right one, under CACHED.
KEY_LEFT = ("arrows: the moves a page can make", "bold orange label: moved in the last step")
KEY_RIGHT = ("dashed reset: reset_prefix_cache() empties", "every CACHED page; no notebook uses it")
UNUSED = {"reset"}  # transitions no notebook takes: a dashed, lighter arrow unless lit
UNUSED_COLOR = "#8a8a8a"
NOTES = {"evict": "(to its new owner)"}  # said on the row under a transition's name
SUBTITLES = {FREE: "empty", ACTIVE: "ref_count ≥ 1", CACHED: "ref_count 0,\nfull, hashed"}
IDLE_COLOR = "#666666"
# The dashboard's Page life tab shows the picture at its own size, 660 x 330 px (DASHBOARD_WIDTH_IN
# at DASHBOARD_DPI): its text is 10.4 pt there, 14.5 px, so ≥ 12 px even in a 560 px wide cell.
# Every size (text, lines, gaps) scales with `text_width` (on the dashboard, the width itself).
WIDTH_IN = 11.0  # plot_lifecycle's default: notebook 00 draws it at 110 dpi, 1,210 x 411 px
TEXT_WIDTH_IN = 8.25  # its text is sized as for this width (13 pt): short enough for one screen
DASHBOARD_WIDTH_IN, DASHBOARD_DPI = 6.6, 100
FONT_PT_PER_IN = 12 / 7.6  # text size (pt) per inch of the figure's width
ROW = 0.058  # one row of labels, in axes fractions of the height
# The key's first line starts ~10 px under the picture's top (on the dashboard, 330 px tall):
# right under the Page life tab's buttons, a line touching the edge looked cut off.
KEY_TOP = 0.97


def plot_lifecycle(
    highlight: Iterable[str] = (),
    width: float = WIDTH_IN,
    aspect: float = WIDE,
    text_width: float = TEXT_WIDTH_IN,
) -> Figure:
    """The lifecycle diagram, `width` inches wide and `aspect` times as tall (0.5: the
    dashboard's layout; WIDE: a wide one), its text as large as on a `text_width` inch wide
    picture; transitions named in `highlight` are drawn bold in vermillion.
    Example: plot_lifecycle(["evict"]) -> the CACHED -> ACTIVE arrow and "evict" stand out."""
    lit = set(highlight)
    unknown = lit - {t.name for t in TRANSITIONS}
    if unknown:
        raise ValueError(f"highlight must name transitions of TRANSITIONS, got unknown {sorted(unknown)}")
    fig = Figure(figsize=(width, width * aspect), dpi=110, layout=None)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.axis("off")
    pt = FONT_PT_PER_IN * text_width  # the text size; lines and arrow heads scale with it
    row = ROW * 0.5 * text_width / (width * aspect)  # a row of text: its height in inches follows pt
    nodes, places = (NODES, {}) if aspect >= 0.5 else (WIDE_NODES, WIDE_PLACES)
    boxes = {}  # state -> its box patch, so arrows end at the box edge
    for state, (x, y) in nodes.items():
        dark = state is ACTIVE
        boxes[state] = ax.text(
            x, y, f"{state.name}\n{SUBTITLES[state]}", ha="center", va="center",
            fontsize=pt, linespacing=1.3,
            color="white" if dark else "black",
            bbox={"boxstyle": "round,pad=0.4", "fc": STATE_COLORS[state], "ec": "#333333"},
        ).get_bbox_patch()  # fmt: skip
    fig.canvas.draw()  # lays the boxes out: the arrows are clipped to them
    for (source, target), (rad, place) in EDGES.items():
        place = places.get((source, target), place)
        rows = [t for t in TRANSITIONS if (t.source, t.target) == (source, target)]
        if not rows:
            continue
        on = any(t.name in lit for t in rows)
        color, lw = (VICTIM_COLOR, 3 * pt / 12) if on else (IDLE_COLOR, 1.6 * pt / 12)
        unused = not on and all(t.name in UNUSED for t in rows)
        color, dash = (UNUSED_COLOR, (0, (4, 3))) if unused else (color, "solid")
        if source is target:
            x, y = nodes[source]
            arrow = FancyArrowPatch(
                (x - 0.04, y + 1.724 * row), (x + 0.04, y + 1.724 * row), connectionstyle="arc3,rad=-1.0",
                arrowstyle="-|>", mutation_scale=1.6 * pt, lw=lw, color=color,
            )  # fmt: skip
        else:
            arrow = FancyArrowPatch(
                *_ends((source, target), nodes), connectionstyle=f"arc3,rad={rad}",
                mutation_scale=1.8 * pt, patchA=boxes[source], patchB=boxes[target],
                shrinkA=4, shrinkB=4, arrowstyle="-|>", lw=lw, color=color, linestyle=dash,
            )  # fmt: skip
        ax.add_patch(arrow)
        _label(ax, _lines(rows), lit, place, ((source, target), nodes), rad, (pt, row))
    _key(ax, bool(lit), pt, row)
    _keep_inside(ax)
    return fig


def _keep_inside(ax, pad: float = 0.015) -> None:
    """Slide every text that sticks out of the figure's left or right edge back inside it
    (a bold label is wider than the plain one the layout was made for). The margin, `pad` of
    the width, covers text drawn a few % wider when the figure is saved at another dpi."""
    fig = ax.figure
    fig.canvas.draw()
    renderer, width = fig.canvas.get_renderer(), fig.bbox.width
    pad_px = pad * width
    for text in ax.texts:
        box = text.get_window_extent(renderer)
        shift = max(pad_px - box.x0, 0.0) + min(width - pad_px - box.x1, 0.0)
        if shift:
            x, y = ax.transData.transform(text.get_position())
            text.set_position(ax.transData.inverted().transform((x + shift, y)))


def _key(ax, lit: bool, pt: float, row: float = ROW) -> None:
    """The key: the arrows' colours in the top-left corner (the orange line, in orange, only
    when `lit`: some arrow is orange), what reset does in the bottom-right one."""
    for k, text in enumerate(KEY_LEFT[: 1 + lit]):
        color = VICTIM_COLOR if k else IDLE_COLOR
        ax.text(0.01, KEY_TOP - row * k, text, ha="left", va="top", fontsize=pt, color=color)
    for k, text in enumerate(KEY_RIGHT):
        ax.text(0.99, 0.01 + row * (1 - k), text, ha="right", va="bottom", fontsize=pt, color="#222222")


def _lines(rows) -> list[tuple[str, str, bool]]:
    """(text, transition name, is a note) of one arrow's label rows: each transition's name,
    and its note (NOTES) on the row below it."""
    lines = []
    for t in rows:
        lines.append((t.name, t.name, False))
        if t.name in NOTES:
            lines.append((NOTES[t.name], t.name, True))
    return lines


def _label(ax, lines, lit: set[str], place: tuple, arrow: tuple, rad: float, size: tuple) -> None:
    """One arrow's label rows, placed as `place` says (EDGES): stacked just outside the
    middle of an outer arc; centred above the loop; one row over an arc; or rotated along a
    straight arrow, the first row above it and the next below it, at the arrow's middle."""
    how, at, step, align = place
    (edge, nodes), (pt, row) = arrow, size  # the arrow and its boxes' centres; text size, row height
    if how == "beside":  # the rows' middle at the arc's middle, a gap off the arc
        (mx, my), gap = _arc_middle(ax, edge, nodes, rad), 1.5 * pt * ax.figure.dpi / 72
        (sx, sy), (tx, ty) = ax.transData.transform(_ends(edge, nodes))
        row_px = row * ax.bbox.height  # a row's height in display px
        # the tangent at the arc's middle is parallel to the chord: each row slides along it
        slide = (tx - sx) / (ty - sy) * row_px
        first = (len(lines) - 1) / 2 + at  # rows above the middle (`at`: raised by rows)
        mx += -gap if align == "right" else gap
    # beside a lit label, the arrow's other labels are greyed: the orange one is the move taken
    others = UNUSED_COLOR if any(name in lit for _, name, _ in lines) else "#222222"
    for k, (text, name, note) in enumerate(lines):
        style = {
            "fontsize": pt,
            "style": "italic" if note else "normal",
            "color": VICTIM_COLOR if name in lit else others,
            "weight": "bold" if name in lit else "normal",
        }
        if how == "over":
            ax.text(at[0], at[1], text, ha="center", va="bottom", **style)
        elif how == "loop":  # rows right of the loop, the first on top
            ax.text(at[0], at[1] - row * k, text, ha="left", va="center", **style)
        elif how == "beside":
            up = first - k  # rows above the middle: > 0
            x, y = ax.transData.inverted().transform((mx + up * slide, my + up * row_px))
            ax.text(x, y, text, ha=align, va="center", **style)
        else:
            _along(ax, (edge, nodes), (step, at), text, k, style)


def _ends(edge: tuple, nodes: dict = NODES) -> tuple[tuple[float, float], tuple[float, float]]:
    """The points arrow `edge` aims from and at (axes coordinates): its boxes' centres."""
    return nodes[edge[0]], nodes[edge[1]]


def _arc_middle(ax, edge: tuple, nodes: dict, rad: float, t: float = 0.5) -> tuple[float, float]:
    """The point a fraction `t` along the arc3 arrow `edge` with curvature `rad`, in display
    px. An arc3 curve is a quadratic Bezier whose control point is the chord's middle plus
    rad * (dy, -dx): at t, the chord's point plus 2t(1 - t) times that offset."""
    (sx, sy), (tx, ty) = ax.transData.transform(_ends(edge, nodes))
    bend = 2 * t * (1 - t) * rad
    return sx + t * (tx - sx) + bend * (ty - sy), sy + t * (ty - sy) - bend * (tx - sx)


def _along(ax, arrow: tuple, where: tuple[float, float], text: str, k: int, style: dict) -> None:
    """Row `k` of a straight arrow's labels, rotated to read along it (left to right): row 0
    just above the point a fraction t along the arc, row 1 just below it; `where` is (the
    arc's curvature, t); `arrow` is (edge, its boxes' centres)."""
    edge, nodes = arrow
    (sx, sy), (tx, ty) = ax.transData.transform(_ends(edge, nodes))
    mid = _arc_middle(ax, edge, nodes, *where)
    angle = math.degrees(math.atan2(abs(ty - sy), abs(tx - sx)))
    angle = angle if (tx - sx) * (ty - sy) > 0 else -angle  # reads left to right
    gap = (1 if k == 0 else -1) * 0.4 * style["fontsize"] * ax.figure.dpi / 72  # off the line, in px
    normal = (-math.sin(math.radians(angle)), math.cos(math.radians(angle)))  # up, unit length
    x, y = ax.transData.inverted().transform((mid[0] + gap * normal[0], mid[1] + gap * normal[1]))
    ax.text(
        x, y, text, ha="center", va="bottom" if k == 0 else "top", rotation=angle,
        rotation_mode="anchor", **style,
    )  # fmt: skip


def lifecycle_png(
    highlight: Iterable[str] = (), width: float = DASHBOARD_WIDTH_IN, dpi: int = DASHBOARD_DPI
) -> bytes:
    """The diagram as PNG bytes (for `ipywidgets.Image`), by default at the size the
    dashboard's Page life tab shows it (660 x 330 px). A few transitions make few
    pictures: each is drawn once (~0.3 s of arrow clipping) and then kept."""
    return _png(frozenset(highlight), float(width), int(dpi))


@functools.lru_cache(maxsize=64)
def _png(highlight: frozenset[str], width: float, dpi: int) -> bytes:
    out = io.BytesIO()
    plot_lifecycle(highlight, width, aspect=0.5, text_width=width).savefig(out, format="png", dpi=dpi)
    return out.getvalue()


def glossary_markdown() -> str:
    """The states and transitions of the table as a Markdown list (a glossary cell)."""
    lines = [f"- **{s.name}**: {text}" for s, text in GLOSSARY.items()]
    lines += [f"- *{t.name}* ({t.source.name} → {t.target.name}): {t.says}" for t in TRANSITIONS]
    return "\n".join(lines)
