"""bench sharing: KV memory saved by fork sharing, for parallel sampling and beam search.

Each Alpaca-like request (bookkeeping only, prefix caching off, so only `fork` shares) runs
alone in a pool:

- **parallel sampling, n outputs**: the prompt is admitted once and forked into n samples;
  each sample appends its own tokens, copying the shared last prompt page on its first write
  (copy-on-write). Shared: the prompt's full pages.
- **beam search, width k**: k beams start as forks of the prompt. At every step each of the
  k surviving beams extends a parent drawn by `workloads.beam_parents` (good beams have
  several children, weak ones none): the survivors are forked from their parents, the old
  beams are freed, and each survivor appends its token (COW where a last page is shared).
  Shared: the prompt and every common prefix of the beams.

After admission and after every decode step the pool's ACTIVE pages are compared with the
pages the same sequences would hold without sharing (sum over sequences of
ceil(tokens / page_size)). Saving = 1 - sum(shared) / sum(unshared), the vLLM paper's
definition (Sec. 6.3): 6.1-9.8 % for parallel sampling and 37.6-55.2 % for beam search on
Alpaca, 16.2-30.5 % and 44.3-66.3 % on ShareGPT, n, k = 2 to 6. The report prints the range of
the workload it ran.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

import numpy as np
from tqdm import tqdm

from pagedkv.bench import Report
from pagedkv.core.config import CacheConfig
from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.labs.workloads import Request, beam_parents, generate

HELP = "memory saved by fork sharing: parallel sampling (n = 2, 4, 6) and beam search (k)"
# The vLLM paper, Sec. 6.3 (Kwon et al., SOSP 2023): saving ranges over n, k = 2 to 6, by dataset.
# The saving grows with the width: each range's low end is the paper's width 2, its high end width 6.
PAPER_WIDTHS = (2, 6)
# A bar's value: 9 points above the bar or the paper's line across it, whichever is higher.
ABOVE: dict[str, Any] = {"xytext": (0, 9), "textcoords": "offset points"}
# The paper's dash, per mode: a solid and a dotted black line, told apart in the legend.
PAPER_DASHES: dict[str, dict[str, Any]] = {
    "parallel sampling": {"color": "black", "lw": 2.5, "linestyle": "solid"},
    "beam search": {"color": "black", "lw": 4, "linestyle": (0, (1, 0.8))},
}
PAPER = {
    "alpaca": {"parallel sampling": (6.1, 9.8), "beam search": (37.6, 55.2)},
    "sharegpt": {"parallel sampling": (16.2, 30.5), "beam search": (44.3, 66.3)},
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--workload", default="alpaca", choices=["alpaca", "sharegpt"])
    parser.add_argument("--widths", default="2,4,6", help="n for sampling and k for beam search")
    parser.add_argument("--page-size", type=int, default=16)
    parser.add_argument("--beam-decay", type=float, default=0.5, help="see workloads.beam_parents")


def _pages(tokens: int, page_size: int) -> int:
    return -(-tokens // page_size)


def simulate(
    request: Request,
    mode: str,
    width: int,
    seqs: SequenceManager,
    rng: np.random.Generator,
    decay: float,
) -> tuple[int, int, int]:
    """Run one request; returns (sum of shared pages, sum of unshared pages, COW copies)."""
    pool, size = seqs.pool, seqs.page_size
    cows = pool.stats.cow_copies
    seqs.add("prompt", request.prompt_token_ids)
    beams = [f"b{j}" for j in range(width)]
    for b in beams:
        seqs.fork("prompt", b)
    seqs.free("prompt")
    length = request.prompt_len
    shared, unshared = pool.num_active_pages, width * _pages(length, size)
    steps = request.max_new_tokens - 1  # the last token never gets a slot
    parents = beam_parents(width, steps, seed=int(rng.integers(1 << 31)), decay=decay)
    for t in range(steps):
        if mode == "beam search":
            survivors = [f"s{t}.{j}" for j in range(width)]
            for j, parent in enumerate(parents[t]):
                seqs.fork(beams[parent], survivors[j])
            for b in beams:
                seqs.free(b)
            beams = survivors
        for b, token in zip(beams, rng.integers(0, 32_000, width).tolist(), strict=True):
            seqs.append_slot(b, token)
        length += 1
        shared += pool.num_active_pages
        unshared += width * _pages(length, size)
    for b in beams:
        seqs.free(b)
    return shared, unshared, pool.stats.cow_copies - cows


def _measure(
    trace: list[Request], widths: list[int], seqs: SequenceManager, rng: np.random.Generator, decay: float
) -> dict[str, dict[int, dict[str, float]]]:
    """mode -> width -> pages shared and unshared (summed over every decode step of every
    request), the saving in percent and the copies on write."""
    data: dict[str, dict[int, dict[str, float]]] = {}
    jobs = [(m, w) for m in ("parallel sampling", "beam search") for w in widths]
    for mode, width in tqdm(jobs, desc="sharing", disable=None):
        data.setdefault(mode, {})[width] = _measure_mode(trace, mode, width, seqs, rng, decay)
    return data


def _measure_mode(
    trace: list[Request], mode: str, width: int, seqs: SequenceManager, rng: np.random.Generator, decay: float
) -> dict[str, float]:
    """One mode and width over every request: the sums and 1 - sum(shared) / sum(unshared)."""
    shared = unshared = cows = 0
    for request in trace:
        s, u, c = simulate(request, mode, width, seqs, rng, decay)
        shared, unshared, cows = shared + s, unshared + u, cows + c
    return {
        "saving_pct": 100.0 * (1 - shared / unshared),
        "shared_pages": shared,
        "unshared_pages": unshared,
        "cow_copies": cows,
    }


def parallel_saving(
    trace: list[Request], width: int, page_size: int, appended: int | None = None, seed: int = 0
) -> dict[str, float]:
    """Parallel sampling of every request of `trace` into `width` samples in pages of
    `page_size`, as `run` measures it (pages summed over every decode step): `_measure`'s
    entry, with "saving_pct". With `appended`, every sample appends exactly that many tokens
    (notebook 04's `parallel` scenario: 8), whatever the request's own output length."""
    if appended is not None:  # the last output token never gets a slot: one more than appended
        trace = [dataclasses.replace(r, max_new_tokens=appended + 1) for r in trace]
    longest = max(r.final_len for r in trace)
    config = CacheConfig.bookkeeping(
        width * (_pages(longest, page_size) + 2), page_size, enable_prefix_caching=False
    )
    seqs = SequenceManager(KVCachePool(config))
    entry = _measure_mode(trace, "parallel sampling", width, seqs, np.random.default_rng(seed), 0.5)
    seqs.check_invariants()
    return entry


def run(
    *,
    quick: bool = False,
    seed: int = 0,
    requests: int = 300,
    workload: str = "alpaca",
    widths: str = "2,4,6",
    page_size: int = 16,
    beam_decay: float = 0.5,
) -> Report:
    if quick:
        requests = 30
    ns = [int(w) for w in widths.split(",")]
    trace = generate(workload, requests, seed)
    longest = max(r.final_len for r in trace)
    config = CacheConfig.bookkeeping(
        max(ns) * (_pages(longest, page_size) + 2), page_size, enable_prefix_caching=False
    )
    seqs = SequenceManager(KVCachePool(config))
    data = _measure(trace, ns, seqs, np.random.default_rng(seed), beam_decay)
    seqs.check_invariants()
    return Report(
        plotter=figure,
        title=(
            f"bench sharing: {requests} {workload}-like requests, page {page_size}, "
            "pages summed over every decode step"
        ),
        columns=[
            "mode",
            "n or k",
            "saving %",
            "pages shared",
            "pages unshared",
            "COW copies",
            f"paper ({workload})",
        ],
        rows=[
            _row(mode, width, d, PAPER[workload][mode])
            for mode, by_width in data.items()
            for width, d in by_width.items()
        ],
        notes=_notes(data, beam_decay, PAPER[workload]),
        data=data,
    )


def _row(mode: str, width: int, d: dict[str, float], paper: tuple[float, float]) -> list[object]:
    saving = round(d["saving_pct"], 1)
    return [mode, width, saving, d["shared_pages"], d["unshared_pages"], d["cow_copies"], _range(paper)]


def _range(bounds: tuple[float, float]) -> str:
    return f"{bounds[0]:.1f}-{bounds[1]:.1f} %"


def _notes(
    data: dict[str, dict[int, dict[str, float]]], beam_decay: float, paper: dict[str, tuple[float, float]]
) -> list[str]:
    """The range of savings per mode next to the paper's, and what the beam savings rest on."""
    ps, bs = data["parallel sampling"], data["beam search"]
    return [
        f"parallel sampling saves {min(v['saving_pct'] for v in ps.values()):.1f}-"
        f"{max(v['saving_pct'] for v in ps.values()):.1f} % (paper {_range(paper['parallel sampling'])}); "
        f"beam search {min(v['saving_pct'] for v in bs.values()):.1f}-"
        f"{max(v['saving_pct'] for v in bs.values()):.1f} % (paper {_range(paper['beam search'])})",
        f"beam survivors' parents: rank r drawn with probability ~ {beam_decay}**r; "
        "beam-search savings depend on this model of how often beams share a parent, "
        "parallel-sampling savings on the (synthetic) prompt lengths",
    ]


def figure(report: Report):
    """Saving per width, one bar group per mode, each bar's value above it. Where the report's
    title names a workload the paper measured, a black line across a bar, its number right of
    the bar, gives the paper's saving at that width: its low end at width 2 and its high end at
    width 6 (`PAPER_WIDTHS`; it gives no number for 4). Every mark's number sits right of its
    own bar, in a gap kept free between the two bars of a group; a bar's value sits above both
    the bar and its line.
    Each mode's mark has its own style (`PAPER_DASHES`: solid, dotted), named in the
    legend below the axes, one entry a line (`fig.legends[0]`), where it covers no bar and no
    mark. At projector size the figure is at most 500 px tall."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    from pagedkv.viz.palette import BENCH_MODE_COLORS, BENCH_SERIES_COLOR

    fig = Figure(figsize=(6, 2.8), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    modes = list(report.data)
    widths = list(report.data[modes[0]])
    paper = next((v for w, v in PAPER.items() if f"{w}-like" in report.title), None)
    top = 0.0
    handles: list[Any] = []  # bars and the paper's marks, in legend order
    half = 0.12  # half a bar's width
    for i, mode in enumerate(modes):
        color = BENCH_MODE_COLORS.get(mode, BENCH_SERIES_COLOR)  # one colour a mode, in every figure
        # the first mode's bar left of the group's centre, the second right, with a gap
        # between them for the first bar's mark and number
        x = np.arange(len(widths)) + (-0.3 if i == 0 else 0.2)
        values = [report.data[mode][w]["saving_pct"] for w in widths]
        handles.append(ax.bar(x, values, width=2 * half, color=color, label=f"{mode}, here"))
        marks = dict(zip(PAPER_WIDTHS, paper[mode])) if paper is not None and mode in paper else {}
        for xi, w, v in zip(x, widths, values, strict=True):
            # above the bar and its paper line, by a gap in points that clears the line at any size
            ax.annotate(f"{v:.1f}", (xi, max(v, marks.get(w, v))), ha="center", fontsize=8, **ABOVE)
            if w in marks:  # a line across its bar, then its number right of the bar
                edge = xi + half + 0.03
                ax.plot([xi - half - 0.03, edge], [marks[w]] * 2, zorder=3, **PAPER_DASHES[mode])
                ax.text(edge + 0.01, marks[w], f"{marks[w]:.1f}", fontsize=8, va="center", style="italic")
        top = max(top, *values, *marks.values())
        if marks:
            letter = "n" if mode == "parallel sampling" else "k"  # each mark carries its number
            label = f"{mode}, paper's text range, placed at {letter} = 2 and 6"  # none at 4
            handles.append(Line2D([], [], label=label, **PAPER_DASHES[mode]))
    ax.set_xticks(np.arange(len(widths)), [f"n = k = {w}" for w in widths])
    ax.set_xlim(-0.55, len(widths) - 0.35)  # room for the last marks and their numbers
    ax.set_ylim(0, top * 1.25)  # room above the tallest bar's label
    ax.set_ylabel("KV memory saved (%)")
    ax.set_title("Memory saved by sharing pages between forked sequences")
    # below the axes, one entry a line: each label names the mode and where its mark sits
    fig.legend(handles=handles, loc="outside lower center", ncols=1, fontsize=8, handlelength=3)
    return fig
