"""bench scale: 10,000 ShareGPT-like requests through the Scheduler, bookkeeping only.

Every request is admitted (prefix lookup, block hashes, allocation, eviction), decoded one
token per step (a slot per token, a page per `page_size` tokens, a hash per filled page),
preempted when the pool runs out and finished, exactly as with a model, but without
attention. The default pool, 8,192 pages of 16 tokens (131,072 slots), is about the KV
space LLaMA-7B has on one 80 GB A100 (512 KB per token). Target: the whole simulation in
<= 30 s on this machine. The time excludes generating the workload.
"""

from __future__ import annotations

import argparse
import time

from tqdm import tqdm

from ..config import CacheConfig
from ..pool import KVCachePool
from ..scheduler import Scheduler
from ..sequence import SequenceManager
from ..workloads import sharegpt_like
from . import Report

HELP = "bookkeeping-only simulation of 10,000 ShareGPT-like requests (target <= 30 s)"
TARGET_SECONDS = 30.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--num-pages", type=int, default=8192)
    parser.add_argument("--page-size", type=int, default=16)
    parser.add_argument("--max-num-seqs", type=int, default=256)
    parser.add_argument("--max-num-batched-tokens", type=int, default=4096)


def run(
    *,
    quick: bool = False,
    seed: int = 0,
    requests: int = 10_000,
    num_pages: int = 8192,
    page_size: int = 16,
    max_num_seqs: int = 256,
    max_num_batched_tokens: int = 4096,
) -> Report:
    if quick:
        requests, num_pages = 300, 1024
    trace = sharegpt_like(requests, seed)
    config = CacheConfig.bookkeeping(num_pages, page_size)
    pool = KVCachePool(config)
    sched = Scheduler(
        SequenceManager(pool),
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
    )
    sched.add_requests(trace)
    running, active = [], []  # per step: running sequences, ACTIVE pages
    start = time.perf_counter()
    with tqdm(total=len(trace), desc="scale", unit="req", disable=None) as bar:
        while sched.has_unfinished:
            bar.update(len(sched.step().finished))
            running.append(len(sched.running))
            active.append(pool.num_active_pages)
    seconds = time.perf_counter() - start
    pool.check_invariants()
    st, ps = sched.stats, pool.stats
    tokens = st.prefill_tokens + st.decode_tokens
    verdict = "met" if seconds <= TARGET_SECONDS else "NOT met"
    if quick:
        verdict = "applies to the full run, not --quick"
    return Report(
        plotter=figure,
        title=(
            f"bench scale: {requests:,} ShareGPT-like requests, {num_pages:,} pages of "
            f"{page_size}, max_num_seqs {max_num_seqs}, budget "
            f"{max_num_batched_tokens} tokens/step, bookkeeping only"
        ),
        columns=[
            "requests",
            "steps",
            "prefill tokens",
            "decode tokens",
            "preemptions",
            "evictions",
            "prefix hit %",
            "seconds",
            "tokens/s",
        ],
        rows=[
            [
                requests,
                st.steps,
                st.prefill_tokens,
                st.decode_tokens,
                st.preemptions,
                ps.evictions,
                round(100 * ps.hit_rate, 1),
                seconds,
                tokens / seconds,
            ]
        ],
        notes=[f"target <= {TARGET_SECONDS:.0f} s for 10,000 requests: {verdict}"],
        data={
            "seconds": seconds,
            "tokens_per_s": tokens / seconds,
            **st.as_dict(),
            "pool": ps.as_dict(),
            "target_seconds": TARGET_SECONDS,
            "num_pages": num_pages,
            "running": running,
            "active_pages": active,
        },
    )


def figure(report: Report):
    """Running sequences and pool usage over the simulation's steps."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    data = report.data
    fig = Figure(figsize=(8, 3))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.plot(data["running"], color="#0072B2", lw=0.8, label="running sequences")
    ax.set_xlabel("step")
    ax.set_ylabel("running sequences", color="#0072B2")
    usage = fig.add_subplot(sharex=ax, frameon=False)
    usage.plot([100 * a / data["num_pages"] for a in data["active_pages"]], color="#E69F00", lw=0.8)
    usage.yaxis.tick_right()
    usage.yaxis.set_label_position("right")
    usage.set_ylabel("ACTIVE pages (%)", color="#E69F00")
    usage.set_ylim(0, 105)
    ax.set_title(report.title.split(",")[0])
    fig.tight_layout()
    return fig
