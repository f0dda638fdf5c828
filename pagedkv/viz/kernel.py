"""A picture of the chunked two-pass decode kernel of `TiledAttentionEngine.paged_attention_batch`.

The kernel never builds a sequence's whole K or V: it walks the block table a chunk of pages
at a time. Pass 1 gathers the keys of one chunk and computes that chunk's scores `q · K^T`
into one score row; then **one** softmax runs over the whole row: its max `m`, each
`exp(s - m)` (`s`: a score, never a sum) and their sum `ℓ`; pass 2 gathers the values chunk
by chunk and accumulates `exp(s - m) · V`, and the output row is divided by `ℓ` once, at
the end (the softmax's normalising step, moved after the sum over V: same weights, one
division per output value instead of one per score). Chunks are sized to stay in the
processor's memory cache (L2), the reason the kernel is chunked at all.
`plot_chunked_kernel(block_table, chunk)` draws those three stages for a block table.

vLLM's PagedAttention v2 (and FlashDecoding) also split a long context, but each partition
runs its own softmax and `weights · V` and keeps its max and exp-sum; a reduce kernel
rescales the partitions' outputs by them and combines them. Leaves out: heads and batches
(one query row is drawn).

`plot_query_outputs(panels)` draws what attention programs return for several queries side
by side: notebook 08's "attention" that ignores the query gives one line for all of them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Rectangle
from matplotlib.ticker import MaxNLocator

from pagedkv.core.plumbing.validation import check_int
from pagedkv.viz.projector import projector

ROWS = {"K": 3.0, "scores": 1.9, "V": -0.2, "out": -1.2}  # y of each band (data units)
FOOT_Y = -1.7  # y of the footnote that explains the cell labels
# Chunks alternate two neutral shades: request colours (palette.py) mean requests everywhere.
CHUNK_SHADES = ("#F0F0F0", "#BDBDBD")


def plot_chunked_kernel(
    block_table: Sequence[int],
    chunk: int = 2,
    page_size: int = 4,
    num_tokens: int | None = None,
    title: str | None = None,
) -> Figure:
    """The two passes over `block_table`, `chunk` pages at a time (chunks in alternating grey
    shades, bracketed and numbered above; one arrow per page); each page gives one score per
    token it holds, labelled by the tokens' positions (from 0).
    `num_tokens` (default: every page full) ends the last page's label at the last token.
    `title` replaces the default one (the block table and the chunk size), e.g. to say that
    the chunks drawn are smaller than the ones a real run uses.
    Example: plot_chunked_kernel([0, 1, 2, 7], chunk=2, num_tokens=14) -> scores s0-3 ... s12-13."""
    table = [int(p) for p in block_table]
    if not table:
        raise ValueError("block_table must hold at least one page id")
    check_int("chunk", chunk, 1)  # pages per chunk
    check_int("page_size", page_size, 1)
    n = len(table)
    scores = _score_labels(n, page_size, n * page_size if num_tokens is None else num_tokens)
    fig = Figure(figsize=(11, 4.0), layout="constrained")  # 440 px: the whole picture on one screen
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_xlim(-2.6, n + 0.3)
    ax.set_ylim(FOOT_Y - 0.25, ROWS["K"] + 1.4)
    ax.axis("off")

    def cell(x: float, y: float, text: str, color: str, w: float = 0.9) -> None:
        ax.add_patch(Rectangle((x, y), w, 0.7, facecolor=color, edgecolor="#333333", alpha=0.85))
        r, g, b, _ = to_rgba(color)
        ink = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.6 else "white"
        ax.text(x + w / 2, y + 0.35, text, ha="center", va="center", fontsize=13, color=ink)

    for i, page in enumerate(table):
        color = CHUNK_SHADES[(i // chunk) % len(CHUNK_SHADES)]
        cell(i, ROWS["K"], f"K p{page}", color)
        cell(i, ROWS["scores"], scores[i], color)
        cell(i, ROWS["V"], f"V p{page}", color)
        ax.add_patch(FancyArrowPatch((i + 0.45, ROWS["K"]), (i + 0.45, ROWS["scores"] + 0.7),
                                     arrowstyle="-|>", mutation_scale=14, color="#333333"))  # fmt: skip
        end = n / 2 - 2.0 + 4.0 * (i + 0.5) / n  # each V page feeds the one output row
        ax.add_patch(FancyArrowPatch((i + 0.45, ROWS["V"]), (end, ROWS["out"] + 0.7),
                                     arrowstyle="-|>", mutation_scale=14, color="#888888"))  # fmt: skip
    _brackets(ax, n, chunk)
    _softmax_marks(ax, n)
    cell(n / 2 - 2.25, ROWS["out"], "Σ exp(s − m) · V, then ÷ ℓ", "#555555", w=4.5)
    for band, y in ROWS.items():
        ax.text(-2.5, y + 0.35, BAND_LABELS[band], ha="left", va="center", fontsize=13)
    ax.text(-2.5, FOOT_Y, f"K p{table[-1]}, V p{table[-1]}: the keys and values stored in page {table[-1]};"
            f" {scores[0]}: the scores of the tokens at positions {scores[0][1:].replace('-', ' to ')}",
            ha="left", va="center", fontsize=13)  # fmt: skip
    if title is None:
        title = f"block table {table}: {n} pages in chunks of {chunk} (grey shades: chunks, not requests)"
    ax.set_title(title, fontsize=14, loc="left")
    return projector(fig)


BAND_LABELS = {  # the left-hand label of each row of the picture (two lines each)
    "K": r"pass 1: K, a chunk at" "\n" r"a time; scores $q \cdot K^{T}$",
    "scores": "scores: the whole\nrow, a cell per page",
    "V": "pass 2: V, a chunk at\na time; exp(s − m) · V",
    "out": "output row:\nnormalised last",
}


def _softmax_marks(ax: Axes, n: int) -> None:
    """The softmax over the whole score row (`n` pages wide), and its weights going to every
    V page at once: a dashed arrow onto a bracket that spans the whole V row."""
    ax.add_patch(Rectangle((-0.05, ROWS["scores"] - 0.1), n, 0.9, fill=False, edgecolor="#D55E00", lw=3))
    ax.text(n / 2, ROWS["scores"] - 0.35, "one softmax over the whole row: max m, exp(s − m), their sum ℓ",
            ha="center", va="center", fontsize=13, color="#D55E00")  # fmt: skip
    top = ROWS["V"] + 0.85
    ax.plot([0, 0, n - 0.1, n - 0.1], [top - 0.1, top, top, top - 0.1], color="#D55E00", lw=2)
    ax.add_patch(FancyArrowPatch((n / 2, ROWS["scores"] - 0.55), (n / 2, top),
                                 arrowstyle="-|>", mutation_scale=18, color="#D55E00",
                                 linestyle="--"))  # fmt: skip
    ax.text(n / 2 + 0.15, (ROWS["scores"] - 0.55 + top) / 2, "exp(s − m): weights for every V page",
            ha="left", va="center", fontsize=13, color="#D55E00")  # fmt: skip


def _brackets(ax: Axes, n: int, chunk: int) -> None:
    """A bracket over each chunk of `chunk` pages (of `n`), numbered from 0 like the pages."""
    for k, first in enumerate(range(0, n, chunk)):
        width = min(chunk, n - first)
        low, high = ROWS["K"] + 0.75, ROWS["K"] + 0.85  # just above the K row
        ax.plot([first, first, first + width - 0.1, first + width - 0.1], [low, high, high, low],
                color="#333333", lw=1.5)  # fmt: skip
        ax.text(first + (width - 0.1) / 2, high + 0.1, f"chunk {k}", ha="center", va="bottom", fontsize=13)


def _score_labels(num_pages: int, page_size: int, num_tokens: int) -> list[str]:
    """One label per page: the positions (from 0) of the tokens it holds, the last page's
    ending at the last token. Example: (2, 4, 7) -> ["s0-3", "s4-6"]."""
    check_int("num_tokens", num_tokens, (num_pages - 1) * page_size + 1, num_pages * page_size)
    spans = [(i * page_size, min((i + 1) * page_size, num_tokens) - 1) for i in range(num_pages)]
    return [f"s{first}-{last}" if last > first else f"s{first}" for first, last in spans]


def plot_query_outputs(panels: dict[str, Sequence], title: str = "", sharey: bool = False) -> Figure:
    """One panel per attention program (e.g. `{"naive k·v": [out1, out2], "dense": [...]}`):
    each query's output vector (flattened heads × dims) as a line of markers over the output
    index, each panel on its own y scale unless `sharey`. Outputs shaped (..., heads, dims)
    get a dashed divider where one head ends and a "head h" label over each; one legend above
    the panels serves them all. A program that ignores the query draws one line for every
    query (query 2's crosses inside query 1's hollow circles); real attention draws a
    different line per query (notebook 08, section 6)."""
    if not panels:
        raise ValueError("panels must name at least one program, got none")
    counts = {name: len(outputs) for name, outputs in panels.items()}
    if min(counts.values()) < 1 or len(set(counts.values())) != 1:
        raise ValueError(f"every panel needs the same number (>= 1) of outputs, got {counts}")
    fig = Figure(figsize=(11, 3.8), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(panels), sharey=sharey, squeeze=False)[0]
    # Query 1: large hollow circles; query 2: smaller crosses, which show inside the circles
    # when both queries get the same output. Black, purple, green: not the vermilion and blue
    # that name the naive cache and pagedkv in notebook 08's other figures.
    styles = (("o", "-", "#000000", 13), ("x", "--", "#AA4499", 9), ("s", ":", "#117733", 7))
    for ax, (name, outputs) in zip(axes, panels.items(), strict=True):
        for k, out in enumerate(outputs):
            marker, line, color, size = styles[k % len(styles)]
            values = [float(x) for x in np.ravel(out)]
            ax.plot(
                range(len(values)),
                values,
                marker=marker,
                linestyle=line,
                color=color,
                markersize=size,
                markerfacecolor="none" if marker == "o" else color,
                markeredgewidth=2,
                linewidth=1.5,
                label=f"query {k + 1}",
            )
        ax.set_title(name, loc="left", pad=10)  # clear of the "head h" labels
        ax.axhline(0, color="#888888", linewidth=0.8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        _mark_heads(ax, np.shape(outputs[0]))
    per_panel = {name: np.ravel(np.asarray(outputs, dtype=float)) for name, outputs in panels.items()}
    everything = np.concatenate(list(per_panel.values()))
    for ax, name in zip(axes, panels, strict=True):
        _ticks_past_the_data(ax, everything if sharey else per_panel[name])
    for ax in axes if not sharey else axes[:1]:
        ax.set_ylabel("output value")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper right", ncols=len(labels))
    if title:
        fig.suptitle(title, x=0.01, ha="left")
    return projector(fig)


def _ticks_past_the_data(ax: Axes, values: np.ndarray) -> None:
    """Y ticks at round steps (1, 2, 2.5 or 5 times a power of 10, about 8 of them) and y
    limits at the first tick past each end of `values`, so the largest and smallest values
    can be read off ticks on both sides of them. Example: values from -6.1 to 9.1 ->
    ticks -8, -6, ..., 10 and limits (-8, 10)."""
    lo, hi = float(values.min()), float(values.max())
    if hi == lo:
        lo, hi = lo - 1, hi + 1
    ticks = MaxNLocator(nbins=8, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi)
    step = float(ticks[1] - ticks[0])
    pad = 0.02 * (hi - lo)  # a marker on a tick would sit on the frame: go one step further
    bottom, top = step * np.floor((lo - pad) / step), step * np.ceil((hi + pad) / step)
    ax.set_yticks(np.round(np.arange(bottom, top + step / 2, step), 10))
    ax.set_ylim(bottom, top)


def _mark_heads(ax: Axes, shape: tuple[int, ...]) -> None:
    """Label the x axis of a flattened output. For a (..., heads, dims) shape with several
    heads: a dashed line between heads, "head h" over each head's run of elements (an axis
    along the top), and the runs in the x label, e.g. "head 0: 0-7, head 1: 8-15"."""
    heads, dims = (shape[-2], shape[-1]) if len(shape) >= 2 else (1, shape[-1] if shape else 1)
    if heads < 2:
        ax.set_xlabel("output element")
        return
    runs = ", ".join(f"head {h}: {h * dims}-{(h + 1) * dims - 1}" for h in range(heads))
    ax.set_xlabel(f"output element ({runs})")
    for h in range(1, heads):
        ax.axvline(h * dims - 0.5, color="#333333", linestyle="--", linewidth=1.5)
    top = ax.secondary_xaxis("top")
    top.set_xticks([(h + 0.5) * dims - 0.5 for h in range(heads)], [f"head {h}" for h in range(heads)])
    top.tick_params(length=0)
