"""Checker for the `paged_attention` exercise: one decode query through a block table.

Each case is a real float64 `KVCachePool` whose slots first get noise, then a sequence's K/V
written at its slots by `AttentionEngine.write` (vLLM's `reshape_and_cache`); its block
table is not 0, 1, 2, ... The learner's answer must equal `dense_attention` over the
contiguous K/V to 1e-12. vLLM's PagedAttention kernel is the production version.

Leaves out: batches (one sequence per call) and layers (the caches given are one layer's).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pagedkv.core.config import CacheConfig
from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.exercises.guard import Failure, call, wrong
from pagedkv.model.attention import AttentionEngine, dense_attention

NAME = "paged_attention"
TOLERANCE = 1e-12
RULE = (
    "paged attention (notebook 02): the decode query attends to the keys and values "
    "of positions 0 .. context_len - 1, found through the block table, with weights "
    "softmax(q . k / sqrt(head_dim)); query head h reads kv head h // (num_heads // num_kv_heads)"
)


class Rounded:
    """An array shown by shape and its first row, rounded (feedback stays readable)."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __repr__(self) -> str:
        row = self.array.reshape(len(self.array), -1)[0].astype(np.float64)
        return f"array {list(self.array.shape)}, row 0 = {np.round(row, 6).tolist()}"


def _case(rng: np.random.Generator, page_size: int, context_len: int, heads: int, kv_heads: int) -> tuple:
    dim = 4
    config = CacheConfig(
        num_pages=12,
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
    for filler in ("f0", "f1", "f2"):  # so the sequence's pages are 1, 3, 4, ...
        seqs.add(filler, [0])
    seqs.free("f1")
    seqs.add("learner", [0] * context_len)
    k, v = rng.standard_normal((2, context_len, kv_heads, dim))
    engine.write(0, seqs.slot_mapping("learner"), k, v)
    q = rng.standard_normal((heads, dim))
    inputs = dict(
        q=q,
        k_cache=pool.kv_cache[0, 0].copy(),
        v_cache=pool.kv_cache[0, 1].copy(),
        block_table=seqs.block_table("learner"),
        context_len=context_len,
    )
    return inputs, dense_attention(q[None], k, v)[0], (k, v)


def _hint(inputs: dict, dense_kv: tuple, got: np.ndarray) -> str:
    q, table, length = inputs["q"], inputs["block_table"], inputs["context_len"]
    k, v = dense_kv
    size, kv_heads, dim = inputs["k_cache"].shape[1:]
    if got.dtype != np.float64:
        return f"your result is {got.dtype}: compute in float64"
    near = lambda out: out.shape == got.shape and np.allclose(got, out, rtol=0, atol=1e-9)  # noqa: E731
    if near(dense_attention(q[None] * np.sqrt(dim), k, v)[0]):
        return "the scores are not divided by sqrt(head_dim)"
    whole = [c[table].reshape(-1, kv_heads, dim) for c in (inputs["k_cache"], inputs["v_cache"])]
    if len(table) * size > length and near(dense_attention(q[None], *whole)[0]):
        return "the slots after context_len (the unused end of the last page) took part"
    in_id_order = [
        c[: len(table)].reshape(-1, kv_heads, dim)[:length] for c in (inputs["k_cache"], inputs["v_cache"])
    ]
    if near(dense_attention(q[None], *in_id_order)[0]):
        return "pages were read in page-id order: logical block i is in page block_table[i]"
    if kv_heads < len(q):
        heads = [h % kv_heads for h in range(len(q))]
        if near(dense_attention(q[None], k[:, heads], v[:, heads])[0]):
            return "query head h reads the wrong kv head"
    return ""


def check_paged_attention(fn: Callable) -> str:
    """fn(q, k_cache, v_cache, block_table, context_len) -> attention output [num_heads, head_dim]."""
    rng, count = np.random.default_rng(0), 0
    shapes = [(h, l, s) for h in ((1, 1), (2, 2), (4, 2)) for l in range(1, 10) for s in (1, 2, 4)]  # noqa: E741
    for (heads, kv_heads), length, size in shapes:
        inputs, expected, dense_kv = _case(rng, size, length, heads, kv_heads)
        got = call(NAME, fn, inputs)
        count += 1
        if not isinstance(got, np.ndarray) or got.shape != expected.shape:
            raise Failure(
                f"✗ {NAME}: return a numpy array of shape {list(expected.shape)} (num_heads, head_dim); "
                f"got {type(got).__name__} {getattr(got, 'shape', '')}\n"
                f"  inputs:   q [{heads}, 4], k_cache/v_cache {list(inputs['k_cache'].shape)}, "
                f"block_table={inputs['block_table']}, context_len={length}"
            )
        error = float(np.max(np.abs(got - expected))) if np.isfinite(got).all() else float("inf")
        if error > TOLERANCE:
            failure = wrong(NAME, inputs, Rounded(expected), Rounded(got), RULE, _hint(inputs, dense_kv, got))
            raise Failure(
                f"{failure}\n  error:    max |got - expected| = {error:.2e} (allowed {TOLERANCE:g})"
            )
    return (
        f"✓ {NAME}: all {count} cases equal dense_attention to {TOLERANCE:g} in float64 "
        "(page sizes 1-4, grouped-query heads, block tables out of page-id order)."
    )
