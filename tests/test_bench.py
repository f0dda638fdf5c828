"""Benchmarks: every subcommand runs in --quick mode and writes valid JSON; the programs
they time compute what they claim (paged attention across chunk boundaries equals dense)."""

from __future__ import annotations

import numpy as np
import pytest

from pagedkv import (
    AttentionEngine,
    CacheConfig,
    KVCachePool,
    SequenceManager,
    attention,
    dense_attention,
)

TOL = {"float64": 1e-12, "float32": 1e-5}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("page_size", [1, 3, 16])
@pytest.mark.parametrize("heads,kv_heads", [(4, 2), (8, 1), (3, 3)])
@pytest.mark.parametrize("chunk_bytes", [1, 700, 1 << 20])
def test_chunked_paged_attention_equals_dense(monkeypatch, dtype, page_size, heads, kv_heads,
                                              chunk_bytes):
    # Tiny chunks force many chunks (and a short last one) through the online softmax;
    # lengths shorter than later chunks exercise fully masked chunks.
    monkeypatch.setattr(attention, "CHUNK_BYTES", chunk_bytes)
    rng = np.random.default_rng(page_size * 31 + heads)
    lengths = [1, 2, 17, 40, 95, 64]
    cfg = CacheConfig(num_pages=400, page_size=page_size, num_layers=2, num_kv_heads=kv_heads,
                      head_dim=8, dtype=dtype, enable_prefix_caching=False)
    pool = KVCachePool(cfg)
    seqs, engine, kept = SequenceManager(pool), AttentionEngine(pool), []
    for i, n in enumerate(lengths):
        seqs.add(i, rng.integers(0, 50, n).tolist())
        kv = rng.standard_normal((2, n, kv_heads, 8)).astype(dtype) * 3
        engine.write(1, seqs.slot_mapping(i), kv[0], kv[1])
        kept.append(kv)
    q = rng.standard_normal((len(lengths), heads, 8)).astype(dtype)
    got = engine.paged_attention_batch(1, q, [seqs.block_table(i) for i in range(6)], lengths)
    assert got.dtype == np.dtype(dtype)
    for b, kv in enumerate(kept):
        want = dense_attention(q[b : b + 1], kv[0], kv[1])[0]
        np.testing.assert_allclose(got[b], want, rtol=0, atol=TOL[dtype])


def test_paged_attention_refuses_page_ids_outside_the_pool():
    cfg = CacheConfig(num_pages=4, page_size=2, num_layers=1, num_kv_heads=1, head_dim=2)
    engine = AttentionEngine(KVCachePool(cfg))
    with pytest.raises(ValueError, match=r"page ids in \[0, 3\]"):
        engine.paged_attention_batch(0, np.zeros((1, 1, 2), np.float32), [[0, 4]], [3])
