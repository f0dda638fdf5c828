"""Notebook 09's sweep as one projector figure: the hash pool's extra hits over the radix pool
against the retry rate, one line per cache size (`pagedkv.labs.retry_sweep`)."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure

from pagedkv.labs.retry_sweep import SweepPoint
from pagedkv.viz.palette import SEQUENCE_COLORS
from pagedkv.viz.projector import projector

# Cache sizes, small to large: a colour each (rose, teal, black, from the house palette and
# far apart), each with its own marker too. None of the colours of section 6's ways (indigo,
# dark teal, purple) nor of the page chains' green and salmon.
SIZE_STYLES = (
    {"color": SEQUENCE_COLORS[0], "marker": "o"},
    {"color": SEQUENCE_COLORS[2], "marker": "s"},
    {"color": "#000000", "marker": "^"},
)


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
        style = {"label": f"{size // 16} pages", **SIZE_STYLES[k % len(SIZE_STYLES)]}
        gain.plot(x, [100 * p.extra_hits / p.radix_hits for p in line], **style)
        evict.plot(x, [p.hash_evictions - p.radix_evictions for p in line], **style)
    gain.set_title("hash pool's extra hit tokens\n(% of the radix pool's hits)")
    evict.set_title("hash pool's extra evictions\n(pages)")
    for ax in (gain, evict):
        ax.set_xlabel("chat turns retried (%)")
        ax.axhline(0, color="#555555", linewidth=1)
        ax.grid(alpha=0.3)
    gain.legend(title="cache", loc="upper left")
    return projector(fig)
