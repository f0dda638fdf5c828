"""Property tests: both decode kernels equal dense attention for any block tables.

The plain kernel (`AttentionEngine.paged_attention_batch`, gather then dense) and the tiled
speed path (`TiledAttentionEngine`, attention_tiled.py) are held to the same oracle.

Hypothesis draws the pool shape (page size, K/V heads, query heads per K/V head, head
size, dtype), a ragged batch (context lengths, block tables of random page ids, shared
pages and spare trailing pages allowed) and the chunk size, then fills the pool with random
K/V. The oracle reads each sequence's keys and values out of the pool with plain numpy
indexing, page by page in block-table order, and calls `dense_attention` on them; it
never goes through the kernel's tiles, buffers or masks. A second strategy draws block
tables made of runs of consecutive page ids, which the kernel reads in place (IN_PLACE_BYTES
patched to read in place always or never).
"""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pagedkv import AttentionEngine, CacheConfig, KVCachePool, dense_attention
from pagedkv.model import attention_tiled as attention
from pagedkv.model.attention_tiled import TiledAttentionEngine

from .hypothesis_profiles import examples

ENGINES = [AttentionEngine, TiledAttentionEngine]

TOL = {"float64": 1e-12, "float32": 1e-5}


@st.composite
def decode_batches(draw):
    """A pool configuration, context lengths and block tables long enough to hold them."""
    page_size = draw(st.integers(1, 8))
    kv_heads, group = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dim = draw(st.sampled_from([1, 4, 8]))
    dtype = draw(st.sampled_from(["float64", "float32"]))
    num_pages = draw(st.integers(1, 40))
    lens = draw(st.lists(st.integers(1, 70), min_size=1, max_size=6))
    tables = []
    for n in lens:
        needed = -(-n // page_size) + draw(st.integers(0, 2))  # spare pages are allowed
        tables.append(draw(st.lists(st.integers(0, num_pages - 1), min_size=needed, max_size=needed)))
    chunk_bytes = draw(st.sampled_from([1, 300, 4096, 1 << 20]))
    return page_size, kv_heads, group, dim, dtype, num_pages, lens, tables, chunk_bytes


@st.composite
def run_batches(draw):
    """Like decode_batches, but each block table is one to three runs of consecutive page ids."""
    page_size, kv_heads, group, dim, dtype, num_pages, lens, _, chunk_bytes = draw(decode_batches())
    tables = []
    for n in lens:
        needed = -(-n // page_size) + draw(st.integers(0, 2))
        table: list[int] = []
        while len(table) < needed:
            length = draw(st.integers(1, min(needed - len(table), num_pages)))
            start = draw(st.integers(0, num_pages - length))
            table += range(start, start + length)
        tables.append(table)
    return page_size, kv_heads, group, dim, dtype, num_pages, lens, tables, chunk_bytes


def fill(num_pages, page_size, kv_heads, dim, dtype, seed):
    cfg = CacheConfig(
        num_pages=num_pages,
        page_size=page_size,
        num_layers=2,
        num_kv_heads=kv_heads,
        head_dim=dim,
        dtype=dtype,
        enable_prefix_caching=False,
    )
    pool = KVCachePool(cfg)
    rng = np.random.default_rng(seed)
    pool.kv_cache[...] = rng.standard_normal(pool.kv_cache.shape) * 3
    return pool, rng


def context_of(pool, layer, table, n):
    """Keys and values of a context read straight from the pool, [n, kv_heads, head_dim] each."""
    k = np.concatenate([pool.kv_cache[layer, 0, page] for page in table])[:n]
    v = np.concatenate([pool.kv_cache[layer, 1, page] for page in table])[:n]
    return k, v


@pytest.mark.parametrize("engine_class", ENGINES)
@settings(max_examples=examples(80), deadline=None)
@given(batch=decode_batches(), seed=st.integers(0, 2**32 - 1), as_array=st.booleans())
def test_paged_attention_batch_equals_dense(engine_class, batch, seed, as_array):
    page_size, kv_heads, group, dim, dtype, num_pages, lens, tables, chunk_bytes = batch
    pool, rng = fill(num_pages, page_size, kv_heads, dim, dtype, seed)
    engine = engine_class(pool)
    q = rng.standard_normal((len(lens), kv_heads * group, dim)).astype(dtype)
    block_tables = tables
    if as_array:  # one [B, max pages] array, padded with page 0, as engines keep it
        block_tables = np.zeros((len(tables), max(map(len, tables))), dtype=np.int32)
        for b, table in enumerate(tables):
            block_tables[b, : len(table)] = table
    with mock.patch.object(attention, "CHUNK_BYTES", chunk_bytes):
        got = engine.paged_attention_batch(1, q, block_tables, lens)
    assert got.shape == q.shape and got.dtype == np.dtype(dtype)
    for b, (table, n) in enumerate(zip(tables, lens)):
        want = dense_attention(q[b : b + 1], *context_of(pool, 1, table, n))[0]
        np.testing.assert_allclose(got[b], want, rtol=0, atol=TOL[dtype])


@settings(max_examples=examples(60), deadline=None)
@given(run_batches(), st.integers(0, 2**32 - 1), st.sampled_from([0, 1 << 30]))
def test_block_tables_of_consecutive_pages_read_in_place_equal_dense(batch, seed, in_place_bytes):
    page_size, kv_heads, group, dim, dtype, num_pages, lens, tables, chunk_bytes = batch
    pool, rng = fill(num_pages, page_size, kv_heads, dim, dtype, seed)
    q = rng.standard_normal((len(lens), kv_heads * group, dim)).astype(dtype)
    with (
        mock.patch.object(attention, "CHUNK_BYTES", chunk_bytes),
        mock.patch.object(attention, "IN_PLACE_BYTES", in_place_bytes),
    ):
        got = TiledAttentionEngine(pool).paged_attention_batch(0, q, tables, lens)
    for b, (table, n) in enumerate(zip(tables, lens)):
        want = dense_attention(q[b : b + 1], *context_of(pool, 0, table, n))[0]
        np.testing.assert_allclose(got[b], want, rtol=0, atol=TOL[dtype])


def test_one_sequence_of_consecutive_pages_is_read_in_place_without_a_copy():
    # Oracle: numpy's own view test; a tile of a run is the pool's memory, anything else a copy.
    pool, _ = fill(8, 2, 1, 2, "float32", 0)
    engine, cache = TiledAttentionEngine(pool), pool.kv_cache[0, 0]
    for ids, shared in (([[3, 4, 5]], True), ([[3, 5, 4]], False), ([[3, 4], [5, 6]], False)):
        pages = engine.read_pages(cache, np.array(ids), np.dtype("float32"), in_place=True)
        assert np.shares_memory(pages, pool.kv_cache) is shared
    assert attention.is_run(np.array([[7]])) and not attention.is_run(np.array([[0, 2, 1, 3]]))


@pytest.mark.parametrize("engine_class", ENGINES)
@settings(max_examples=examples(30), deadline=None)
@given(batch=decode_batches(), seed=st.integers(0, 2**32 - 1))
def test_float64_queries_on_a_float32_pool_compute_in_float64(engine_class, batch, seed):
    page_size, kv_heads, group, dim, _, num_pages, lens, tables, chunk_bytes = batch
    pool, rng = fill(num_pages, page_size, kv_heads, dim, "float32", seed)
    q = rng.standard_normal((len(lens), kv_heads * group, dim))
    with mock.patch.object(attention, "CHUNK_BYTES", chunk_bytes):
        got = engine_class(pool).paged_attention_batch(0, q, tables, lens)
    assert got.dtype == np.float64
    for b, (table, n) in enumerate(zip(tables, lens)):
        k, v = (x.astype(np.float64) for x in context_of(pool, 0, table, n))
        np.testing.assert_allclose(got[b], dense_attention(q[b : b + 1], k, v)[0], rtol=0, atol=1e-12)


@pytest.mark.parametrize("engine_class", ENGINES)
@pytest.mark.parametrize("bad", [np.array([[0.0, 1.0]]), np.array([[0, 9]])])
def test_a_block_table_array_of_floats_or_foreign_pages_is_refused(engine_class, bad):
    pool, _ = fill(4, 2, 1, 2, "float32", 0)
    engine = engine_class(pool)
    error = TypeError if bad.dtype.kind == "f" else ValueError
    with pytest.raises(error, match="block_tables"):
        engine.paged_attention_batch(0, np.zeros((1, 1, 2), np.float32), bad, [3])
