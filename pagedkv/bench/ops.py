"""bench ops: block-table bookkeeping throughput on the standard trace.

The trace: 2,000 requests x 512 prompt tokens, page size 16, every other request starting
with one shared 256-token prefix, a pool of 8,192 pages; requests are admitted in waves of
64 and then the wave is freed. Only bookkeeping runs (no attention): `add` (hash, prefix
lookup, allocate, evict) and `free`. The rate is block-table entries (pages placed in a
block table, hit or allocated) per second in three modes measured in the same run: prefix
caching on with sha256 block hashes (vLLM's default `prefix_caching_hash_algo`), on with
xxhash (XXH3-128), and off (no hashing, no lookup, no eviction).
"""

from __future__ import annotations

import argparse

import numpy as np
from tqdm import tqdm

from pagedkv.bench import Report, best_time
from pagedkv.core.config import CacheConfig
from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.labs.workloads import ops_trace

HELP = "bookkeeping throughput (block-table entries/s) on the standard add/free trace"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--prompt-len", type=int, default=512)
    parser.add_argument("--shared-len", type=int, default=256, help="shared prefix length")
    parser.add_argument("--page-size", type=int, default=16)
    parser.add_argument("--num-pages", type=int, default=8192)
    parser.add_argument("--wave", type=int, default=64, help="requests admitted before freeing")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")


def replay(prompts: list[np.ndarray], seqs: SequenceManager, wave: int) -> None:
    """Admit the prompts in waves, freeing each wave before the next."""
    for start in range(0, len(prompts), wave):
        ids = range(start, min(start + wave, len(prompts)))
        for i in ids:
            seqs.add(i, prompts[i])
        for i in ids:
            seqs.free(i)


def measure(prompts: list[np.ndarray], config: CacheConfig, wave: int, repeat: int) -> dict:
    """The best of `repeat` replays, each on a fresh pool; the hits and evictions of one more."""
    managers = [SequenceManager(KVCachePool(config)) for _ in range(repeat)]

    def replay_once(ms: list[SequenceManager] = managers) -> None:  # a fresh manager per run
        replay(prompts, ms.pop(), wave)

    seconds = best_time(replay_once, repeat)
    pool = KVCachePool(config)
    seqs = SequenceManager(pool)
    replay(prompts, seqs, wave)
    seqs.check_invariants()
    stats = pool.stats
    return {
        "seconds": seconds,
        "prefix_hit_blocks": stats.prefix_hits // config.page_size,
        "evictions": stats.evictions,
        "allocations": stats.allocations,
    }


def run(
    *,
    quick: bool = False,
    seed: int = 0,
    requests: int = 2000,
    prompt_len: int = 512,
    shared_len: int = 256,
    page_size: int = 16,
    num_pages: int = 8192,
    wave: int = 64,
    repeat: int = 3,
) -> Report:
    if quick:
        requests, num_pages, repeat = 200, 2048, 1
    prompts = ops_trace(requests, prompt_len, shared_len, seed)
    entries = sum(-(-len(p) // page_size) for p in prompts)
    rows, data = [], {}
    modes = {  # JSON key -> (label, CacheConfig options)
        "hashing": ("prefix caching on (sha256)", dict(enable_prefix_caching=True)),
        "hashing_xxhash": ("prefix caching on (xxhash)", dict(prefix_caching_hash_algo="xxhash")),
        "no_hashing": ("prefix caching off", dict(enable_prefix_caching=False)),
    }
    for key, (label, options) in tqdm(modes.items(), desc="ops", disable=None):
        config = CacheConfig.bookkeeping(num_pages, page_size, **options)
        data[key] = measure(prompts, config, wave, repeat)
        data[key]["entries_per_s"] = entries / data[key]["seconds"]
        d = data[key]
        rows.append(
            [label, entries, d["seconds"], d["entries_per_s"], d["prefix_hit_blocks"], d["evictions"]]
        )
    ratio = data["no_hashing"]["entries_per_s"] / data["hashing"]["entries_per_s"]
    xx_ratio = data["no_hashing"]["entries_per_s"] / data["hashing_xxhash"]["entries_per_s"]
    return Report(
        plotter=figure,
        title=(
            f"bench ops: {requests} requests x {prompt_len} tokens, "
            f"page {page_size}, "
            f"{num_pages} pages, shared prefix {shared_len} on every other request, "
            f"waves of {wave} (best of {repeat})"
        ),
        columns=["mode", "entries", "seconds", "entries/s", "prefix hit blocks", "evictions"],
        rows=rows,
        notes=[
            f"prefix caching costs {ratio:.2f}x with sha256, {xx_ratio:.2f}x with xxhash "
            "(hashing, lookup and eviction against none of them)",
        ],
        data=data,
    )


def figure(report: Report):
    """Entries per second with and without prefix caching."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 3))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    labels = ["caching on\n(sha256)", "caching on\n(xxhash)", "caching off"]
    rates = [report.data[k]["entries_per_s"] for k in ("hashing", "hashing_xxhash", "no_hashing")]
    ax.bar(labels, rates, color=["#0072B2", "#56B4E9", "#E69F00"])
    ax.set_ylabel("block-table entries / s")
    ax.set_title("Bookkeeping throughput (add + free)")
    fig.tight_layout()
    return fig
