"""The serving run's figure (`bench serving`, notebook 11's section 4): latency and memory.

Left: each system's normalized latency against the request rate, on a log latency axis, with
the dashed bound. Between two measured rates the line drawn is the one `sustainable_rate`
interpolates on (latency linear in the rate: on a log axis a curve, drawn from many points),
so each line crosses the bound at the system's sustainable rate, and a cross in the system's
colour marks that rate on the bound (in the full run, systems whose rate `crossing` walked
to between finer rates get that rate, so their cross may sit just off the line). Right: the
K/V slots under load in the vLLM paper's Fig. 2 buckets. Leaves out: the whole-run shares
(printed by the report, not drawn).
"""

from __future__ import annotations

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from pagedkv.labs.serving import (
    CATEGORIES,
    LATENCY_BOUND,
    SYSTEMS,
    latency_curve,
    sustainable_rate,
)
from pagedkv.viz.palette import SERVING_BUCKET_COLORS, SYSTEM_COLORS
from pagedkv.viz.share_bars import name_thin_top

# the bars' legend beside them: short, two lines at most (the notebook's text defines each bucket)
SHORT_LABELS = {
    "internal_fragmentation": "internal frag.:\ninside a reservation",
    "external_fragmentation": "external frag.:\nrounding, holes",
}
MARKERS = dict(zip(SYSTEMS, "osD^", strict=True))  # the measured rates' markers, per system
RATE_MARK = "X"  # the sustainable rate on the bound line


def sustained_marks(data: dict, rates: list[float], walked: dict | None = None) -> dict[str, float]:
    """The rate each system's cross marks on the bound: the report's walked rate where the run
    walked one (`crossing`), else the interpolated crossing of the measured rates (the rate
    the report prints). A system whose latency never reached the bound gets no cross."""
    marks = {}
    for system in SYSTEMS:
        latency = [data[system][str(r)]["normalized_latency"] for r in rates]
        if walked and system in walked:
            marks[system] = walked[system]
        elif latency[-1] >= LATENCY_BOUND:
            marks[system] = sustainable_rate(rates, latency)
    return marks


def latency_panel(lat, data: dict, rates: list[float], walked: dict | None = None) -> None:
    """Normalized latency vs request rate per system, on a log axis with plainly labelled ticks:
    markers at the measured rates, the interpolated line between them (`latency_curve`) and a
    cross on the bound at the sustainable rate; the legend above the panel."""
    for system in SYSTEMS:
        latency = [data[system][str(r)]["normalized_latency"] for r in rates]
        xs, ys = latency_curve(rates, latency)
        measured = [xs.index(r) for r in rates]  # the markers: measured rates only
        lat.plot(
            xs, ys, marker=MARKERS[system], markevery=measured, color=SYSTEM_COLORS[system], label=system
        )
    lat.axhline(LATENCY_BOUND, color="#555555", linestyle="--", linewidth=1, label="bound: 0.5 s/token")
    mark = dict(markersize=11, markeredgecolor="black", markeredgewidth=0.8, linestyle="none")
    for system, rate in sustained_marks(data, rates, walked).items():
        lat.plot([rate], [LATENCY_BOUND], RATE_MARK, color=SYSTEM_COLORS[system], zorder=5, **mark)
    lat.plot([], [], RATE_MARK, color="white", label="sustainable rate", **mark)  # the legend's key
    lat.set_xlabel("request rate (requests/s)", fontsize=12)
    lat.set_ylabel("normalized latency (s/token)", fontsize=12)
    lat.set_yscale("log")
    ticks = [0.03, 0.05, 0.1, 0.2, 0.5, 1, 2, 4]  # labelled plainly, far enough apart to read
    lat.set_yticks(ticks, [f"{t:g}" for t in ticks])
    lat.set_xticks(rates, [f"{r:g}" for r in rates])  # every rate run, 0.5 included
    lat.minorticks_off()
    lat.grid(alpha=0.3)
    lat.legend(
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        ncol=2,
        fontsize=12,
        frameon=False,
        handlelength=1.6,
        columnspacing=0.8,
    )


def serving_figure(data: dict) -> Figure:
    """Left: normalized latency vs request rate per system (`latency_panel`). Right: KV memory
    by category under load (the paper's Fig. 2 bars); their legend beside them, on the right.
    `data`: a `bench serving` report's data."""
    systems, rates = data["systems"], data["rates"]
    fig = Figure(figsize=(8.5, 3.6), dpi=100, layout="constrained")  # 850 px wide: no shrinking in a cell;
    # 360 px tall, the legend beside the bars: the panels and the legend fit one 720-px screen together
    FigureCanvasAgg(fig)
    lat, bars = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    latency_panel(lat, systems, rates, data.get("sustainable_rates") or None)
    colors = SERVING_BUCKET_COLORS
    top, bottom = str(data["top_rate"]), np.zeros(len(SYSTEMS))
    for category, color in zip(CATEGORIES, colors, strict=True):
        values = np.array([systems[s][top][category] for s in SYSTEMS])
        label = SHORT_LABELS.get(category, category.replace("_", " "))
        bars.bar(SYSTEMS, values, bottom=bottom, color=color, label=label)
        bottom += values
    for x, s in enumerate(SYSTEMS):
        share = systems[s][top]["token_states"]
        bars.text(x, share / 2, f"{share:.0f}%", ha="center", va="center", color="white", fontsize=12)
    bars.set_ylim(0, 100)
    name_thin_top(bars, len(SYSTEMS) - 1, systems["paged"][top])
    bars.set_ylabel("% of K/V slots", fontsize=12)
    bars.set_xlabel(f"{data['top_rate']:g} req/s, under load (requests waiting)", fontsize=12)
    handles, labels = bars.get_legend_handles_labels()  # beside the bars, top down as they stack
    fig.legend(handles[::-1], labels[::-1], loc="outside right center", fontsize=12, handlelength=1.2)
    for ax in (lat, bars):
        ax.tick_params(labelsize=12)  # 12 px at 850 px
    bars.tick_params(axis="x", labelrotation=20)  # "oracle" and "paged" apart at 12 px
    return fig
