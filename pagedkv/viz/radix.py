"""Pictures of a radix tree (`pagedkv.radix.radix_cache.RadixCache`) as it grows and splits.

Each node is a box holding its run of tokens (as text when a decoder is given, e.g.
`TinyLM.decode`) and its page ids, wrapped over a few lines rather than cut; edges go from
parent to child, the root at the top. Boxes are coloured by what the pages are doing when a
page state is given (a pool's `page(pid).state.name`): ACTIVE (held by a running sequence)
or CACHED (evictable), in the pool heatmap's state colours
(`pagedkv.viz.palette.STATE_COLORS`), so a state has one colour in every picture; the
legend lists only the states present. With no page state the boxes are white (grey is FREE
there, and a tree never holds a FREE page). A node a running request has locked
(`inc_lock_ref`) says "locked" after its pages and has a thick border. A new figure is sized
to its tree: a column per leaf as wide as the widest label, a row per level as tall as the
tallest box (the root's circle takes less). `across=True` turns it a quarter: the root on the
left, a column per level, a row per leaf, so a chain (a locked path) is one short row.
`plot_radix_growth` draws several moments side by side, so a split reads as one box
becoming two with the same pages.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from matplotlib.colors import to_rgb
from matplotlib.figure import Figure

from pagedkv.core.page import PageState
from pagedkv.radix.radix_cache import RadixCache, RadixNode
from pagedkv.viz.chains import plot_page_chains
from pagedkv.viz.palette import STATE_COLORS

COLORS = {  # page state name -> fill: the heatmap's, None = no state given
    "ACTIVE": STATE_COLORS[PageState.ACTIVE],
    "CACHED": STATE_COLORS[PageState.CACHED],
    None: "#FFFFFF",
}
FONT_PT = 12  # box and legend text; titles 13
LINE_IN = FONT_PT * 1.2 / 72  # the height of one line of box text, in inches
CHAR_IN = FONT_PT * 0.62 / 72  # the width of one character of it, about
MAX_TEXT_LINES = 4  # a longer run of tokens ends in "…" after this many lines
ROOT_IN = 0.6  # the root circle's height, about
GAP_IN = 0.22  # between a box and the boxes under it
TITLE_IN = 0.35  # the title's line


def text_color(fill: str) -> str:
    """Black or white, whichever reads better on `fill` (white on ACTIVE's blue)."""
    r, g, b = to_rgb(fill)
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"


def _layout(tree: RadixCache) -> dict[RadixNode, tuple[float, int]]:
    """node -> (x, depth): leaves spaced one apart in depth-first order, parents centred."""
    where: dict[RadixNode, tuple[float, int]] = {}
    next_x = [0.0]

    def place(node: RadixNode, depth: int) -> float:
        children = sorted(node.children.values(), key=lambda c: c.node_id)
        if not children:
            x = next_x[0]
            next_x[0] += 1
        else:
            xs = [place(c, depth + 1) for c in children]
            x = (xs[0] + xs[-1]) / 2
        where[node] = (x, depth)
        return x

    place(tree.root, 0)
    return where


def _label(node: RadixNode, decode: Callable[[list[int]], str] | None, width: int) -> str:
    """The node's tokens (quoted text with a decoder, else ids), then its page ids (3 or
    more in a row as a range: "pages 0-3"), with
    "· locked" after them if a running request holds it, wrapped at `width` characters (a
    space where a line breaks is the break), whole unless the text needs more than
    MAX_TEXT_LINES lines."""
    text = decode(node.key) if decode else " ".join(map(str, node.key))
    if decode:
        text = repr(text)  # a newline shows as \n
    lines = textwrap.wrap(text, width, break_on_hyphens=False) or [text]
    if len(lines) > MAX_TEXT_LINES:
        lines = lines[: MAX_TEXT_LINES - 1] + [lines[MAX_TEXT_LINES - 1][: width - 1] + "…"]
    locked = " · locked" if node.lock_ref else ""  # a running request's path: not evictable
    word = "page " if len(node.value) == 1 else "pages "
    ids = list(node.value)
    run = len(ids) > 2 and ids == list(range(ids[0], ids[0] + len(ids)))  # "0-5", not "0, 1, ... 5"
    listed = f"{ids[0]}-{ids[-1]}" if run else ", ".join(map(str, ids))
    pages = textwrap.wrap(word + listed + locked, width + 12)
    return "\n".join(lines + pages)


@dataclass(frozen=True)
class _Geometry:
    """Where the boxes go and how big a picture of them is, in inches."""

    where: dict[RadixNode, tuple[float, int]]
    labels: dict[RadixNode, str]
    column_in: float  # one leaf's column
    level_in: float  # one level of depth, from a box's centre to its child's
    box_in: float  # the tallest box
    across: bool = False  # the root on the left, levels left to right

    def pos(self, node: RadixNode) -> tuple[float, float]:
        """Where a node's centre goes: in columns and levels, or across in levels (a column
        each) and rows (a level each, downwards)."""
        x, depth = self.where[node]
        if self.across:
            first = (ROOT_IN / 2 + GAP_IN + self.column_in / 2) / self.column_in  # level 1's x
            return (0.0 if depth == 0 else first + depth - 1), -x
        return x, self.y(depth)

    def y(self, depth: int) -> float:
        """Where a level's centres go, in levels below the root: the small root circle sits
        closer to its children than a box to its own."""
        return 0.0 if depth == 0 else -(self.root_gap + depth - 1)

    @property
    def root_gap(self) -> float:
        """From the root's centre to its children's, in levels."""
        return min(1.0, (ROOT_IN / 2 + GAP_IN + self.box_in / 2) / self.level_in)

    @property
    def columns(self) -> float:
        xs = [x for x, _ in self.where.values()]
        return max(xs) - min(xs) + 1

    @property
    def depth(self) -> int:
        return max(d for _, d in self.where.values())

    @property
    def bottom(self) -> float:
        """How far below the root the deepest level's centres are, in levels."""
        return -self.y(self.depth)

    def limits(self, bottom: float) -> tuple[tuple[float, float], tuple[float, float]]:
        """(xlim, ylim) that leave each box and the root circle just enough room, `bottom`
        levels down (panels side by side share it)."""
        xs, ys = zip(*(self.pos(node) for node in self.where))
        below = (self.box_in / 2 + 0.1) / self.level_in
        if self.across:
            left = (ROOT_IN / 2 + 0.1) / self.column_in
            return (min(xs) - left, max(xs) + 0.5), (min(ys) - below, max(ys) + below)
        return (min(xs) - 0.5, max(xs) + 0.5), (-bottom - below, (ROOT_IN / 2 + 0.1) / self.level_in)

    def size(self, title: str, least_in: float = 3.0) -> tuple[float, float]:
        """(width, height) of a figure holding the tree and its title, at least `least_in`
        wide."""
        title_in = len(title) * 13 * 0.6 / 72 + 0.4
        if self.across:
            (x0, x1), (y0, y1) = self.limits(self.bottom)
            return max((x1 - x0) * self.column_in, title_in, least_in), (y1 - y0) * self.level_in + TITLE_IN
        width = max(self.columns * self.column_in, title_in, least_in)
        above, below = ROOT_IN / 2 + 0.1, self.box_in / 2 + 0.1  # as `_plot` frames it
        tree_in = above + self.bottom * self.level_in + below
        return width, tree_in + TITLE_IN


def _geometry(tree: RadixCache, decode, width: int, across: bool = False) -> _Geometry:
    where = _layout(tree)
    labels = {node: _label(node, decode, width) for node in where if node is not tree.root}
    lines = [label.split("\n") for label in labels.values()] or [["root"]]
    box_in = max(map(len, lines)) * LINE_IN + 0.2
    column_in = max(len(line) for label in lines for line in label) * CHAR_IN + 0.45
    return _Geometry(where, labels, column_in, box_in + GAP_IN, box_in, across)


def _draw(ax, tree: RadixCache, geometry: _Geometry, page_state) -> set[str | None]:
    """Edges, then one box per node (the root a circle); returns the states drawn (None: no
    pool to read them from)."""
    pos, drawn = geometry.pos, set[str | None]()
    for node in geometry.where:
        if node.parent is not None:
            (px, py), (x, y) = pos(node.parent), pos(node)
            ax.plot([px, x], [py, y], color="#777777", lw=1.5, zorder=1)
    root = dict(boxstyle="circle", fc="white", ec="#333333")
    ax.text(*pos(tree.root), "root", ha="center", va="center", fontsize=FONT_PT, bbox=root)
    for node, label in geometry.labels.items():
        states = {page_state(p) for p in node.value} if page_state else {None}
        state = "ACTIVE" if "ACTIVE" in states else states.pop()
        drawn.add(state)
        fill = COLORS.get(state, COLORS[None])
        box = dict(boxstyle="round,pad=0.4", fc=fill, ec="#333333", lw=3.0 if node.lock_ref else 1.0)
        ax.text(
            *pos(node),
            label,
            ha="center",
            va="center",
            fontsize=FONT_PT,
            color=text_color(fill),
            bbox=box,
            zorder=2,
        )
    return drawn


def _plot(ax, tree: RadixCache, geometry: _Geometry, page_state, title: str, bottom: float) -> None:
    """The tree, a legend of the states present, and limits that leave each box, the root
    circle and the legend just enough room, `bottom` levels down (panels side by side share it)."""
    states = _draw(ax, tree, geometry, page_state)
    if page_state:
        from matplotlib.patches import Patch

        shown = [s for s in ("ACTIVE", "CACHED") if s in states]
        handles = [Patch(fc=COLORS[s], ec="#333333", label=s) for s in shown]
        ax.legend(handles=handles, fontsize=FONT_PT, loc="upper left", frameon=False)
    xlim, ylim = geometry.limits(bottom)
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.axis("off")
    ax.set_title(title, fontsize=13)


def plot_radix_tree(
    tree: RadixCache,
    ax=None,
    *,
    decode: Callable[[list[int]], str] | None = None,
    page_state: Callable[[int], str] | None = None,
    title: str | None = None,
    width: int = 22,
    across: bool = False,
):
    """Draw the tree into `ax`; with no `ax`, into a new Figure sized to the tree, which is
    returned (Jupyter shows it); otherwise the Axes is returned. Labels wrap at `width`
    characters; `across=True` draws the root on the left and the levels left to right, with
    no room for the states' legend (so no `page_state`)."""
    if across and page_state is not None:
        raise ValueError("page_state needs across=False: an across picture has no room for its legend")
    geometry = _geometry(tree, decode, width, across)
    title = title or f"{tree.num_nodes} nodes, {tree.total_size()} pages"
    fig = None
    if ax is None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=geometry.size(title))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
    _plot(ax, tree, geometry, page_state, title, geometry.bottom)
    if fig is not None:
        fig.tight_layout()
        return fig
    return ax


def plot_radix_growth(
    steps: Sequence[tuple[str, RadixCache]],
    *,
    decode: Callable[[list[int]], str] | None = None,
    width: int = 16,
):
    """One panel per (title, tree) step, left to right, each as wide as its tree (or its
    title) needs and all as tall as the tallest; returns the Figure. Labels wrap at `width`
    characters, so three small trees fit a notebook's 848 px unshrunk."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    shapes = [_geometry(tree, decode, width) for _, tree in steps]
    sizes = [shape.size(title, least_in=2.0) for shape, (title, _) in zip(shapes, steps)]
    bottom = max(shape.bottom for shape in shapes)
    widths = [w for w, _ in sizes]  # each panel as wide as its own tree: no empty margins
    fig = Figure(figsize=(sum(widths), max(h for _, h in sizes)))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(steps), squeeze=False, gridspec_kw={"width_ratios": widths})[0]
    for ax, shape, (title, tree) in zip(axes, shapes, steps):
        _plot(ax, tree, shape, None, title, bottom)
    fig.tight_layout()
    return fig


def corner_figure(
    state_0: str, kinds: Sequence[str], evicted_kind: str, radix: tuple[str, Sequence[str]], copy_page: int
) -> Figure:
    """Notebook 09, section 4a: pages 0 and 2 in the hash pool when page 2 filled (page 0 in
    state `state_0`, `kinds` of pages 0 and 2), the hash pool once page 0 is evicted (page 2 now
    `evicted_kind`), and the radix pool's tree when page 2 filled (`radix`: page 0's state, kinds);
    `copy_page` is second's copy of [1, 2], which no index holds; page 2's notes say why the
    chain's arrow starts at page 0 (the copy's hash is page 0's) and why the tree left it out."""
    rows: dict[str, Sequence[tuple[str, str, str]]] = {
        f"(1) hash pool, when page 2 filled (page 0 {state_0})": [
            ("page 0", kinds[0], "[1, 2], the original"),
            (
                "page 2",
                kinds[1],
                f"[3, 4], written after page {copy_page}\n(page {copy_page} = the copy: same hash as page 0)",
            ),
        ],
        "(2) hash pool, once page 0 is evicted": [
            ("page 0", "evicted", f"evicted; its copy, page {copy_page}, is not indexed"),
            ("page 2", evicted_kind, "[3, 4], still held by second"),
        ],
        f"(3) radix pool (its tree), when page 2 filled (page 0 {radix[0]})": [
            ("page 0", radix[1][0], "[1, 2], the original"),
            ("page 2", radix[1][1], f"[3, 4], written after page {copy_page},\nwhich is not in the tree"),
        ],
    }
    title = f"Pages 0 and 2 as each index sees them; the copy (page {copy_page}) is in neither"
    return plot_page_chains(rows, title)
