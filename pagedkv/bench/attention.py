"""bench attention: paged decode attention vs the fastest dense numpy attention.

One decode step: B sequences of L tokens each, one query per sequence, H query heads over
Hkv K/V heads. The paged side is `TiledAttentionEngine.paged_attention_batch` reading K/V
through block tables handed over as one [B, pages] array as engines keep them; `--layout`
says where their pages sit: `scattered` (the default, the layout the targets are judged on)
is a random permutation of the pool, as after many allocations and frees; `runs` gives each
sequence one run of consecutive page ids, as a fresh pool hands out a prompt's pages, which
the kernel may read in place. The dense side gets the same K/V laid out contiguously as
[B, Hkv, L, D] and is the fastest of the four programs of `pagedkv.model.dense_decode` (`dense`,
`dense_chunked`, `dense_tall`, `dense_two_pass`). All run interleaved in one process, best of
`--repeat`; the ratio is paged / dense time. This project's targets (slack above the paper's
range): geometric mean <= 1.3x, no point above 1.6x. vLLM's paper (Sec. 7.1) reports its GPU
kernel 20-26 % slower than FasterTransformer's contiguous one; the figure draws that band.

`--cache` says what each timed run finds in the CPU caches: `shared` (the default) runs the
programs one after another, so the dense programs, which read the same K/V, warm it for each
other; `warm` runs each program twice and times the second run; `cold` rewrites a 256 MiB
array before every timed run, as a model's other layers would push a layer's K/V out of
cache between two decode steps.

How close to the memory limit: the run first measures this machine's memory bandwidth as
bytes read plus bytes written per second by `np.copyto` of a 256 MiB float32 array (best of
5), then reports per point the paged kernel's K/V bytes per second (the K and V bytes of
the contexts the queries read, divided by the paged time) as a share of it. Small points
run from the CPU cache, so the share can pass 1. The `gather ms` column times copying just
the pages the kernel copies (`np.take`, tile by tile), the work paging adds in numpy: a GPU
kernel reads pages in place, numpy copies them before a matmul can read them.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]  # ships no stubs or py.typed
from tqdm import tqdm

from pagedkv.bench import Report
from pagedkv.core.config import CacheConfig
from pagedkv.core.plumbing.validation import check_choice
from pagedkv.core.pool import KVCachePool
from pagedkv.core.slot_mapping import slot_mapping
from pagedkv.labs.attention_figure import PAPER_RATIOS, figure
from pagedkv.model.attention_tiled import CHUNK_BYTES, IN_PLACE_BYTES, TiledAttentionEngine, is_run
from pagedkv.model.dense_decode import (
    dense_decode,
    dense_decode_chunked,
    dense_decode_tall,
    dense_decode_two_pass,
)

HELP = "paged vs dense decode attention (numpy): time ratio per batch and context size"
TARGET, WORST = 1.3, 1.6  # this project's targets: geometric mean, and any one point
BANDWIDTH_MIB = 256  # size of the array np.copyto copies to measure memory bandwidth
FLUSH_MIB = 256  # --cache cold: bytes rewritten before each timed run (more than the caches hold)
FLUSH_BYTES = FLUSH_MIB << 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch", default="1,4,16,32", help="comma-separated batch sizes")
    parser.add_argument("--context", default="512,2048,4096", help="comma-separated lengths")
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--kv-heads", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--page-size", type=int, default=16)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--layout", default="scattered", choices=sorted(LAYOUTS), help="where pages sit")
    parser.add_argument("--cache", default="shared", choices=sorted(CACHE_STATES), help="CPU cache state")
    parser.add_argument("--repeat", type=int, default=15, help="best of this many runs")
    parser.add_argument("--blas-threads", type=int, default=1, help="BLAS threads (0 = library default)")


def memory_bandwidth(mib: int = BANDWIDTH_MIB, repeat: int = 5) -> float:
    """Bytes read plus bytes written per second by np.copyto of a `mib` MiB float32 array
    into another (both touched first, so no page faults are timed), best of `repeat`."""
    source = np.ones(mib << 18, np.float32)
    target = np.zeros_like(source)
    target.fill(0.0)  # fault its pages in now
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        np.copyto(target, source)
        best = min(best, time.perf_counter() - start)
    return 2 * source.nbytes / best


@dataclass(frozen=True)
class Shape:
    """The attention problem every point of the benchmark times."""

    heads: int
    kv_heads: int
    head_dim: int
    page_size: int
    dtype: str
    repeat: int  # best of this many runs
    layout: str = "scattered"  # how the pool's pages are handed to sequences (LAYOUTS)
    cache: str = "shared"  # what each timed run finds in the CPU caches (CACHE_STATES)


CACHE_STATES = {
    "shared": "programs run one after another, each finding what the previous ones left in cache",
    "warm": "each program runs twice in a row, the second run timed: it finds its own K/V in cache",
    "cold": f"a {FLUSH_MIB} MiB array is rewritten before each timed run: no program finds its K/V "
    "in cache, as in a model whose other layers' K/V pass through the cache between two steps",
}
LAYOUTS = {
    "scattered": "each block table a random sample of the pool's pages, as after many allocations and frees",
    "runs": "each block table one run of consecutive page ids (sequences in random order), as a "
    "fresh pool's free queue hands out a prompt's pages",
}


def block_tables(layout: str, batch: int, pages_per_seq: int, rng: np.random.Generator) -> np.ndarray:
    """[B, pages_per_seq] page ids of a pool of B * pages_per_seq pages laid out as `layout`.
    Example: runs, 2 x 3 -> [[3, 4, 5], [0, 1, 2]] (or the rows the other way round)."""
    if layout == "scattered":
        return rng.permutation(batch * pages_per_seq).reshape(batch, pages_per_seq)
    if layout == "runs":
        return rng.permutation(batch)[:, None] * pages_per_seq + np.arange(pages_per_seq)
    raise ValueError(f"layout must be one of {sorted(LAYOUTS)}, got {layout!r}")


def problem_arrays(batch: int, context: int, problem: Shape, rng: np.random.Generator):
    """A pool holding B contexts in scattered pages, its engine and block tables, the same
    K/V laid out dense as [B, Hkv, L, D], and the queries [B, H, D]."""
    pages_per_seq = -(-context // problem.page_size)
    config = CacheConfig(
        num_pages=batch * pages_per_seq,
        page_size=problem.page_size,
        num_layers=1,
        num_kv_heads=problem.kv_heads,
        head_dim=problem.head_dim,
        dtype=problem.dtype,
    )
    engine = TiledAttentionEngine(KVCachePool(config))
    tables = block_tables(problem.layout, batch, pages_per_seq, rng)
    slots = np.concatenate([slot_mapping(table, problem.page_size, np.arange(context)) for table in tables])
    shape = (slots.size, problem.kv_heads, problem.head_dim)
    engine.write(0, slots, *(rng.standard_normal((2, *shape)).astype(problem.dtype)))
    k, v = (
        np.ascontiguousarray(
            engine.slots[0, i][slots]
            .reshape(batch, context, problem.kv_heads, problem.head_dim)
            .transpose(0, 2, 1, 3)
        )
        for i in (0, 1)
    )  # [B, Hkv, L, D]
    q = rng.standard_normal((batch, problem.heads, problem.head_dim)).astype(problem.dtype)
    return engine, tables, k, v, q


def gather_pages(
    cache: np.ndarray, table: np.ndarray, tile: tuple[int, int], buffer: np.ndarray, in_place: bool
) -> None:
    """The copies the paged kernel makes and nothing else: every K and V page of the block
    tables (`cache` [2, num_pages, ...]), one tile of (sequences, pages) at a time, into
    `buffer`, except (with `in_place`) tiles of consecutive pages, which it reads in place."""
    rows, chunk = tile
    for b in range(0, table.shape[0], rows):
        for first in range(0, table.shape[1], chunk):
            ids = table[b : b + rows, first : first + chunk]
            if in_place and is_run(ids):
                continue
            for kv in (0, 1):
                cache[kv].take(ids, axis=0, mode="clip", out=buffer[: ids.shape[0], : ids.shape[1]])


def measure(batch: int, context: int, problem: Shape, rng: np.random.Generator) -> dict:
    """Time one (batch, context) point; returns times in seconds and the largest difference."""
    engine, tables, k, v, q = problem_arrays(batch, context, problem, rng)
    qg = q.reshape(batch, problem.kv_heads, problem.heads // problem.kv_heads, problem.head_dim)
    q_t = np.ascontiguousarray(np.swapaxes(qg * (1.0 / math.sqrt(problem.head_dim)), -1, -2))
    chunk = max(problem.page_size, CHUNK_BYTES // (batch * k[0, :, 0].nbytes))  # tokens
    tile = engine.tile_shape(batch, tables.shape[1])  # (sequences, pages) the kernel reads at once
    cache = engine.pool.kv_cache[0]
    buffer = np.empty((*tile, *cache.shape[2:]), cache.dtype)
    lens = np.full(batch, context)
    programs = {
        "dense": lambda: dense_decode(qg, k, v),
        "dense_chunked": lambda: dense_decode_chunked(qg, k, v, chunk),
        "dense_tall": lambda: dense_decode_tall(q_t, k, v),
        "dense_two_pass": lambda: dense_decode_two_pass(q_t, k, v, tile[1] * problem.page_size),
        "paged": lambda: engine.paged_attention_batch(0, q, tables, lens),
        "gather": lambda: gather_pages(cache, tables, tile, buffer, k.nbytes + v.nbytes <= IN_PLACE_BYTES),
    }
    best = dict.fromkeys(programs, float("inf"))
    flush = np.zeros(FLUSH_BYTES // 8) if problem.cache == "cold" else None
    for _ in range(problem.repeat):  # interleaved, so load from other processes hits all alike
        for name, program in programs.items():
            if flush is not None:
                flush += 1.0  # reads and writes more bytes than the CPU caches hold
            elif problem.cache == "warm":
                program()  # the timed run finds what this program's own run left in cache
            start = time.perf_counter()
            program()
            best[name] = min(best[name], time.perf_counter() - start)
    want = dense_decode(qg, k, v).reshape(batch, problem.heads, problem.head_dim)
    dense_program = min((name for name in programs if name.startswith("dense")), key=best.__getitem__)
    return {
        "batch": batch,
        "context": context,
        "dense_s": best[dense_program],
        "paged_s": best["paged"],
        "gather_s": best["gather"],
        "dense_program": dense_program,
        "ratio": best["paged"] / best[dense_program],
        "ratio_vs_q_kt": best["paged"] / min(best["dense"], best["dense_chunked"]),
        "max_abs_diff": float(np.abs(programs["paged"]() - want).max()),
        "kv_bytes": k.nbytes + v.nbytes,  # what the queries read: K and V of every context
        "program_s": best,
    }


def add_bandwidth(points: list[dict], bandwidth: float) -> None:
    """Each point's K/V bytes per second, paged and dense, and their share of `bandwidth`."""
    for p in points:
        p["paged_kv_bytes_per_s"] = p["kv_bytes"] / p["paged_s"]
        p["bandwidth_share"] = p["paged_kv_bytes_per_s"] / bandwidth
        p["dense_bandwidth_share"] = p["kv_bytes"] / p["dense_s"] / bandwidth


def run(
    *,
    quick: bool = False,
    seed: int = 0,
    batch: str = "1,4,16,32",
    context: str = "512,2048,4096",
    heads: int = 16,
    kv_heads: int = 4,
    head_dim: int = 64,
    page_size: int = 16,
    dtype: str = "float32",
    repeat: int = 15,
    blas_threads: int = 1,
    layout: str = "scattered",
    cache: str = "shared",
) -> Report:
    mib = BANDWIDTH_MIB
    if quick:
        batch, context, repeat, mib = "2,8", "256,1024", 15, 64  # best of 15: steady bars
    batches = [int(b) for b in batch.split(",")]
    contexts = [int(c) for c in context.split(",")]
    rng = np.random.default_rng(seed)
    check_choice("layout", layout, sorted(LAYOUTS))
    check_choice("cache", cache, sorted(CACHE_STATES))
    shape = Shape(heads, kv_heads, head_dim, page_size, dtype, repeat, layout, cache)
    points = [(b, c) for b in batches for c in contexts]
    # One BLAS thread by default: on a shared 2-core machine, BLAS threads spin-waiting against
    # other processes made single matmuls 5x slower at random, for either side.
    with threadpool_limits(blas_threads or None, user_api="blas"):
        bandwidth = memory_bandwidth(mib)
        results = [measure(b, c, shape, rng) for b, c in tqdm(points, desc="attention", disable=None)]
    add_bandwidth(results, bandwidth)
    return Report(
        plotter=figure,
        title=(
            f"bench attention: decode step, {heads} heads / {kv_heads} KV heads x "
            f"{head_dim}, page {page_size}, {dtype}, best of {repeat}, "
            f"BLAS threads: {blas_threads or 'default'}, {layout} block tables, {cache} cache"
        ),
        columns=COLUMNS,
        rows=[row(r) for r in results],
        notes=[
            f"block tables: {layout}, {LAYOUTS[layout]}",
            f"cache: {cache}, {CACHE_STATES[cache]}",
            *notes(results, bandwidth, mib),
        ],
        data={
            "points": results,
            "bandwidth_bytes_per_s": bandwidth,
            "bandwidth_mib": mib,
            "geomean_ratio": geomean(r["ratio"] for r in results),
            "target": TARGET,
            "worst_allowed": WORST,
            "layout": layout,
            "cache": cache,
            "quick": quick,
        },
    )


COLUMNS = ["batch", "context", "dense ms", "paged ms", "paged/dense", "gather ms",
           "paged K/V GB/s", "of bandwidth", "dense program", "max |diff|"]  # fmt: skip


def row(r: dict) -> list[object]:
    return [
        r["batch"],
        r["context"],
        r["dense_s"] * 1e3,
        r["paged_s"] * 1e3,
        r["ratio"],
        r["gather_s"] * 1e3,
        r["paged_kv_bytes_per_s"] / 1e9,
        f"{r['bandwidth_share']:.0%}",
        r["dense_program"],
        f"{r['max_abs_diff']:.1e}",
    ]


def geomean(ratios: Iterable[float]) -> float:
    return float(np.exp(np.mean(np.log(list(ratios)))))


def notes(points: list[dict], bandwidth: float, mib: int) -> list[str]:
    ratios = np.array([p["ratio"] for p in points])
    worst = points[int(ratios.argmax())]
    share = [p["bandwidth_share"] for p in points]
    dense_share = [p["dense_bandwidth_share"] for p in points]
    floor = [p["gather_s"] / p["dense_s"] for p in points]
    return [
        f"geometric mean ratio {geomean(ratios):.2f}x (target <= {TARGET}x), met at "
        f"{int((ratios <= TARGET).sum())} of {len(points)} points; worst {ratios.max():.2f}x at "
        f"B={worst['batch']} L={worst['context']} (target: none above {WORST}x)",
        f"memory bandwidth {bandwidth / 1e9:.1f} GB/s: bytes read + bytes written per second by "
        f"np.copyto of a {mib} MiB float32 array, best of 5",
        f"K/V bytes of the contexts per second as a share of it: paged {min(share):.0%}-"
        f"{max(share):.0%}, dense {min(dense_share):.0%}-{max(dense_share):.0%}",
        f"gather ms: the page copies alone take {min(floor):.2f}-{max(floor):.2f}x the dense "
        "step; numpy must copy pages before a matmul reads them, a GPU kernel reads them in place",
        f"against the q @ k^T programs alone (dense, dense_chunked), paged / dense has geometric "
        f"mean {geomean(p['ratio_vs_q_kt'] for p in points):.2f}x",
        "vLLM paper: its paged kernel is {:.2f}-{:.2f}x the contiguous one".format(*PAPER_RATIOS),
    ]
