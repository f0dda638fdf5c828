"""bench attention: paged decode attention vs the fastest dense numpy attention.

One decode step: B sequences of L tokens each, one query per sequence, H query heads over
Hkv K/V heads. The paged side is `AttentionEngine.paged_attention_batch` reading K/V
through block tables whose pages are scattered over the pool (a random permutation, as
after many allocations and frees). The dense side gets the same K/V already laid out
contiguously as [B, Hkv, L, D], the layout batched matmul is fastest on, and is the faster
of two programs: one softmax over the whole context, or the same chunked online softmax as
the paged side over contiguous slices. Both run interleaved in one process, best of
`--repeat`; the ratio is paged / dense time, target <= 1.3x (the gather is the only extra
work). vLLM's paper reports its PagedAttention kernel 20-26 % slower than FasterTransformer's
contiguous kernel in the same micro-benchmark.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]  # ships no stubs or py.typed
from tqdm import tqdm

from ..attention import CHUNK_BYTES, AttentionEngine
from ..config import CacheConfig
from ..pool import KVCachePool
from . import Report

HELP = "paged vs dense decode attention (numpy): time ratio per batch and context size"
TARGET = 1.3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch", default="1,4,16,32", help="comma-separated batch sizes")
    parser.add_argument("--context", default="512,2048,4096", help="comma-separated lengths")
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--kv-heads", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--page-size", type=int, default=16)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--repeat", type=int, default=15, help="best of this many runs")
    parser.add_argument(
        "--blas-threads",
        type=int,
        default=1,
        help="BLAS threads for both sides (0 = the library default)",
    )


def dense_decode(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """q [B, Hkv, G, D], k/v [B, Hkv, L, D] -> [B, Hkv, G, D]: one softmax over the context."""
    scores = q @ k.transpose(0, 1, 3, 2)  # [B, Hkv, G, L]
    scores *= 1.0 / math.sqrt(q.shape[-1])
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=-1, keepdims=True)
    return scores @ v


def dense_decode_tall(q_t: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The same with the scores computed as k @ q_t (q_t [B, Hkv, D, G], pre-scaled): a tall
    matrix times a thin one, several times faster in BLAS than q @ k^T (the paged kernel's
    formulation, so the dense side gets it too)."""
    scores = np.ascontiguousarray(np.swapaxes(k @ q_t, -1, -2))  # [B, Hkv, G, L]
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    return (scores @ v) / scores.sum(axis=-1, keepdims=True)


def dense_decode_chunked(q: np.ndarray, k: np.ndarray, v: np.ndarray, chunk: int) -> np.ndarray:
    """The same, over contiguous slices of `chunk` tokens combined by an online softmax."""
    running_max: np.ndarray | None = None
    denom: np.ndarray | None = None
    acc: np.ndarray | None = None
    for first in range(0, k.shape[2], chunk):
        scores = q @ k[:, :, first : first + chunk].transpose(0, 1, 3, 2)
        scores *= 1.0 / math.sqrt(q.shape[-1])
        chunk_max = scores.max(axis=-1, keepdims=True)
        new_max = chunk_max if running_max is None else np.maximum(running_max, chunk_max)
        scores -= new_max
        np.exp(scores, out=scores)
        part = scores @ v[:, :, first : first + chunk]
        if running_max is None:
            denom, acc = scores.sum(axis=-1, keepdims=True), part
        else:
            correction = np.exp(running_max - new_max)
            denom = denom * correction + scores.sum(axis=-1, keepdims=True)
            acc = acc * correction + part
        running_max = new_max
    assert acc is not None and denom is not None, "k holds no tokens"
    return acc / denom


@dataclass(frozen=True)
class Shape:
    """The attention problem every point of the benchmark times."""

    heads: int
    kv_heads: int
    head_dim: int
    page_size: int
    dtype: str
    repeat: int  # best of this many runs


def measure(batch: int, context: int, problem: Shape, rng: np.random.Generator) -> dict:
    """Time one (batch, context) point; returns times in seconds and the largest difference."""
    pages_per_seq = -(-context // problem.page_size)
    config = CacheConfig(
        num_pages=batch * pages_per_seq,
        page_size=problem.page_size,
        num_layers=1,
        num_kv_heads=problem.kv_heads,
        head_dim=problem.head_dim,
        dtype=problem.dtype,
    )
    pool = KVCachePool(config)
    engine = AttentionEngine(pool)
    tables = rng.permutation(config.num_pages).reshape(batch, pages_per_seq)  # scattered pages
    page_slots = tables[:, :, None] * problem.page_size + np.arange(problem.page_size)
    slots = page_slots.reshape(batch, -1)[:, :context].ravel()
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
    qg = q.reshape(batch, problem.kv_heads, problem.heads // problem.kv_heads, problem.head_dim)
    chunk = max(problem.page_size, CHUNK_BYTES // (batch * k[0, :, 0].nbytes))  # tokens
    block_tables, lens = tables.tolist(), [context] * batch
    q_t = np.ascontiguousarray(np.swapaxes(qg * (1.0 / math.sqrt(problem.head_dim)), -1, -2))
    programs = {
        "dense": lambda: dense_decode(qg, k, v),
        "dense_tall": lambda: dense_decode_tall(q_t, k, v),
        "dense_chunked": lambda: dense_decode_chunked(qg, k, v, chunk),
        "paged": lambda: engine.paged_attention_batch(0, q, block_tables, lens),
    }
    best = dict.fromkeys(programs, float("inf"))
    for _ in range(problem.repeat):  # interleaved, so load from other processes hits all alike
        for name, program in programs.items():
            start = time.perf_counter()
            program()
            best[name] = min(best[name], time.perf_counter() - start)
    want = dense_decode(qg, k, v).reshape(batch, problem.heads, problem.head_dim)
    diff = float(np.abs(programs["paged"]() - want).max())
    dense_names = [name for name in programs if name != "paged"]
    dense = min(best[name] for name in dense_names)
    return {
        "batch": batch,
        "context": context,
        "dense_s": dense,
        "paged_s": best["paged"],
        "dense_program": min(dense_names, key=best.__getitem__),
        "ratio": best["paged"] / dense,
        "max_abs_diff": diff,
    }


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
) -> Report:
    if quick:
        batch, context, repeat = "2,8", "256,1024", 3
    batches = [int(b) for b in batch.split(",")]
    contexts = [int(c) for c in context.split(",")]
    rng = np.random.default_rng(seed)
    shape = Shape(heads, kv_heads, head_dim, page_size, dtype, repeat)
    points = [(b, c) for b in batches for c in contexts]
    # One BLAS thread by default: on a shared 2-core machine, BLAS threads spin-waiting against
    # other processes made single matmuls 5x slower at random, for either side.
    with threadpool_limits(blas_threads or None, user_api="blas"):
        results = [measure(b, c, shape, rng) for b, c in tqdm(points, desc="attention", disable=None)]
    rows = [
        [
            r["batch"],
            r["context"],
            r["dense_s"] * 1e3,
            r["paged_s"] * 1e3,
            r["ratio"],
            r["dense_program"],
            f"{r['max_abs_diff']:.1e}",
        ]
        for r in results
    ]
    ratios = np.array([r["ratio"] for r in results])
    geo = float(np.exp(np.log(ratios).mean()))
    met = int((ratios <= TARGET).sum())
    return Report(
        plotter=figure,
        title=(
            f"bench attention: decode step, {heads} heads / {kv_heads} KV heads x "
            f"{head_dim}, page {page_size}, {dtype}, best of {repeat}, "
            f"BLAS threads: {blas_threads or 'default'}"
        ),
        columns=["batch", "context", "dense ms", "paged ms", "paged/dense", "dense program", "max |diff|"],
        rows=rows,
        notes=[
            f"geometric mean ratio {geo:.2f}x; target <= {TARGET}x met at {met} of {len(results)}"
            " points (vLLM paper: its paged kernel is 1.20-1.26x the contiguous one)",
        ],
        data={"points": results, "geomean_ratio": geo, "target": TARGET},
    )


def figure(report: Report):
    """Paged / dense time per (batch, context) point, with the target line."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    points = report.data["points"]
    fig = Figure(figsize=(max(5, 0.7 * len(points)), 3.2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    labels = [f"B={p['batch']}\nL={p['context']}" for p in points]
    ax.bar(labels, [p["ratio"] for p in points], color="#0072B2")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.axhline(TARGET, color="#D55E00", ls="--", label=f"target {TARGET}x")
    ax.set_ylabel("paged / dense time")
    ax.set_title("Decode attention through block tables vs contiguous K/V")
    ax.legend()
    fig.tight_layout()
    return fig
