"""Which page hangs under which: a request's pages in block order, one row per prefix index.

Notebook 09 draws with it what each index keeps of a request (section 3) and of the corner
where the two indexes part (section 5). A row is a list of boxes, left to right in block
order. An arrow joins two neighbouring boxes only when the index holds both pages
(`LINKED`): the right one's block hash chains through the left one's (hash chain), or it
hangs under the left one (tree): a lookup that reached the left page could go on to the right
one. A page the index does not hold has no arrow in or out, so it stands apart. A box's fill
says what the index does with the page (`KINDS`):

- "reached": the index holds it and a lookup from the first page reaches it (a prefix hit);
- "orphan": the index holds it, but a lookup stops before it (a page before it is missing);
- "not indexed": the index does not hold it (a copy, a partial page, or one the tree left out);
- "free": the same after the request's release, when such a page is FREE;
- "evicted": no indexed page holds this block's content any more (grey, crossed: unlike the white,
  dashed "not indexed" box).

The figure is 8.2 inches wide at 100 dpi, so a notebook shows it at its own size (the
output area is about 848 px wide) and its 12-point text at 16 px.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch, Patch

from pagedkv.viz.palette import EVICTED_FILL, EVICTED_HATCH

# kind -> (fill, border line style, text colour, legend text); "evicted" is also crossed
# (`CROSSED`), so it never looks like the dashed white "not indexed" box
KINDS = {
    "reached": ("#A6DBC4", "solid", "black", "indexed, a lookup reaches it"),
    "orphan": ("#F5A38A", "solid", "black", "indexed, no lookup reaches it (orphan)"),
    "not indexed": ("#FFFFFF", "dashed", "black", "not indexed"),
    "free": ("#FFFFFF", "dashed", "black", "not indexed: FREE after release"),
    "evicted": (EVICTED_FILL, "solid", "black", "evicted: no indexed page holds its tokens"),
}
CROSSED = {"evicted": EVICTED_HATCH}  # kind -> hatch drawn over the fill
LINKED = ("reached", "orphan")  # the kinds an arrow joins: the pages the index holds
ARROW_KEY = "\u2192  the index holds both; a lookup reaching the left page goes on to the right one"
FONT_PT = 12
WIDTH_IN = 8.2
ROW_IN = 1.3  # a row: its name, the boxes, a note of up to 2 lines under them
NOTE_LINE_IN = 0.2  # one line of a note: a row whose notes are one line each is this much shorter
LEGEND_IN = 1.0  # two lines of kinds, then the arrow's line

Box = tuple[str, str, str]  # (text in the box, kind, note under it)


def _draw_box(ax, box: Box, x: float, y: float, w: float, h: float, arrow_to: float | None) -> None:
    """One box of `plot_page_chains` (text, kind, note under it), left edge x, centre height
    y; an arrow from its right edge to `arrow_to` when a next box follows."""
    text, kind, note = box
    fill, line, color, _ = KINDS[kind]
    ax.add_patch(
        FancyBboxPatch(
            (x, y - h / 2),
            w,
            h,
            boxstyle="round,pad=0.03",
            fc=fill,
            ec="#333333",
            ls=line,
            lw=1.5,
            hatch=CROSSED.get(kind),
        )
    )
    ax.text(
        x + w / 2,
        y,
        text,
        fontsize=FONT_PT,
        ha="center",
        va="center",
        color=color,
        weight="bold" if kind in CROSSED else "normal",
        # a white label with a border over the cross-hatching, so it reads from the back of a room
        bbox=dict(fc="white", ec="#333333", lw=1, pad=3) if kind in CROSSED else None,
    )
    if note:
        ax.text(x + w / 2, y - h / 2 - 0.06, note, fontsize=FONT_PT, ha="center", va="top")
    if arrow_to is not None:
        ax.annotate(
            "",
            xy=(arrow_to, y),
            xytext=(x + w + 0.06, y),
            arrowprops=dict(arrowstyle="->", lw=1.5, color="#333333"),
        )


def _joined(boxes: Sequence[Box]) -> bool:
    """Whether a row draws an arrow: two neighbouring boxes the index both holds."""
    return any(a[1] in LINKED and b[1] in LINKED for a, b in zip(boxes, boxes[1:]))


def plot_page_chains(rows: dict[str, Sequence[Box]], title: str = "") -> Figure:
    """One row per (name, boxes): each box (text, kind, note) in block order, an arrow
    between two neighbouring boxes the index both holds (kinds in `LINKED`), and under the rows
    a legend of the kinds present and of the arrow (when one is drawn); returns the Figure.
    A row is ROW_IN tall when some note has two lines, one note line less when none has."""
    if not rows or any(not boxes for boxes in rows.values()):
        raise ValueError("rows must name at least one row, each with at least one box")
    unknown = {kind for boxes in rows.values() for _, kind, _ in boxes} - set(KINDS)
    if unknown:
        raise ValueError(f"kinds must be among {sorted(KINDS)}, got {sorted(unknown)}")
    title_in = 0.4 if title else 0.1
    two_lines = any("\n" in note for boxes in rows.values() for _, _, note in boxes)
    row_in = ROW_IN if two_lines else ROW_IN - NOTE_LINE_IN
    height = len(rows) * row_in + LEGEND_IN + title_in
    fig = Figure(figsize=(WIDTH_IN, height), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, WIDTH_IN)
    ax.set_ylim(0, height)
    ax.axis("off")
    if title:
        ax.text(0.1, height - 0.22, title, fontsize=13, va="center", weight="bold")
    columns = max(len(boxes) for boxes in rows.values())
    step = (WIDTH_IN - 0.2) / columns
    box_w, box_h = min(1.5, step - 0.45), 0.42
    for r, (name, boxes) in enumerate(rows.items()):
        top = height - title_in - r * row_in
        ax.text(0.1, top - 0.15, name, fontsize=FONT_PT, va="center", style="italic")
        y = top - 0.62
        for c, box in enumerate(boxes):
            x = 0.1 + c * step + (step - box_w) / 2
            linked = c + 1 < len(boxes) and box[1] in LINKED and boxes[c + 1][1] in LINKED
            _draw_box(ax, box, x, y, box_w, box_h, arrow_to=x + step - 0.03 if linked else None)
    present = [k for k in KINDS if any(kind == k for boxes in rows.values() for _, kind, _ in boxes)]
    handles = [
        Patch(fc=KINDS[k][0], ec="#333333", ls=KINDS[k][1], lw=1.5, hatch=CROSSED.get(k), label=KINDS[k][3])
        for k in present
    ]
    if any(_joined(boxes) for boxes in rows.values()):
        ax.text(0.1, 0.17, ARROW_KEY, fontsize=FONT_PT, va="center")
    ax.legend(
        handles=handles,
        loc="lower left",
        bbox_to_anchor=(0.0, 0.3 / height),
        ncol=2,
        fontsize=FONT_PT,
        frameon=False,
        handlelength=1.6,
    )
    return fig
