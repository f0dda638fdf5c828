"""Projector size for matplotlib figures: fill a JupyterLab cell, text >= 12 px on screen.

A JupyterLab cell on a 1280x720 projector is about 848 CSS px wide with the file browser open
(about 1100 px with it closed) and shows a PNG at its own size, or shrunk to the cell's width.
`projector(fig)` makes a figure 11 inches wide at 110 dpi (1,210 px, so it fills the cell) and
raises every text below `MIN_PT` to it: 13 pt is 19.9 px at 110 dpi, shown at 13.9 px in an
848 px cell. Every picture of `pagedkv.viz` goes through it, and notebooks pass the
benchmarks' figures through it too.

`min_font_pt(fig)` is what tests measure. Leaves out: vector output (PNG is what notebooks
store and what nbval leaves alone).
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.text import Text

from pagedkv.core.plumbing.validation import check_instance

WIDTH_IN = 11.0  # inches: ~1200 px at DPI
DPI = 110
MIN_PT = 13.0  # points at the figure's own size (>= 12 px once shrunk to an 848 px cell)
MAX_HEIGHT_IN = 7.0  # a widened figure grows taller, but stays on one projector screen


def projector(fig: Figure, width: float = WIDTH_IN, min_pt: float = MIN_PT, relayout: bool = False) -> Figure:
    """`fig`, resized to `width` inches at `DPI` with no text below `min_pt` (in place;
    returned for chaining). With `relayout`, the axes are laid out again around the grown
    text (a figure laid out once by `tight_layout` keeps its old margins otherwise).
    Example: projector(Figure(figsize=(5, 3))) -> 11 x 4.8 in."""
    check_instance("fig", fig, Figure)
    w, h = fig.get_size_inches()
    grow = width / w
    fig.set_size_inches(width, min(MAX_HEIGHT_IN, max(h, h * min(grow, 1.6))))
    fig.set_dpi(DPI)
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            labels = [
                lab
                for tick in axis.get_major_ticks() + axis.get_minor_ticks()
                for lab in (tick.label1, tick.label2)
            ]
            sizes = [label.get_fontsize() for label in labels]
            # Ticks made later (a new limit) take the first label's size or min_pt, whichever is
            # larger; every existing label keeps its own size if that is larger still.
            axis.set_tick_params(which="both", labelsize=max([min_pt, *sizes[:1]]))
            for label, size in zip(labels, sizes):
                label.set_fontsize(max(size, min_pt))
    for text in fig.findobj(Text):
        if text.get_text().strip():
            text.set_fontsize(max(text.get_fontsize(), min_pt))
    if fig.get_layout_engine() is None:
        fig.set_layout_engine("constrained")
    elif relayout:
        fig.tight_layout()
    return fig


def min_font_pt(fig: Figure) -> float:
    """The smallest visible, non-empty text of `fig` in points, after a draw (ticks included)."""
    fig.canvas.draw()
    sizes = [
        float(t.get_fontsize())  # points; the stubs also allow a size name, which Text never returns
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and t.get_figure() is not None
    ]
    return min(sizes, default=MIN_PT)
