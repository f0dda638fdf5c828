"""The figure of `bench attention` (`pagedkv.bench.attention.figure`): paged / dense time per
point, against the vLLM paper's kernel and against one recorded full run of this benchmark.

Numpy timings sit well above the paper's GPU kernel: numpy must copy each page's K/V into a
buffer before a matmul can read it, while a GPU kernel reads the pages in place.
"""

from __future__ import annotations

from typing import Any

PAPER_RATIOS = (1.20, 1.26)  # vLLM paper, Sec. 7.1: its paged kernel's time / a contiguous kernel's
# One full run (`python -m pagedkv bench attention`: B = 1 to 32, L = 512 to 4,096, best of 15,
# one BLAS thread), on the machine that ran it: the range notebook 06, section 6 quotes.
FULL_RUN_RATIOS = (1.32, 3.07)
Y_CAP = 4.0  # the y-axis stops here, so the grey band stays readable; taller bars are cut
# the bars: dark grey, palette.BENCH_SERIES_COLOR (labs sits below viz, so the value is repeated;
# tests/test_bench_notebook06.py checks the two agree), not the blue of notebook 06's token states
BARS, FULL_RUN_COLOR = "#555555", "#BBBBBB"


def figure(report: Any):
    """Paged / dense time per (batch, context) point as bars, named by the run that made them
    (a quick run's are labelled noisy); behind them a grey band spans `FULL_RUN_RATIOS`; the
    paper's GPU `PAPER_RATIOS` are not drawn or named (no GPU bar to compare; the notebook's
    caption says them, a learner searched the plot for a title naming them). The
    legend sits below the axes (`fig.legends[0]`): it covers no bar, and the title is read
    first. The y-axis stops at `Y_CAP`: a taller bar is cut there. Every bar's value is
    written on it: inside the top of a bar near the axis's top, above any other."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    points = report.data["points"]
    quick = report.data.get("quick", False)
    # 3.2 in tall: at projector size (`pagedkv.viz.projector`) at most 600 px, one screen
    fig = Figure(figsize=(max(6, 0.8 * len(points)), 3.2), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    labels = [f"B={p['batch']}\nL={p['context']}" for p in points]
    yours = "yours (quick, noisy)" if quick else "yours (this machine)"
    ratios = [p["ratio"] for p in points]
    ax.bar(labels, [min(r, Y_CAP) for r in ratios], color=BARS, width=0.5, zorder=2)
    low, high = FULL_RUN_RATIOS
    top = min(Y_CAP, max(high, *ratios) * 1.1)
    for x, r in enumerate(ratios):  # every bar's value: inside a tall or cut bar's top, else above
        if r > 0.9 * top:
            ax.text(x, min(r, top) * 0.97, f"{r:.1f}×", ha="center", va="top", color="white", zorder=5)
        else:
            ax.text(x, r + 0.03 * top, f"{r:.1f}×", ha="center", va="bottom", color="black", zorder=5)
    ax.axhspan(low, high, color=FULL_RUN_COLOR, alpha=0.45, zorder=0)
    ax.axhline(1.0, color="black", lw=0.8, zorder=4)
    ax.set_ylim(0, top)
    ax.set_ylabel("paged time ÷ dense time (×)")
    ax.set_xlabel("B sequences of L tokens each, one decode step")
    run = "quick run (best of 15)" if quick else "full run"
    ax.set_title(f"This machine, {run}: numpy, wall clock", fontsize=10)
    handles = [
        Patch(color=BARS, label=yours),
        Patch(
            color=FULL_RUN_COLOR, alpha=0.45, label=f"range of one full run's points: {low:.2f}-{high:.2f}x"
        ),
        Line2D([], [], color="black", lw=0.8, label="1.0: same time as dense"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, frameon=False)
    return fig
