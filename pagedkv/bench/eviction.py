"""bench eviction: prefix hit rate against cache size, per eviction policy and workload.

Every stream of `pagedkv.labs.lab_workloads` (multi-turn chat, Zipf-popular system prompts, RAG
documents, a scan of one-off long prompts mixed into Zipf traffic) is replayed one request
at a time through pools of several sizes, once per policy (`pagedkv.labs.hit_rate_lab.replay`):
LRU (vLLM), SGLang's leaf-first LRU over its radix tree ("leaf-lru"), FIFO, LFU, ARC,
S3-FIFO and LRU with the most reused pages pinned ("lru+pin"). The table is the hit rate
of every policy on every workload at one cache size; the notes say where LRU loses and to
what; `--json` writes the curves (hit rate at each
size), `--plot` draws them. All of it is bookkeeping with seeded streams: the same numbers
on every machine.
"""

from __future__ import annotations

import argparse

import numpy as np

from pagedkv.bench import Report
from pagedkv.labs.hit_rate_lab import hit_rate_curves, lru_verdict, num_pages_for
from pagedkv.labs.lab_workloads import lab_workload

HELP = "prefix hit rate vs cache size: LRU, leaf-first LRU, FIFO, LFU, ARC, S3-FIFO, pinned LRU x 4 streams"
POLICIES = "lru,leaf-lru,fifo,lfu,arc,s3fifo,lru+pin"
WORKLOADS = "chat,zipf,rag,scan"
COLORS = {
    "lru": "#000000",
    "leaf-lru": "#BDBDBD",  # a wide grey band under LRU's black line: the two are equal
    "fifo": "#E69F00",
    "lfu": "#56B4E9",
    "arc": "#009E73",
    "s3fifo": "#D55E00",
    "lru+pin": "#CC79A7",
    "mru": "#999999",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cache-tokens", type=int, default=2048, help="cache size of the table")
    parser.add_argument("--sizes", default="512,1024,2048,4096,8192", help="cache sizes (tokens)")
    parser.add_argument("--policies", default=POLICIES)
    parser.add_argument("--workloads", default=WORKLOADS)
    parser.add_argument("--page-size", type=int, default=16)


def _names(value: str, option: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    if not names:
        raise ValueError(f"{option} must name at least one, got {value!r}")
    return names


def run(
    *,
    quick: bool = False,
    seed: int = 0,
    cache_tokens: int = 2048,
    sizes: str = "512,1024,2048,4096,8192",
    policies: str = POLICIES,
    workloads: str = WORKLOADS,
    page_size: int = 16,
) -> Report:
    if quick:
        sizes = "1024,4096"
    cache_sizes = sorted({int(s) for s in _names(sizes, "sizes")} | {cache_tokens})
    policy_names, workload_names = _names(policies, "policies"), _names(workloads, "workloads")
    streams = {w: lab_workload(w, seed=seed) for w in workload_names}
    for requests in streams.values():  # a clear error before any replay
        num_pages_for(requests, cache_tokens, page_size)
        num_pages_for(requests, cache_sizes[0], page_size)
    curves = hit_rate_curves(streams, policy_names, cache_sizes, page_size)
    at = cache_sizes.index(cache_tokens)
    table = {w: {p: curves[w][p][at] for p in policy_names} for w in workload_names}
    rows = [[p, *(round(100 * table[w][p], 1) for w in workload_names)] for p in policy_names]
    notes = [
        f"hit rate = prompt tokens served from the prefix cache / prompt tokens, at "
        f"{cache_tokens:,} tokens ({cache_tokens // page_size} pages of {page_size})"
    ]
    if "lru" in policy_names:
        if "leaf-lru" in policy_names:
            notes.append(
                "each line below compares LRU with every other policy but leaf-lru, which is "
                "LRU itself, kept over the radix tree"
            )
        notes += lru_verdict(table, best_label=f"highest on seed {seed}:")
    return Report(
        title=f"bench eviction: prefix hit rate (%) by policy and workload, seed {seed}",
        columns=["policy", *(f"{w} %" for w in workload_names)],
        rows=rows,
        notes=notes,
        data={
            "cache_tokens": cache_tokens,
            "page_size": page_size,
            "sizes": cache_sizes,
            "table": table,
            "curves": curves,
            "requests": {w: len(s) for w, s in streams.items()},
        },
        plotter=figure,
    )


# Each policy's marker and dash, beside its colour: FIFO (amber) and S3-FIFO (vermillion)
# differ in hue only a little, so their lines differ in shape too.
STYLES = {
    "lru": ("o", "-"),
    "fifo": ("s", (0, (5, 2))),
    "lfu": ("v", (0, (1, 1.5))),
    "arc": ("D", "-"),
    "s3fifo": ("^", "-"),
    "lru+pin": ("P", (0, (6, 2, 1, 2))),
    "mru": ("x", ":"),
}


def _line_style(policy: str) -> dict:
    """LRU a thick black line drawn over every other; SGLang's leaf-first LRU, which lies on
    it exactly, a wide grey band beneath it, so both show. Every other policy has its own
    colour, marker and dash."""
    if policy == "lru":
        return dict(color=COLORS["lru"], lw=2.5, marker="o", ms=6, zorder=4)
    if policy == "leaf-lru":
        return dict(color=COLORS["leaf-lru"], lw=9, solid_capstyle="round", zorder=1)
    marker, dash = STYLES.get(policy, ("o", "-"))
    if policy == "lfu":  # a large hollow marker on top: it rings ARC's and S3-FIFO's when they meet
        hollow = dict(ms=11, mfc="none", mew=2)
        return dict(color=COLORS.get(policy), lw=2, marker=marker, ls=dash, zorder=5, **hollow)
    # ARC's marker over S3-FIFO's: on the scan their rates meet, and S3-FIFO's sits further right
    zorder = 3 if policy == "arc" else 2
    return dict(color=COLORS.get(policy), lw=2, marker=marker, ms=7, ls=dash, zorder=zorder)


def figure(report: Report):
    """Two rows of two panels, one per workload: hit rate against cache size, one line per
    policy, each panel with its own y range, the key in one row above the panels. Short
    enough (390 px) that title, key and all four panels show together in JupyterLab's notebook area
    on a 1280x720 screen, each panel about 400 px wide, its text at least 12 px."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    curves, sizes = report.data["curves"], report.data["sizes"]
    fig = Figure(figsize=(8.4, 3.9), dpi=100)  # 840 x 390 px
    FigureCanvasAgg(fig)
    # Each panel its own y range, so lines a few points apart do not overlap.
    columns = min(2, len(curves))
    rows = -(-len(curves) // columns)
    grid = fig.subplots(rows, columns, sharex=True, squeeze=False)
    axes = grid.ravel()
    for ax in axes[len(curves) :]:
        ax.set_visible(False)
    for ax, (workload, by_policy) in zip(axes, curves.items()):
        for policy, rates in by_policy.items():
            # LRU (and leaf-lru) at the size itself; each other policy a little to its right,
            # in the key's order, so that equal rates both show
            nudge = 2.0 ** (0.035 * list(by_policy).index(policy.removeprefix("leaf-")))
            ax.plot(nudge * np.asarray(sizes), 100 * np.asarray(rates), label=policy, **_line_style(policy))
        ax.axvline(report.data["cache_tokens"], color="#999999", ls=":", zorder=0)
        ax.set_title(workload, fontsize=13, pad=3)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [f"{c:,}" for c in sizes])
        ax.set_xlim(sizes[0] / 1.2, sizes[-1] * 1.35)  # the nudged markers stay inside
        ax.minorticks_off()
        ax.grid(alpha=0.3)
        ax.margins(y=0.12)  # markers at the lowest rate stay inside the panel
        ax.tick_params(labelsize=11)
        ax.yaxis.set_major_locator(MaxNLocator(nbins=5, integer=True))  # 4 to 6 ticks: rates read off
    for ax in grid[-1]:
        ax.set_xlabel("cache size (tokens)", fontsize=12)
    for ax in grid[:, 0]:
        ax.set_ylabel("hit rate (%)", fontsize=12)
    # One key in one row above the panels, so every panel is next to it.
    handles, labels = axes[0].get_legend_handles_labels()
    fig.suptitle("Which eviction policy keeps the prefixes that come back?", fontsize=14, y=0.995)
    fig.legend(
        handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.94), ncol=len(labels),
        fontsize=11, frameon=False, handlelength=1.6, handletextpad=0.6, columnspacing=0.8,
    )  # fmt: skip
    fig.tight_layout(rect=(0, 0, 1, 0.96), w_pad=1.0, h_pad=0.6)
    return fig


def _percent(report: Report) -> dict[str, dict[str, list[float]]]:
    """Each workload's curves in percent with one decimal, as the table prints them;
    leaf-lru left out (it is LRU, number for number)."""
    return {
        w: {p: [round(100 * r, 1) for r in rates] for p, rates in by_policy.items() if p != "leaf-lru"}
        for w, by_policy in report.data["curves"].items()
    }


def close_pairs(report: Report, points: float = 0.5) -> list[tuple[str, int, str, str, float, float]]:
    """Pairs of policies whose hit rates (percent, one decimal) lie within `points` of each
    other at one cache size, so their markers in `figure` hide each other: (workload, cache
    size, higher policy, lower policy, higher rate, lower rate), by workload, size, rate."""
    pairs = []
    for workload, by_policy in _percent(report).items():
        for i, size in enumerate(report.data["sizes"]):
            ranked = sorted(by_policy, key=lambda p: -by_policy[p][i])  # stable: ties keep order
            for k, high in enumerate(ranked):
                for low in ranked[k + 1 :]:
                    a, b = by_policy[high][i], by_policy[low][i]
                    if round(a - b, 1) <= points:
                        pairs.append((workload, size, high, low, a, b))
    return pairs


def best_by_size(report: Report) -> dict[str, list[str]]:
    """For each workload, the policy with the highest hit rate at each of the report's cache
    sizes (on a tie, the one listed first); leaf-lru left out."""
    best = {}
    for w, by_policy in report.data["curves"].items():
        policies = [p for p in by_policy if p != "leaf-lru"]
        best[w] = [max(policies, key=lambda p: by_policy[p][i]) for i in range(len(report.data["sizes"]))]
    return best
