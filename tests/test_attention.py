"""Paged attention equals dense attention over the same keys and values.

The oracle keeps every token's K/V in its own contiguous arrays (never read back from the
pool) and calls `dense_attention`, or — for the dense function itself — a per-head,
per-query loop written from the formula.
"""

from __future__ import annotations

import numpy as np
import pytest

from pagedkv import AttentionEngine, CacheConfig, KVCachePool, SequenceManager, dense_attention
from pagedkv.model.attention_tiled import TiledAttentionEngine

TOL = {"float64": 1e-12, "float32": 1e-5}


def naive_attention(q, k, v):
    """softmax(q k^T / sqrt(d)) v, one head and one query at a time, causal."""
    t, heads, dim = q.shape
    length, kv_heads, _ = k.shape
    out = np.zeros((t, heads, dim))
    for i in range(t):
        visible = length - t + i + 1
        for h in range(heads):
            g = h // (heads // kv_heads)
            scores = np.array([q[i, h] @ k[j, g] for j in range(visible)]) / np.sqrt(dim)
            w = np.exp(scores - scores.max())
            w /= w.sum()
            out[i, h] = sum(w[j] * v[j, g] for j in range(visible))
    return out


@pytest.mark.parametrize("heads,kv_heads", [(1, 1), (4, 2), (6, 3), (8, 1)])
@pytest.mark.parametrize("t,length", [(1, 1), (1, 9), (5, 5), (3, 11)])
def test_dense_attention_matches_the_formula(heads, kv_heads, t, length):
    rng = np.random.default_rng(heads * 100 + length)
    q = rng.standard_normal((t, heads, 4))
    k = rng.standard_normal((length, kv_heads, 4))
    v = rng.standard_normal((length, kv_heads, 4))
    np.testing.assert_allclose(dense_attention(q, k, v), naive_attention(q, k, v), atol=1e-12)


def _filled_pool(
    rng,
    dtype,
    page_size,
    lengths,
    heads=4,
    kv_heads=2,
    dim=8,
    layers=2,
    forks=0,
    engine_class=AttentionEngine,
):
    """Sequences with random K/V written through their slots; also returns the K/V kept aside."""
    cfg = CacheConfig(
        num_pages=sum(-(-n // page_size) for n in lengths) + 2 * forks + 4,
        page_size=page_size,
        num_layers=layers,
        num_kv_heads=kv_heads,
        head_dim=dim,
        dtype=dtype,
    )
    pool = KVCachePool(cfg)
    seqs = SequenceManager(pool)
    engine = engine_class(pool)
    kept = {}
    for i, n in enumerate(lengths):
        seqs.add(i, rng.integers(0, 50, n).tolist())
        kv = rng.standard_normal((layers, 2, n, kv_heads, dim)).astype(dtype)
        for layer in range(layers):
            engine.write(layer, seqs.slot_mapping(i), kv[layer, 0], kv[layer, 1])
        kept[i] = kv
    return pool, seqs, engine, kept


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("page_size", [1, 3, 4, 16])
def test_paged_attention_single_sequence_equals_dense(dtype, page_size):
    rng = np.random.default_rng(page_size)
    lengths = [1, 7, 16, 33]
    pool, seqs, engine, kept = _filled_pool(rng, dtype, page_size, lengths)
    for i, n in enumerate(lengths):
        for t in {1, min(n, 5), n}:
            q = rng.standard_normal((t, 4, 8)).astype(dtype)
            for layer in range(2):
                got = engine.paged_attention(layer, q, seqs.block_table(i), n)
                want = dense_attention(q, kept[i][layer, 0], kept[i][layer, 1])
                np.testing.assert_allclose(got, want, rtol=0, atol=TOL[dtype])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("page_size", [1, 4, 5, 16])
@pytest.mark.parametrize("heads,kv_heads", [(2, 2), (4, 2), (8, 1)])
@pytest.mark.parametrize("engine_class", [AttentionEngine, TiledAttentionEngine])  # plain, speed path
def test_ragged_batch_decode_equals_dense(dtype, page_size, heads, kv_heads, engine_class):
    rng = np.random.default_rng(7 * page_size + heads)
    lengths = rng.integers(1, 60, size=6).tolist()
    pool, seqs, engine, kept = _filled_pool(
        rng, dtype, page_size, lengths, heads, kv_heads, engine_class=engine_class
    )
    q = rng.standard_normal((len(lengths), heads, 8)).astype(dtype)
    for layer in range(2):
        got = engine.paged_attention_batch(
            layer, q, [seqs.block_table(i) for i in range(len(lengths))], lengths
        )
        for b in range(len(lengths)):
            want = dense_attention(q[b : b + 1], kept[b][layer, 0], kept[b][layer, 1])[0]
            np.testing.assert_allclose(got[b], want, rtol=0, atol=TOL[dtype])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("engine_class", [AttentionEngine, TiledAttentionEngine])
def test_forked_sequences_read_shared_pages_and_their_own_copies(dtype, engine_class):
    """After fork + append, parent and child share full pages but each attends over its own tail."""
    rng = np.random.default_rng(3)
    page_size, n = 4, 10  # 2 full pages + a shared partial page
    pool, seqs, engine, kept = _filled_pool(rng, dtype, page_size, [n], forks=2, engine_class=engine_class)
    seqs.fork(0, "child")
    extra = {}
    for seq in (0, "child"):
        slot = seqs.append_slot(seq, 1)
        kv = rng.standard_normal((2, 2, 1, 2, 8)).astype(dtype)
        for layer in range(2):
            engine.write(layer, [slot], kv[layer, 0], kv[layer, 1])
        extra[seq] = kv
    assert seqs.cow_log and seqs.block_table(0)[:2] == seqs.block_table("child")[:2]
    assert seqs.block_table(0)[2] != seqs.block_table("child")[2]
    q = rng.standard_normal((2, 4, 8)).astype(dtype)
    for layer in range(2):
        got = engine.paged_attention_batch(
            layer, q, [seqs.block_table(0), seqs.block_table("child")], [n + 1, n + 1]
        )
        for b, seq in enumerate((0, "child")):
            k = np.concatenate([kept[0][layer, 0], extra[seq][layer, 0]])
            v = np.concatenate([kept[0][layer, 1], extra[seq][layer, 1]])
            want = dense_attention(q[b : b + 1], k, v)[0]
            np.testing.assert_allclose(got[b], want, rtol=0, atol=TOL[dtype])
    seqs.check_invariants()


def test_write_lands_at_the_slot_in_the_page_layout():
    """Slot page_id * page_size + offset is page page_id, row offset, of the per-layer store."""
    cfg = CacheConfig(num_pages=3, page_size=4, num_layers=2, num_kv_heads=1, head_dim=2, dtype="float64")
    pool = KVCachePool(cfg)
    engine = AttentionEngine(pool)
    k = np.array([[[1.0, 2.0]]])
    v = np.array([[[3.0, 4.0]]])
    engine.write(1, [2 * 4 + 3], k, v)
    assert pool.kv_cache[1, 0, 2, 3, 0].tolist() == [1.0, 2.0]
    assert pool.kv_cache[1, 1, 2, 3, 0].tolist() == [3.0, 4.0]
    assert pool.page(2).keys[1, 3, 0].tolist() == [1.0, 2.0]  # the page's view sees it
    assert np.count_nonzero(pool.kv_cache) == 4
