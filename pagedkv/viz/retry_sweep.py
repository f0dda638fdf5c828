"""Notebook 09's sweep as one projector figure: the hash pool's extra hits over the radix pool
against the retry rate, one line per cache size (`pagedkv.labs.retry_sweep`)."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from pagedkv.labs.retry_sweep import SweepPoint
from pagedkv.viz.palette import BENCH_SYSTEM_COLORS, SEQUENCE_COLORS
from pagedkv.viz.projector import projector

# Cache sizes, small to large: greys, light to black, each with its own marker. No hue, so no
# curve reads as one of notebook 09's coloured things (section 6's ways: indigo, dark teal,
# purple; the page chains' green "reached" and salmon "orphan").
SIZE_STYLES = (
    {"color": "#999999", "marker": "o"},
    {"color": "#555555", "marker": "s"},
    {"color": "#000000", "marker": "^"},
)
# Seeds (09b): blue, brown, olive; none of the page chains' green or salmon, nor 09's ways
SEED_COLORS = (SEQUENCE_COLORS[10], SEQUENCE_COLORS[8], BENCH_SYSTEM_COLORS["oracle"])


def plot_retry_sweep(points: Sequence[SweepPoint]) -> Figure:
    """Left: the hash pool's extra hit tokens, % of the radix pool's; right: its extra evictions.
    x: the share of chat turns retried; a line (labelled at its end) per cache size."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = Figure(figsize=(11, 4.6))
    FigureCanvasAgg(fig)
    gain, evict = fig.subplots(1, 2)
    for k, size in enumerate(sorted({p.cache_tokens for p in points})):
        line = [p for p in points if p.cache_tokens == size]
        x = [100 * p.retry_rate for p in line]
        style = {"label": f"{size // 16:,} pages", **SIZE_STYLES[k % len(SIZE_STYLES)]}
        gain.plot(x, [100 * p.extra_hits / p.radix_hits for p in line], **style)
        evict.plot(x, [p.hash_evictions - p.radix_evictions for p in line], **style)
    gain.set_title("hash pool's extra hit tokens\n(% of the radix pool's hits)")
    evict.set_title("hash pool's extra evictions\n(pages)")
    for ax in (gain, evict):
        ax.set_xlabel("chat turns retried (%)")
        ax.axhline(0, color="#BBBBBB", linewidth=1)
        ax.grid(alpha=0.3)
    gain.legend(title="cache", loc="upper left")
    return projector(fig)


def plot_seed_sweeps(sweeps: dict[int, Sequence[SweepPoint]]) -> Figure:
    """09b, section 2: the sweep of each seed, a column per cache size. Top row: the hash pool's
    extra hit tokens (% of the radix pool's), a line per seed; bottom row: its extra evictions
    (solid) and, of those, orphans (dashed), a colour per seed."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    sizes = sorted({p.cache_tokens for sweep in sweeps.values() for p in sweep})
    fig = Figure(figsize=(11, 5.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, len(sizes), squeeze=False, sharex=True)
    for k, (seed, sweep) in enumerate(sweeps.items()):
        color = SEED_COLORS[k % len(SEED_COLORS)]
        for col, size in enumerate(sizes):
            line = sorted((p for p in sweep if p.cache_tokens == size), key=lambda p: p.retry_rate)
            x = [100 * p.retry_rate for p in line]
            gain, evict = axes[0][col], axes[1][col]
            gain.plot(x, [100 * p.gain for p in line], color=color, marker="o", label=f"seed {seed}")
            evict.plot(x, [p.extra_evictions for p in line], color=color, marker="o")
            evict.plot(x, [p.orphan_evictions for p in line], color=color, linestyle="--")
    for col, size in enumerate(sizes):
        axes[0][col].set_title(f"{size // 16:,} pages")
        axes[1][col].set_xlabel("turns retried (%)")
        axes[1][col].yaxis.set_major_locator(MaxNLocator(integer=True))
        for ax in (axes[0][col], axes[1][col]):
            ax.axhline(0, color="#BBBBBB", linewidth=1)
            ax.grid(alpha=0.3)
    for col, size in enumerate(sizes):
        if not any(p.extra_evictions for sweep in sweeps.values() for p in sweep if p.cache_tokens == size):
            axes[1][col].cla()  # a flat line at 0 on every seed: say it instead of drawing it
            axes[1][col].text(0.5, 0.5, "no extra evictions\nat any rate", ha="center", va="center",
                              transform=axes[1][col].transAxes)  # fmt: skip
            axes[1][col].set_yticks([])
            axes[1][col].set_xlabel("turns retried (%)")
    axes[0][0].set_ylabel("extra hit tokens\n(% of radix)")
    axes[1][0].set_ylabel("extra evictions (solid)\norphans (dashed)")
    handles, labels = axes[0][0].get_legend_handles_labels()  # one key above every column
    fig.legend(handles, labels, loc="outside upper center", ncol=len(labels))
    return projector(fig)
