"""bench preempt: recompute vs swap when the pool runs out, with real generation.

TinyLM generates ShareGPT-like requests (byte tokens) through the `Scheduler` three times:
once in a pool large enough that nothing is ever preempted (the reference), then in a small
pool with recompute preemption and with swap preemption. Reported per run: preemptions, the
tokens computed a second time (recompute), the K/V bytes copied to and from the host-side
swap space (swap), steps, tokens computed — and whether every request's tokens equal the
reference run's (they must: preemption may not change what is generated). Wall times go to
a note: they are noisy, everything in the table is deterministic. `compare` runs the same
three on any requests (notebook 05 uses it on its four).

What the trade costs on a GPU: recompute spends FLOPs on prompt + generated tokens again
(one large prefill, cheap per token); swap moves K/V over PCIe, bytes ∝ pages. The vLLM
paper (Sec. 7.3) finds swap better for large blocks and the two comparable at block sizes
16-64, and vLLM v1 keeps only recompute. TinyLM's K/V are 256 bytes per token; a 13B model's
are about 800 KB, so multiply the bytes by ~3,200 for that scale.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from tqdm import tqdm

from pagedkv.bench import Report
from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.engine.scheduler import Scheduler
from pagedkv.labs.workloads import Request, generate, token_budget
from pagedkv.model.tinylm import TinyLM

HELP = "recompute vs swap preemption under memory pressure (TinyLM generation)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--workload", default="sharegpt", choices=["sharegpt", "alpaca"])
    parser.add_argument("--num-pages", type=int, default=192, help="the small pool")
    parser.add_argument("--page-size", type=int, default=16)
    parser.add_argument("--max-num-seqs", type=int, default=16)
    parser.add_argument("--swap-space-pages", type=int, default=1024)


def serve(
    model: TinyLM,
    requests: list[Request],
    num_pages: int,
    mode: str,
    *,
    page_size: int,
    max_num_seqs: int,
    max_num_batched_tokens: int,
    swap_space_pages: int,
) -> dict:
    """Run `requests` to the end through one Scheduler; its stats, outputs, wall time and
    the most and mean requests in one step's batch."""
    pool = KVCachePool(model.cache_config(num_pages, page_size))
    sched = Scheduler(
        SequenceManager(pool),
        model,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        preemption_mode=mode,
        swap_space_pages=swap_space_pages if mode == "swap" else 0,
    )
    sched.add_requests(requests)
    batches: list[int] = []  # requests in each step's batch
    start = time.perf_counter()
    outputs = sched.run(on_step=lambda r: batches.append(len({*r.decode, *(i for i, _ in r.prefill)})))
    seconds = time.perf_counter() - start
    sched.manager.check_invariants()
    return {
        "outputs": outputs,
        "seconds": seconds,
        "num_pages": num_pages,
        "bytes_per_token": pool.config.bytes_per_token,
        **sched.stats.as_dict(),
        "evictions": pool.stats.evictions,
        "prefix_hits": pool.stats.prefix_hits,
        "most_running": max(batches, default=0),
        "mean_running": sum(batches) / max(len(batches), 1),
    }


def compare(
    model: TinyLM,
    requests: list[Request],
    *,
    num_pages: int,
    page_size: int = 16,
    max_num_seqs: int = 16,
    max_num_batched_tokens: int | None = None,
    swap_space_pages: int = 1024,
) -> Report:
    """Serve the requests three times: in a pool roomy enough that nothing is preempted (the
    reference), then in `num_pages` pages with recompute and with swap preemption."""
    if max_num_batched_tokens is None:
        max_num_batched_tokens = token_budget(requests)
    roomy = sum(-(-r.final_len // page_size) for r in requests)
    runs = [
        ("no pressure", roomy, "recompute"),
        ("recompute", num_pages, "recompute"),
        ("swap", num_pages, "swap"),
    ]
    options = {
        "page_size": page_size,
        "max_num_seqs": max_num_seqs,
        "max_num_batched_tokens": max_num_batched_tokens,
        "swap_space_pages": swap_space_pages,
    }
    data = {
        label: serve(model, requests, pages, mode, **options)
        for label, pages, mode in tqdm(runs, desc="preempt", disable=None)
    }
    reference = data["no pressure"]["outputs"]
    for r in data.values():
        r["identical_to_reference"] = r.pop("outputs") == reference
    return Report(
        plotter=figure,
        title=(
            f"bench preempt: TinyLM, {len(requests)} requests, page {page_size}, "
            f"max_num_seqs {max_num_seqs}, {data['recompute']['bytes_per_token']} bytes of K/V per token"
        ),
        columns=[
            "run",
            "pages",
            "preemptions",
            "recomputed tokens",
            "swap-out bytes",
            "swap-in bytes",
            "tokens computed",
            "steps",
            "same tokens",
        ],
        rows=[_row(label, r) for label, r in data.items()],
        notes=_notes(data),
        data=data,
    )


def _row(label: str, r: dict) -> list[object]:
    return [
        label,
        r["num_pages"],
        r["preemptions"],
        r["recomputed_tokens"],
        r["swap_out_bytes"],
        r["swap_in_bytes"],
        r["prefill_tokens"] + r["decode_tokens"],
        r["steps"],
        "yes" if r["identical_to_reference"] else "NO",
    ]


def _notes(data: dict[str, dict]) -> list[str]:
    rc, sw = data["recompute"], data["swap"]
    return [
        f"recompute: {rc['preemptions']} preemptions recompute {rc['recomputed_tokens']:,} "
        f"tokens; swap: {sw['preemptions']} preemptions copy "
        f"{sw['swap_out_bytes'] + sw['swap_in_bytes']:,} bytes "
        f"(x ~3,200 for a 13B model's K/V)",
        "swap-in copies back only the pages the prefix cache did not cover on re-admission",
        "wall time (noisy): " + ", ".join(f"{k} {v['seconds']:.2f} s" for k, v in data.items()),
    ]


def run(
    *,
    quick: bool = False,
    seed: int = 0,
    requests: int = 24,
    workload: str = "sharegpt",
    num_pages: int = 192,
    page_size: int = 16,
    max_num_seqs: int = 16,
    swap_space_pages: int = 1024,
) -> Report:
    if quick:
        requests, workload, num_pages = 10, "alpaca", 12
    trace = generate(workload, requests, seed, vocab_size=256)
    report = compare(
        TinyLM(seed=seed),
        trace,
        num_pages=num_pages,
        page_size=page_size,
        max_num_seqs=max_num_seqs,
        swap_space_pages=swap_space_pages,
    )
    report.title = report.title.replace(f"{len(trace)} requests", f"{len(trace)} {workload}-like requests")
    return report


def figure(report: Report):
    """Tokens computed (recomputed ones on top) and K/V bytes copied out and back, per run."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import StrMethodFormatter

    fig = Figure(figsize=(8, 2.6))  # projector() widens it to ~1210 x 395 px: one screen
    FigureCanvasAgg(fig)
    runs = list(report.data)
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    computed = [report.data[r]["prefill_tokens"] + report.data[r]["decode_tokens"] for r in runs]
    again = [report.data[r]["recomputed_tokens"] for r in runs]
    once = [c - a for c, a in zip(computed, again, strict=True)]
    # the axis starts at 0, so the recomputed strip is as tall as its share of the tokens (an
    # axis from 500 made 41 of 588 look large); its label above the bar gives the count
    left.bar(runs, once, color="#0072B2", label="computed once")
    left.bar(runs, again, bottom=once, color="#D55E00", label="recomputed")
    for i, (top, extra, base) in enumerate(zip(computed, again, once, strict=True)):
        left.text(i, base, f"{base:,}", ha="center", va="top", fontsize=9, color="white")
        if extra:  # the bar's recomputed count and its total sit above it
            left.annotate(f"+{extra} recomputed\n= {top:,} in all", (i, top), xytext=(0, 3),
                          textcoords="offset points", ha="center", va="bottom", fontsize=9,
                          color="#A04000")  # fmt: skip
    left.set_title("tokens computed", fontsize=10)
    left.set_ylim(0, 1.7 * max(computed))  # headroom for the legend and the labels
    left.legend(fontsize=8, loc="upper left", ncols=2)  # one row, above the label of the middle bar
    out = [report.data[r]["swap_out_bytes"] for r in runs]
    back = [report.data[r]["swap_in_bytes"] for r in runs]
    # side by side, each bar labelled with its value: stacked, the top would read as a total
    # each label on the outer side of its own bar, so it never touches the other one
    x, w = np.arange(len(runs)), 0.3
    for side, values, color, label in (
        # neither orange nor blue: those mean recomputed and computed once on the left
        (-1, out, "#009E73", "swap-out (pool to swap space)"),
        (1, back, "#CC79A7", "swap-in (back to the pool)"),
    ):
        right.bar(x + side * w / 2, values, w, color=color, label=label)
        for xi, v in zip(x, values, strict=True):
            if v:
                edge = xi + side * (w + 0.03)
                right.text(edge, v, f"{v:,}", ha="right" if side < 0 else "left", va="top", fontsize=8)
    for xi, copied in zip(x, np.add(out, back), strict=True):
        if not copied:  # a run that copied nothing: its bars are zero, not missing
            right.text(float(xi), 0, "0", ha="center", va="bottom", fontsize=9)
    right.set_xticks(x, runs)
    # room past the outer bars for their labels: each label stays inside the axes
    right.set_xlim(x[0] - 0.9, x[-1] + 0.9)
    right.set_title("K/V copied (bytes)", fontsize=10)
    right.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    right.set_ylim(0, 1.6 * max(*out, *back, 1))  # headroom: the legend sits above the bars
    right.legend(fontsize=8, loc="upper left")
    fig.suptitle("Preemption: recompute vs swap")
    fig.tight_layout()
    return fig
