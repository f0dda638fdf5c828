"""bench scale: does a simulation's cost grow linearly with its requests, and what does the
bookkeeping cost in memory next to the K/V it describes?

Simulations. For each size (default 1,000, 10,000 and 100,000 ShareGPT-like requests) a
fresh pool and Scheduler run every request to the end in bookkeeping-only mode (the
`ScriptedRunner`: no attention): admission with prefix lookup and block hashes, a slot per
token, a page and a hash per `page_size` tokens, preemption, eviction, finish, exactly as
with a model. The default pool is the KV space `costs.capacity` gives LLaMA-7B on one 80 GB
A100 at `gpu_memory_utilization` 0.9: 7,328 pages of 16 tokens (117,248 slots). The time
covers `add_requests` and every step, not generating the workload. Tokens are those the
scheduler computed: prompt + generated tokens (each prompt token, and each generated token but
the last, gets K/V once), plus the tokens a preemption by recompute computes again. Targets:
time per request and per token flat within 1.5x from the smallest size to the largest, both in
CPU seconds (`time.process_time`, less disturbed than wall time by other load on a shared
machine); 10,000 requests <= 10 s (wall).

Metadata. A bookkeeping pool of 1,048,576 pages and a SequenceManager are built under
`tracemalloc`; the K/V store is allocated before tracing starts, so only metadata counts.
Per page: the traced bytes of the empty pool and manager (every Python object and array
the pool keeps per page: page records, free queue, eviction order, prefix index) over its
pages. Per sequence: the traced bytes that admitting 256 sequences of 512 tokens adds (the
Sequence, its block table and token ids, its pages' token ids, block hashes and prefix
index entries) over 256; the prompts exist before tracing. Next to it: the K/V one page
holds for LLaMA-7B in fp16 (`costs.bytes_per_token`: 512 KiB per token).

Leaves out: attention and sampling (see `bench attention`), wall-clock arrivals, and the
memory of the scheduler's own request records (prompt and output of every request).
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc

import numpy as np
from tqdm import tqdm

from pagedkv.bench import Report
from pagedkv.core.config import CacheConfig
from pagedkv.core.plumbing.validation import check_int
from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.engine.scheduler import Scheduler
from pagedkv.labs.costs import bytes_per_token, capacity
from pagedkv.labs.specs import ModelSpec
from pagedkv.labs.workloads import sharegpt_like

HELP = "1k / 10k / 100k ShareGPT-like requests through the bookkeeping-only scheduler; metadata bytes"
SIZES = (1_000, 10_000, 100_000)
TARGET_RATIO = 1.5  # per-request and per-token time, largest size / smallest
TARGET_SECONDS = 10.0  # for 10,000 requests
METADATA_PAGES = 1 << 20
COLUMNS = [
    "requests",
    "steps",
    "tokens",
    "preemptions",
    "evictions",
    "seconds",
    "CPU s",
    "CPU ms/request",
    "CPU us/token",
]
METADATA_SEQS, METADATA_TOKENS = 256, 512
# huggyllama/llama-7b config.json: 32 layers, 32 heads (no GQA), hidden 4096, MLP 11008, vocab 32000, float16.
LLAMA_7B = ModelSpec("LLaMA-7B", 32, 32, 128, 32, 6.7e9, "float16", 2048, 4096, 11008, 32000, True)
NUM_PAGES = int(capacity(LLAMA_7B, "A100-80GB", 2048)["num_pages"])  # 7,328: its KV space, in pages of 16


def _sizes(text: str) -> tuple[int, ...]:
    """Example: "1000,10000" -> (1000, 10000)."""
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--sizes must be ints separated by commas, got {text!r}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", type=_sizes, default=SIZES, help="requests per run, e.g. 1000,10000")
    parser.add_argument(
        "--num-pages", type=int, default=NUM_PAGES, help="default: LLaMA-7B's KV on an A100-80GB"
    )
    parser.add_argument("--page-size", type=int, default=16)
    parser.add_argument("--max-num-seqs", type=int, default=256)
    parser.add_argument("--max-num-batched-tokens", type=int, default=4096)
    parser.add_argument("--metadata-pages", type=int, default=METADATA_PAGES, help="metadata pool size")


def run(
    *,
    quick: bool = False,
    seed: int = 0,
    sizes: tuple[int, ...] = SIZES,
    num_pages: int = NUM_PAGES,
    page_size: int = 16,
    max_num_seqs: int = 256,
    max_num_batched_tokens: int = 4096,
    metadata_pages: int = METADATA_PAGES,
) -> Report:
    if quick:
        sizes, num_pages, metadata_pages = (100, 300), 1024, 16_384
    if not sizes:
        raise ValueError("sizes must name at least one number of requests")
    sizes = tuple(check_int("sizes", n, 1, 10_000_000) for n in sizes)
    held = METADATA_SEQS * -(-METADATA_TOKENS // check_int("page_size", page_size, 1, 1 << 16))
    check_int("metadata_pages", metadata_pages, held, 1 << 24)  # room for the live sequences
    runs = [simulate(n, seed, num_pages, page_size, max_num_seqs, max_num_batched_tokens) for n in sizes]
    metadata = metadata_bytes(metadata_pages, page_size)
    title = (
        f"bench scale: ShareGPT-like requests through the Scheduler, {num_pages:,} pages of "
        f"{page_size}, max_num_seqs {max_num_seqs}, budget {max_num_batched_tokens} tokens/step, "
        "bookkeeping only"
    )
    return Report(
        plotter=figure,
        title=title,
        columns=COLUMNS,
        rows=[
            [
                r["requests"],
                r["steps"],
                r["tokens"],
                r["preemptions"],
                r["pool"]["evictions"],
                r["seconds"],
                r["cpu_seconds"],
                1e3 * r["seconds_per_request"],
                1e6 * r["seconds_per_token"],
            ]
            for r in runs
        ],  # fmt: skip
        notes=_time_notes(runs, quick) + _metadata_notes(metadata),
        # The largest run's numbers at the top level (what the figure draws), every run in "runs".
        data={**runs[-1], "runs": runs, "metadata": metadata, "num_pages": num_pages},
    )


def simulate(
    requests: int, seed: int, num_pages: int, page_size: int, max_num_seqs: int, max_num_batched_tokens: int
) -> dict:
    """Run `requests` ShareGPT-like requests to the end; their counts and the seconds taken."""
    trace = sharegpt_like(requests, seed)
    pool = KVCachePool(CacheConfig.bookkeeping(num_pages, page_size))
    sched = Scheduler(
        SequenceManager(pool), max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens
    )
    running, active, waiting = [], [], []  # per step: running sequences, ACTIVE pages, queue
    gc.collect()  # garbage of an earlier run is not this run's cost
    start, cpu = time.perf_counter(), time.process_time()
    sched.add_requests(trace)
    with tqdm(total=requests, desc=f"scale {requests:,}", unit="req", disable=None) as bar:
        while sched.has_unfinished:
            bar.update(len(sched.step().finished))
            running.append(len(sched.running))
            active.append(pool.num_active_pages)
            waiting.append(len(sched.waiting))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    sched.manager.check_invariants()
    st = sched.stats
    tokens = st.prefill_tokens + st.decode_tokens
    return {
        "requests": requests,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "tokens": tokens,
        "prompt_tokens": sum(r.prompt_len for r in trace),  # of the trace, each once
        "seconds_per_request": cpu / requests,
        "seconds_per_token": cpu / tokens,
        **st.as_dict(),
        "pool": pool.stats.as_dict(),
        "running": running,
        "active_pages": active,
        "waiting": waiting,
    }


def queue_empty_step(waiting: list[int]) -> int:
    """The first step from which no request waits any more (the queue stays empty to the end).
    Example: queue_empty_step([3, 0, 1, 0, 0]) -> 3."""
    step = len(waiting)
    while step > 0 and waiting[step - 1] == 0:
        step -= 1
    return step


def last_few(data: dict, low: int, high: int) -> dict:
    """The steps after the queue empties in which `low` to `high` sequences run: the first and
    last such step, and the mean running sequences and ACTIVE pages over those steps."""
    start = queue_empty_step(data["waiting"])
    steps = [i for i in range(start, len(data["running"])) if low <= data["running"][i] <= high]
    if not steps:
        raise ValueError(f"no step after the queue empties runs {low} to {high} sequences")
    return {
        "first": steps[0],
        "last": steps[-1],
        "running": float(np.mean([data["running"][i] for i in steps])),
        "active_pages": float(np.mean([data["active_pages"][i] for i in steps])),
    }


def window(data: dict, first: int, last: int) -> dict:
    """Over steps `first` to `last` - 1: the mean running sequences, the mean ACTIVE pages per
    running sequence, and the most requests waiting (a preempted one goes back to the queue)
    with the first step that many wait."""
    running = float(np.mean(data["running"][first:last]))
    waiting = data["waiting"][first:last]
    return {
        "running": running,
        "pages_each": float(np.mean(data["active_pages"][first:last])) / running,
        "most_waiting": max(waiting),
        "most_waiting_step": first + waiting.index(max(waiting)),
    }


def metadata_bytes(num_pages: int, page_size: int, seed: int = 0) -> dict:
    """Traced bytes of a bookkeeping pool's metadata per page, and of a live sequence."""
    config = CacheConfig.bookkeeping(num_pages, page_size)
    kv_cache = np.zeros(config.kv_shape, dtype=config.dtype)  # before tracing: not counted
    rng = np.random.default_rng([seed, 3])
    prompts = rng.integers(0, 32_000, size=(METADATA_SEQS, METADATA_TOKENS)).tolist()
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        pool = KVCachePool(config, kv_cache)
        seqs = SequenceManager(pool)
        empty = tracemalloc.get_traced_memory()[0] - base
        for i, prompt in enumerate(prompts):
            seqs.add(i, prompt)
        live = tracemalloc.get_traced_memory()[0] - base - empty
    finally:
        tracemalloc.stop()
    pages_per_seq = -(-METADATA_TOKENS // page_size)
    kv_page = bytes_per_token(LLAMA_7B) * page_size
    return {
        "num_pages": num_pages,
        "bytes_per_page": empty / num_pages,
        "num_sequences": METADATA_SEQS,
        "tokens_per_sequence": METADATA_TOKENS,
        "bytes_per_sequence": live / METADATA_SEQS,
        "bytes_per_held_page": live / (METADATA_SEQS * pages_per_seq),
        "kv_model": LLAMA_7B.name,
        "kv_bytes_per_page": kv_page,
        "kv_bytes_of_pool": kv_page * num_pages,
    }


def _time_notes(runs: list[dict], quick: bool) -> list[str]:
    """How much time per request and per token vary over the sizes, and the 10k target."""

    def spread(key: str) -> float:
        values = [r[key] for r in runs]
        return max(values) / min(values)

    per_request, per_token = spread("seconds_per_request"), spread("seconds_per_token")
    verdict = "met" if max(per_request, per_token) <= TARGET_RATIO else "NOT met"
    sizes = ", ".join(f"{r['requests']:,}" for r in runs)
    notes = [
        f"time per request varies x{per_request:.2f}, per token x{per_token:.2f} (largest / smallest over "
        f"{sizes} requests; target <= {TARGET_RATIO}x: {verdict})"
    ]
    ten_k = [r for r in runs if r["requests"] == 10_000]
    if ten_k:
        seconds = ten_k[0]["seconds"]
        met = "met" if seconds <= TARGET_SECONDS else "NOT met"
        notes.append(f"10,000 requests in {seconds:.1f} s (target <= {TARGET_SECONDS:.0f} s: {met})")
    if quick:
        notes.append("(--quick: sizes too small for the targets, which apply to the full run)")
    return notes


def _metadata_notes(m: dict) -> list[str]:
    kv = m["kv_bytes_per_page"]
    return [
        f"metadata at {m['num_pages']:,} pages (tracemalloc, K/V store excluded): "
        f"{m['bytes_per_page']:,.0f} B per page (empty pool and manager)",
        f"  + {m['bytes_per_sequence']:,.0f} B per live sequence of {m['tokens_per_sequence']} tokens "
        f"({m['bytes_per_held_page']:,.0f} B per page it holds)",
        f"K/V of one page, {m['kv_model']} fp16: {kv / 2**20:,.0f} MiB; metadata / K/V: "
        f"{m['bytes_per_page'] / kv:.1e} empty, {(m['bytes_per_page'] + m['bytes_per_held_page']) / kv:.1e} "
        "held by a sequence",
    ]


SMOOTH_STEPS = 25  # the usage line is a running mean over this many steps


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Running mean of `values` over the last `window` steps (fewer at the start).
    Example: smooth([0, 2, 4], 2) -> [0, 1, 3]."""
    sums = np.cumsum(np.asarray(values, dtype=float))
    out = sums.copy()
    out[window:] = sums[window:] - sums[:-window]
    return out / np.minimum(np.arange(1, len(sums) + 1), window)


def figure(report: Report):
    """Running sequences and pool usage over the steps of the largest simulation."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from pagedkv.viz.palette import BENCH_ACTIVE_COLOR, BENCH_SERIES_COLOR

    data = report.data
    fig = Figure(figsize=(8, 3))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    running = data["running"]
    ax.plot(running, color=BENCH_SERIES_COLOR, lw=1.2)
    ax.set_xlabel("step")
    ax.set_ylabel("running sequences", color=BENCH_SERIES_COLOR)
    ax.set_ylim(0, 1.05 * max(running, default=1))  # both axes start at 0 on the same line
    usage = fig.add_subplot(sharex=ax, frameon=False)
    pct = np.array(data["active_pages"], dtype=float) * 100 / data["num_pages"]
    start = SMOOTH_STEPS - 1 if len(pct) >= SMOOTH_STEPS else 0  # from the first full window
    mean = smooth(pct, SMOOTH_STEPS)  # a running mean: no step flicker
    usage.plot(np.arange(start, len(pct)), mean[start:], color=BENCH_ACTIVE_COLOR, lw=2.2)
    usage.yaxis.tick_right()
    usage.yaxis.set_label_position("right")
    usage.set_ylabel("ACTIVE pages (%)", color=BENCH_ACTIVE_COLOR)
    usage.set_ylim(0, 105)
    empty = queue_empty_step(data.get("waiting", []))
    if data.get("waiting") and empty < len(running):
        ax.axvline(empty, color="black", ls="--", lw=1.2)
        ax.annotate(
            f"queue empty (step {empty:,})",
            xy=(empty, 0.08),
            xycoords=("data", "axes fraction"),
            xytext=(-6, 0),
            textcoords="offset points",
            ha="right",
            va="center",
            bbox={"facecolor": "white", "edgecolor": "none", "pad": 1},
        )
    ax.set_title(
        f"{data['requests']:,} ShareGPT-like requests (ACTIVE %: mean of the last {SMOOTH_STEPS} steps)"
    )
    fig.tight_layout()
    return fig
