"""Pictures of a radix tree (`pagedkv.radix.radix_cache.RadixCache`) as it grows and splits.

Each node is a box holding its run of tokens (as text when a decoder is given, e.g.
`TinyLM.decode`) and its page ids; edges go from parent to child, the root at the top.
Boxes are coloured by what the pages are doing when a page state is given (a pool's
`page(pid).state.name`): ACTIVE (held by a running sequence) or CACHED (evictable), in the
pool heatmap's state colours (`pagedkv.viz.palette.STATE_COLORS`), so a state has one colour
in every picture; with no page state the boxes are white (grey is FREE there, and a tree
never holds a FREE page). `plot_radix_growth` draws several moments side by side, so a split reads as one box
becoming two with the same pages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from matplotlib.colors import to_rgb

from pagedkv.core.page import PageState
from pagedkv.radix.radix_cache import RadixCache, RadixNode
from pagedkv.viz.palette import STATE_COLORS

COLORS = {  # page state name -> fill: the heatmap's, None = no state given
    "ACTIVE": STATE_COLORS[PageState.ACTIVE],
    "CACHED": STATE_COLORS[PageState.CACHED],
    None: "#FFFFFF",
}


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
    text = decode(node.key) if decode else " ".join(map(str, node.key))
    text = text.replace("\n", " ")
    if len(text) > width:
        text = text[: width - 1] + "…"
    pages = ", ".join(map(str, node.value))
    return f"{text!r}\npages {pages}" if decode else f"{text}\npages {pages}"


def _draw(ax, tree: RadixCache, where, decode, page_state, width: int) -> None:
    """Edges, then one box per node (the root a circle)."""
    for node, (x, depth) in where.items():
        if node.parent is not None:
            px, pdepth = where[node.parent]
            ax.plot([px, x], [-pdepth, -depth], color="#777777", lw=1.5, zorder=1)
    for node, (x, depth) in where.items():
        if node is tree.root:
            ax.text(
                x,
                0,
                "root",
                ha="center",
                va="center",
                fontsize=12,
                bbox=dict(boxstyle="circle", fc="white", ec="#333333"),
            )
            continue
        states = {page_state(p) for p in node.value} if page_state else {None}
        state = "ACTIVE" if "ACTIVE" in states else states.pop()
        fill = COLORS.get(state, COLORS[None])
        ax.text(
            x,
            -depth,
            _label(node, decode, width),
            ha="center",
            va="center",
            fontsize=12,
            color=text_color(fill),
            bbox=dict(boxstyle="round,pad=0.4", fc=fill, ec="#333333"),
            zorder=2,
        )


def plot_radix_tree(
    tree: RadixCache,
    ax=None,
    *,
    decode: Callable[[list[int]], str] | None = None,
    page_state: Callable[[int], str] | None = None,
    title: str | None = None,
    width: int = 20,
):
    """Draw the tree into `ax`; with no `ax`, into a new Figure, which is returned (Jupyter
    shows it); otherwise the Axes is returned."""
    fig = None
    if ax is None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=(10, 5))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
    where = _layout(tree)
    _draw(ax, tree, where, decode, page_state, width)
    if page_state:
        from matplotlib.patches import Patch

        handles = [Patch(fc=COLORS[s], ec="#333333", label=s) for s in ("ACTIVE", "CACHED")]
        ax.legend(handles=handles, fontsize=12, loc="upper right", frameon=False)
    xs = [x for x, _ in where.values()]
    depth = max(d for _, d in where.values())
    ax.set_xlim(min(xs) - 0.7, max(xs) + 0.7)
    ax.set_ylim(-depth - 0.6, 0.5)
    ax.axis("off")
    ax.set_title(title or f"{tree.num_nodes} nodes, {tree.total_size()} pages", fontsize=13)
    if fig is not None:
        fig.tight_layout()
        return fig
    return ax


def plot_radix_growth(
    steps: Sequence[tuple[str, RadixCache]],
    *,
    decode: Callable[[list[int]], str] | None = None,
    width: int = 20,
):
    """One panel per (title, tree) step, left to right; returns the Figure."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.2 * len(steps), 4.6))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(steps), squeeze=False)[0]
    for ax, (title, tree) in zip(axes, steps):
        plot_radix_tree(tree, ax, decode=decode, title=title, width=width)
    fig.tight_layout()
    return fig
