"""bench preempt: recompute vs swap when the pool runs out, with real generation.

TinyLM generates ShareGPT-like requests (byte tokens) through the `Scheduler` three times:
once in a pool large enough that nothing is ever preempted (the reference), then in a small
pool with recompute preemption and with swap preemption. Reported per run: preemptions, the
tokens computed a second time (recompute), the K/V bytes copied to and from the host-side
swap area (swap), steps, tokens computed, wall time — and whether every request's tokens
equal the reference run's (they must: preemption may not change what is generated).

What the trade costs on a GPU: recompute spends FLOPs on prompt + generated tokens again
(one large prefill, cheap per token); swap moves K/V over PCIe, bytes ∝ pages. The vLLM
paper (Sec. 7.3) finds swap better for large blocks and the two comparable at block sizes
16-64, and vLLM v1 keeps only recompute. TinyLM's K/V are 256 bytes per token; a 13B model's
are about 800 KB, so multiply the bytes by ~3,200 for that scale.
"""

from __future__ import annotations

import argparse
import time

from tqdm import tqdm

from ..model import TinyLM
from ..pool import KVCachePool
from ..scheduler import Scheduler
from ..sequence import SequenceManager
from ..workloads import generate
from . import Report

HELP = "recompute vs swap preemption under memory pressure (TinyLM generation)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--workload", default="sharegpt", choices=["sharegpt", "alpaca"])
    parser.add_argument("--num-pages", type=int, default=192, help="the small pool")
    parser.add_argument("--page-size", type=int, default=16)
    parser.add_argument("--max-num-seqs", type=int, default=16)
    parser.add_argument("--swap-space-pages", type=int, default=1024)


def serve(model: TinyLM, requests, num_pages: int, args: argparse.Namespace, mode: str) -> dict:
    pool = KVCachePool(model.cache_config(num_pages, args.page_size))
    sched = Scheduler(
        SequenceManager(pool), model, max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=max(4096, max(r.final_len for r in requests)),
        preemption_mode=mode, swap_space_pages=args.swap_space_pages if mode == "swap" else 0,
    )
    sched.add_requests(requests)
    start = time.perf_counter()
    outputs = sched.run()
    seconds = time.perf_counter() - start
    pool.check_invariants()
    st = sched.stats
    return {
        "outputs": outputs, "seconds": seconds, "num_pages": num_pages,
        "bytes_per_token": pool.config.bytes_per_token, **st.as_dict(),
        "evictions": pool.stats.evictions, "prefix_hits": pool.stats.prefix_hits,
    }


def run(args: argparse.Namespace) -> Report:
    if args.quick:
        args.requests, args.workload, args.num_pages = 10, "alpaca", 12
    model = TinyLM(seed=args.seed)
    requests = generate(args.workload, args.requests, args.seed, vocab_size=256)
    roomy = sum(-(-r.final_len // args.page_size) for r in requests)
    runs = [("no pressure", roomy, "recompute"), ("recompute", args.num_pages, "recompute"),
            ("swap", args.num_pages, "swap")]
    results = {
        label: serve(model, requests, pages, args, mode)
        for label, pages, mode in tqdm(runs, desc="preempt", disable=None)
    }
    reference = results["no pressure"]["outputs"]
    rows, data = [], {}
    for label, r in results.items():
        same = r.pop("outputs") == reference
        r["identical_to_reference"] = same
        data[label] = r
        rows.append([
            label, r["num_pages"], r["preemptions"], r["recomputed_tokens"],
            r["swap_out_bytes"], r["swap_in_bytes"], r["prefill_tokens"] + r["decode_tokens"],
            r["steps"], r["seconds"], "yes" if same else "NO",
        ])
    rc, sw = data["recompute"], data["swap"]
    return Report(
        title=(
            f"bench preempt: TinyLM, {args.requests} {args.workload}-like requests, page "
            f"{args.page_size}, max_num_seqs {args.max_num_seqs}, "
            f"{rc['bytes_per_token']} bytes of K/V per token"
        ),
        columns=["run", "pages", "preemptions", "recomputed tokens", "swap out B", "swap in B",
                 "tokens computed", "steps", "seconds", "same tokens"],
        rows=rows,
        notes=[
            f"recompute: {rc['preemptions']} preemptions recompute {rc['recomputed_tokens']:,} "
            f"tokens; swap: {sw['preemptions']} preemptions copy "
            f"{(sw['swap_out_bytes'] + sw['swap_in_bytes']) / 2**20:.2f} MiB "
            f"(x ~3,200 for a 13B model's K/V)",
            "seconds are wall time (noisy); every other column is deterministic",
        ],
        data=data,
    )


def figure(report: Report):
    """Tokens computed (recomputed ones on top) and K/V bytes copied, per run."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3))
    FigureCanvasAgg(fig)
    runs = list(report.data)
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    computed = [report.data[r]["prefill_tokens"] + report.data[r]["decode_tokens"] for r in runs]
    again = [report.data[r]["recomputed_tokens"] for r in runs]
    left.bar(runs, [c - a for c, a in zip(computed, again, strict=True)], color="#0072B2",
             label="computed once")
    left.bar(runs, again, bottom=[c - a for c, a in zip(computed, again, strict=True)],
             color="#D55E00", label="recomputed")
    left.set_title("tokens computed", fontsize=10)
    left.legend(fontsize=8)
    out = [report.data[r]["swap_out_bytes"] / 2**20 for r in runs]
    back = [report.data[r]["swap_in_bytes"] / 2**20 for r in runs]
    right.bar(runs, out, color="#E69F00", label="to swap area")
    right.bar(runs, back, bottom=out, color="#56B4E9", label="back to the pool")
    right.set_title("K/V copied (MiB)", fontsize=10)
    right.legend(fontsize=8)
    fig.suptitle("Preemption: recompute vs swap")
    fig.tight_layout()
    return fig


def plot(report: Report, path: str) -> None:
    figure(report).savefig(path, dpi=100)
