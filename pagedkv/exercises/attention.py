"""Checker for the `paged_attention` exercise: one decode query through a block table.

Each case is a real float64 `KVCachePool` whose slots first get noise, then a sequence's K/V
written at its slots by `AttentionEngine.write` (vLLM's `reshape_and_cache`); its block
table is in random page order, and some cases scale q so that scores reach the hundreds
(a softmax without its max subtracted overflows). The learner's answer must equal `dense_attention` over the
contiguous K/V to 1e-12. vLLM's PagedAttention kernel is the production version.

Leaves out: batches (one sequence per call) and layers (the caches given are one layer's).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pagedkv.core.config import CacheConfig
from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.exercises.blocks import grow_scattered
from pagedkv.exercises.guard import Failure, call, wrong
from pagedkv.model.attention import AttentionEngine, dense_attention

NAME = "paged_attention"
TOLERANCE = 1e-12
RULE = (
    "paged attention (notebook 02): the decode query attends to the keys and values "
    "of positions 0 .. context_len - 1, found through the block table, with weights "
    "softmax(q . k / sqrt(head_dim)); query head h reads kv head h // (num_heads // num_kv_heads)"
)


HEADS = ((1, 1), (2, 2), (4, 2), (6, 3))  # (num_heads, num_kv_heads): MHA and two GQA groupings
CASES = sorted(  # (context_len, page_size, heads, scale of q), smallest first
    [(n, s, h, 1.0) for n in (1, 2, 3, 5, 8) for s in (1, 2, 4) for h in HEADS]
    + [(n, 2, h, 1000.0) for n in (1, 5) for h in HEADS],  # scores in the hundreds: exp overflows
    key=lambda c: (c[0], c[1], c[2], c[3]),
)


class Rounded:
    """An array shown by shape and every row, rounded (all heads: a wrong kv head shows as
    rows that repeat another head's, float32 as every row slightly off)."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __repr__(self) -> str:
        rows = np.round(self.array.reshape(len(self.array), -1).astype(np.float64), 6).tolist()
        return f"array {list(self.array.shape)}, rows {rows}"


def _case(rng: np.random.Generator, page_size: int, context_len: int, heads: tuple, scale: float) -> tuple:
    (num_heads, kv_heads), dim, num_pages = heads, 4, 10
    config = CacheConfig(
        num_pages=num_pages,
        page_size=page_size,
        num_layers=1,
        num_kv_heads=kv_heads,
        head_dim=dim,
        dtype="float64",
        enable_prefix_caching=False,
    )
    pool = KVCachePool(config)
    seqs, engine = SequenceManager(pool), AttentionEngine(pool)
    noise = rng.standard_normal((2, config.num_slots, kv_heads, dim))
    engine.write(0, np.arange(config.num_slots), noise[0], noise[1])
    grow_scattered(seqs, rng, num_pages, context_len)  # the block table in random page order
    k, v = rng.standard_normal((2, context_len, kv_heads, dim))
    engine.write(0, seqs.slot_mapping("learner"), k, v)
    q = scale * rng.standard_normal((num_heads, dim))  # scale 1000: scores in the hundreds
    inputs = dict(
        q=q,
        k_cache=pool.kv_cache[0, 0].copy(),
        v_cache=pool.kv_cache[0, 1].copy(),
        block_table=seqs.block_table("learner"),
        context_len=context_len,
    )
    return inputs, dense_attention(q[None], k, v)[0], (k, v)


def _kv_heads_read(q: np.ndarray, k: np.ndarray, v: np.ndarray, got: np.ndarray) -> list[int] | None:
    """The kv head each query head's row of `got` matches, or None if some row matches none."""
    read = []
    for h in range(len(q)):
        rows = [
            dense_attention(q[None, h : h + 1], k[:, j : j + 1], v[:, j : j + 1])[0, 0]
            for j in range(k.shape[1])
        ]
        match = [j for j, row in enumerate(rows) if np.allclose(got[h], row, rtol=0, atol=1e-9)]
        if not match:
            return None
        read.append(match[0])
    return read


def _hint(inputs: dict, dense_kv: tuple, got: np.ndarray, error: float) -> str:
    q, table, length = inputs["q"], inputs["block_table"], inputs["context_len"]
    k, v = dense_kv
    size, kv_heads, dim = inputs["k_cache"].shape[1:]
    if not np.isfinite(got).all():
        return (
            "your result holds NaN or inf: exp of a large score overflows (exp(800) is inf even in "
            "float64). Subtract each head's largest score before exp: the softmax stays the same"
        )
    if got.dtype != np.float64:
        return f"your result is {got.dtype}: compute in float64"
    if error < 1e-4:
        return (
            f"your result is off by {error:.0e}, about float32's precision: part of the computation "
            "runs in float32 (an astype, a float32 array); compute in float64"
        )
    near = lambda out: out.shape == got.shape and np.allclose(got, out, rtol=0, atol=1e-9)  # noqa: E731
    if near(dense_attention(q[None] * np.sqrt(dim), k, v)[0]):
        return "the scores are not divided by sqrt(head_dim)"
    whole = [c[table].reshape(-1, kv_heads, dim) for c in (inputs["k_cache"], inputs["v_cache"])]
    if len(table) * size > length and near(dense_attention(q[None], *whole)[0]):
        return "the slots after context_len (the unused end of the last page) took part"
    for pages, how in ((sorted(table), "in sorted page-id order"), (list(range(len(table))), "0, 1, 2, ...")):
        kv = [c[pages].reshape(-1, kv_heads, dim)[:length] for c in (inputs["k_cache"], inputs["v_cache"])]
        if pages != list(table) and near(dense_attention(q[None], *kv)[0]):
            return f"pages were read {how}: logical block i is in page block_table[i], whatever its id"
    read, right = _kv_heads_read(q, k, v, got), [h // (len(q) // kv_heads) for h in range(len(q))]
    if read is not None and read != right:
        return f"query heads 0..{len(q) - 1} read kv heads {read}; they should read {right} (h // group size)"
    return ""


def check_paged_attention(fn: Callable) -> str:
    """fn(q, k_cache, v_cache, block_table, context_len) -> attention output [num_heads, head_dim]."""
    rng, count = np.random.default_rng(0), 0
    for length, size, heads, scale in CASES:
        inputs, expected, dense_kv = _case(rng, size, length, heads, scale)
        got = call(NAME, fn, inputs)
        count += 1
        if not isinstance(got, np.ndarray) or got.shape != expected.shape:
            raise Failure(
                f"✗ {NAME}: return a numpy array of shape {list(expected.shape)} (num_heads, head_dim); "
                f"got {type(got).__name__} {getattr(got, 'shape', '')}\n"
                f"  inputs:   q [{heads[0]}, 4], k_cache/v_cache {list(inputs['k_cache'].shape)}, "
                f"block_table={inputs['block_table']}, context_len={length}"
            )
        error = float(np.max(np.abs(got - expected))) if np.isfinite(got).all() else float("inf")
        if error > TOLERANCE:
            failure = wrong(
                NAME, inputs, Rounded(expected), Rounded(got), RULE, _hint(inputs, dense_kv, got, error)
            )
            raise Failure(
                f"{failure}\n  error:    max |got - expected| = {error:.2e} (allowed {TOLERANCE:g})"
            )
    return (
        f"✓ {NAME}: all {count} cases equal attention over the contiguous keys and values to "
        f"{TOLERANCE:g} in float64 (page sizes 1-4, grouped-query heads, block tables in random "
        "page order, scores in the hundreds)."
    )
