"""Section 1's chain of notebook 06 as one picture: slots holding tokens → batch → bytes per
output token → tokens per second, one panel per link, one bar per system.

Draws what `pagedkv.labs.step_bytes.chain` computes; each bar carries its number, as the
notebook prints it. Leaves out: the weights and K/V split of a step (the notebook's table).
"""

from __future__ import annotations

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from pagedkv.viz.palette import BENCH_SYSTEM_COLORS as COLOURS  # none near a kind of slot's colour

PANELS = [  # key, title, how a bar's number is written
    ("token_states", "1. slots holding\ntokens (%)", "{:.1f}%"),
    ("batch", "2. batch = output\ntokens per step", "{:.1f}"),
    ("per_token", "3. GB read per\noutput token\n(lower = faster)", "{:.2f}"),
    ("speed", "4. tokens/s\n(× max's)", "{:.1f}×"),
]


def chain_figure(chain: dict[str, dict]) -> Figure:
    """Four panels of horizontal bars, one bar per system of `chain` (top to bottom in its
    order), read left to right. "per_token" is in bytes and drawn in GB (10^9 bytes)."""
    fig = Figure(figsize=(11, 3.2))
    FigureCanvasAgg(fig)
    systems = list(chain)
    axes = fig.subplots(1, len(PANELS), sharey=True)
    for ax, (key, title, fmt) in zip(axes, PANELS, strict=True):
        values = [chain[s][key] / (1e9 if key == "per_token" else 1) for s in systems]
        ys = list(range(len(systems)))[::-1]
        ax.barh(ys, values, color=[COLOURS.get(s, "#777777") for s in systems], height=0.6)
        top = max(values)
        for y, v in zip(ys, values, strict=True):
            ax.text(v + 0.03 * top, y, fmt.format(v), va="center", ha="left")
        ax.set_xlim(0, 1.6 * top)
        ax.set_xticks([])
        ax.set_title(title, loc="left")
        for side in ("top", "right", "bottom"):
            ax.spines[side].set_visible(False)
    axes[0].set_yticks(list(range(len(systems)))[::-1], systems)
    fig.set_layout_engine("constrained")
    return fig
