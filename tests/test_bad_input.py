"""Bad input gets a clear error naming the argument, and changes nothing.

Each case runs against a pool with live, shared and cached pages, then compares the full
snapshot, the K/V store and the prefix index with what they were before the call.
"""

from __future__ import annotations

from array import array

import numpy as np
import pytest

from pagedkv import (
    AttentionEngine,
    CacheConfig,
    KVCachePool,
    SequenceManager,
    TinyLM,
    UnknownSequenceError,
    dense_attention,
)
from pagedkv.core.config import ConfigError
from pagedkv.engine.swap import SwapSpace


@pytest.fixture()
def world():
    model = TinyLM(seed=0)
    pool = KVCachePool(model.cache_config(num_pages=8, page_size=4))
    seqs = SequenceManager(pool)
    model.generate(seqs, ["cached prefix!"], 3)  # leaves CACHED pages
    seqs.add("a", model.encode("live seq"))
    seqs.fork("a", "b")
    model.forward(seqs, ["a", "b"])
    return model, pool, seqs, AttentionEngine(pool)


def unchanged(seqs, call, exc, match):
    pool = seqs.pool
    before = seqs.snapshot()
    kv = pool.kv_cache.copy()
    index = list(pool.prefix_index.items())
    order = pool.eviction.order()
    with pytest.raises(exc, match=match):
        call()
    assert seqs.snapshot() == before
    assert np.array_equal(pool.kv_cache, kv)
    assert list(pool.prefix_index.items()) == index and pool.eviction.order() == order
    seqs.check_invariants()


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda s: s.add("a", [1, 2]), ValueError, "seq_id 'a' is already"),
        (lambda s: s.add(1.5, [1]), TypeError, "seq_id must be a str or int"),
        (lambda s: s.add(True, [1]), TypeError, "seq_id"),
        (lambda s: s.add("", [1]), ValueError, "seq_id must be a non-empty"),
        (lambda s: s.add("new", []), ValueError, "prompt_token_ids must not be empty"),
        (lambda s: s.add("new", "text"), TypeError, "prompt_token_ids must be a list"),
        (lambda s: s.add("new", [1, -2]), ValueError, "prompt_token_ids must hold ids in"),
        (lambda s: s.add("new", [1, 2.0]), TypeError, r"prompt_token_ids\[1\] must be an int"),
        (lambda s: s.add("new", [1, None]), TypeError, r"prompt_token_ids\[1\]"),
        (lambda s: s.add("new", [True]), TypeError, r"prompt_token_ids\[0\]"),
        (lambda s: s.add("new", [2**64]), ValueError, r"prompt_token_ids\[0\]"),
        (lambda s: s.add("new", np.array([1.0, 2.0])), TypeError, "1-D int array"),
        (lambda s: s.add("new", np.zeros((2, 2), int)), TypeError, "1-D int array"),
        (lambda s: s.add("new", np.array([3, -1])), ValueError, "got -1 at index 1"),
        (lambda s: s.add("new", array("d", [1.9, 2.9])), TypeError, r"prompt_token_ids\[0\] must be an int"),
        (lambda s: s.add("new", array("Q", [1, 2**63])), ValueError, "got 9223372036854775808 at index 1"),
        (lambda s: s.add("new", array("q")), ValueError, "prompt_token_ids must not be empty"),
        (lambda s: s.append_slots(["a"], [1, 2]), ValueError, "as long"),
        (lambda s: s.add("new", [1], extra_key=[1]), TypeError, "extra_key"),
        (lambda s: s.add("new", [1] * 200), MemoryError, "needs"),
        (lambda s: s.append_slot("zz", 1), UnknownSequenceError, "seq_id 'zz' is not a live"),
        (lambda s: s.append_slot("a", -1), ValueError, "token_id must be in"),
        (lambda s: s.append_slot("a", 1.0), TypeError, "token_id must be an int"),
        (lambda s: s.append_slot("a", np.nan), TypeError, "token_id must be an int"),
        (lambda s: s.fork("zz", "c"), UnknownSequenceError, "'zz'"),
        (lambda s: s.fork("a", "b"), ValueError, "child_id 'b' is already"),
        (lambda s: s.fork("a", None), TypeError, "child_id"),
        (lambda s: s.free("zz"), UnknownSequenceError, "'zz'"),
        (lambda s: s.free(["a"]), UnknownSequenceError, "not a live"),
        (lambda s: s.block_table(7), UnknownSequenceError, "7"),
        (lambda s: s.set_computed("a", 99), ValueError, "num_computed_tokens must be in"),
        (lambda s: s.set_computed("a", "3"), TypeError, "num_computed_tokens"),
        (lambda s: s.pages_needed_for_decode(["a", "a"]), ValueError, "distinct"),
        (lambda s: s.slot_mapping("a", 3, 99), ValueError, r"end must be in \[0, 8\], got 99"),
        (lambda s: s.slot_mapping("a", 5, 2), ValueError, r"start must be in \[0, 2\], got 5"),
        (lambda s: s.slot_mapping("a", 0, 1.5), TypeError, "end must be an int"),
        (lambda s: s.get("a").slot(-1), ValueError, "position must be in"),
    ],
)
def test_sequence_manager_rejects(world, call, exc, match):
    _, pool, seqs, _ = world
    unchanged(seqs, lambda: call(seqs), exc, match)


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda p: p.page(-1), ValueError, r"page_id must be in \[0, 7\], got -1"),
        (lambda p: p.page(8), ValueError, "got 8"),
        (lambda p: p.page("0"), TypeError, "page_id must be an int"),
        (lambda p: p.ref_count(1.0), TypeError, "page_id"),
        (lambda p: p.add_listener(3), TypeError, "callback must be callable"),
        (lambda p: p.peek_allocation(-1), ValueError, "n must be >= 0, got -1"),
        (lambda p: p.peek_allocation(1.5), TypeError, r"n must be an int, got 1.5 \(float\)"),
        (lambda p: p.peek_allocation(99), MemoryError, "need 99 pages"),
    ],
)
def test_pool_rejects(world, call, exc, match):
    _, pool, seqs, _ = world
    unchanged(seqs, lambda: call(pool), exc, match)


def test_reset_prefix_cache_refusal_changes_nothing(world):
    _, pool, seqs, _ = world
    before = seqs.snapshot()
    assert pool.reset_prefix_cache() is False
    assert seqs.snapshot() == before


def kv(n, heads=2, dim=8):
    return np.ones((n, heads, dim), np.float32)


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda e: e.write(2, [0], kv(1), kv(1)), ValueError, r"layer must be in \[0, 1\], got 2"),
        (lambda e: e.write("0", [0], kv(1), kv(1)), TypeError, "layer must be an int"),
        (lambda e: e.write(0, [0, 1], kv(1), kv(2)), ValueError, r"keys must be an array of shape \(2,"),
        (lambda e: e.write(0, [0], kv(1), kv(1, 3)), ValueError, "values must be an array of shape"),
        (lambda e: e.write(0, [0], kv(1), [[1.0]]), TypeError, "values must be a numpy array"),
        (lambda e: e.write(0, [0], kv(1) * np.nan, kv(1)), ValueError, "keys holds NaN"),
        (lambda e: e.write(0, [0], kv(1), kv(1) * np.inf), ValueError, "values holds NaN or inf"),
        (lambda e: e.write(0, [32], kv(1), kv(1)), ValueError, r"slot_mapping must hold slots in \[0, 31\]"),
        (lambda e: e.write(0, [-1], kv(1), kv(1)), ValueError, "slot_mapping"),
        (lambda e: e.write(0, [0.5], kv(1), kv(1)), TypeError, "slot_mapping must be a 1-D int"),
        (lambda e: e.paged_attention(0, kv(1, 4), [0], 5), ValueError, r"context_len must be in \[1, 4\]"),
        (lambda e: e.paged_attention(0, kv(1, 3), [0], 4), ValueError, "multiple of kv heads"),
        (lambda e: e.paged_attention_batch(0, kv(2, 4), [[0]], [3]), ValueError, "B = len"),
        (lambda e: e.paged_attention_batch(0, kv(1, 4), [[0]], [0]), ValueError, "context_lens"),
    ],
)
def test_attention_engine_rejects(world, call, exc, match):
    _, pool, seqs, engine = world
    unchanged(seqs, lambda: call(engine), exc, match)


def test_dense_attention_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="need q"):
        dense_attention(np.ones((1, 2, 4)), np.ones((3, 1, 5)), np.ones((3, 1, 5)))
    with pytest.raises(ValueError, match="context only 2"):
        dense_attention(np.ones((3, 2, 4)), np.ones((2, 1, 4)), np.ones((2, 1, 4)))


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda m, s: m.generate(s, [[1, 256]], 2), ValueError, r"prompts\[0\]\[1\] = 256"),
        (lambda m, s: m.generate(s, [[]], 2), ValueError, r"prompts\[0\] must not be empty"),
        (lambda m, s: m.generate(s, "abc", 2), ValueError, "prompts must be a non-empty list"),
        (lambda m, s: m.generate(s, ["a"], -1), ValueError, r"max_new_tokens must be in \[0, 100000\]"),
        (lambda m, s: m.generate(s, ["a"], 2, n=0), ValueError, r"n must be in \[1, 1024\], got 0"),
        (lambda m, s: m.generate(s, ["a"], 2, temperature=-1), ValueError, "temperature"),
        (lambda m, s: m.generate(s, ["a"], 2, temperature=float("nan")), ValueError, "temperature"),
        (lambda m, s: m.generate(s, ["a"], 2, seq_ids=["a"]), ValueError, "already live"),
        (lambda m, s: m.generate(s, ["a", "b"], 2, seq_ids=["x", "x"]), ValueError, "distinct"),
        (lambda m, s: m.generate(s, ["a" * 100], 2), ValueError, "grows to 101 tokens"),
        (lambda m, s: m.forward(s, []), ValueError, "seq_ids must name"),
        (lambda m, s: m.forward(s, ["a"]), ValueError, "no token left to compute"),
        (lambda m, s: m.forward(s, ["a", "a"]), ValueError, "distinct"),
        (lambda m, s: m.forward(s, ["zz"]), UnknownSequenceError, "zz"),
        (lambda m, s: m.forward(None, ["a"]), TypeError, "manager must be a SequenceManager"),
        (lambda m, s: m.forward_reference([300]), ValueError, "vocabulary"),
    ],
)
def test_model_rejects(world, call, exc, match):
    model, pool, seqs, _ = world
    unchanged(seqs, lambda: call(model, seqs), exc, match)


def test_model_rejects_out_of_vocabulary_tokens_already_in_the_cache(world):
    model, pool, seqs, _ = world
    seqs.add("big", [1, 2, 999])  # the pool accepts any non-negative id...
    unchanged(seqs, lambda: model.forward(seqs, ["big"]), ValueError, r"\[2\] = 999 is outside")


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        (dict(num_pages=0), ConfigError, r"num_pages must be in \[1, 16777216\], got 0"),
        (dict(num_pages=2.0), TypeError, r"num_pages must be an int, got 2.0 \(float\)"),
        (dict(num_pages=4, page_size=0), ConfigError, "page_size must be in"),
        (dict(num_pages=4, page_size=True), TypeError, "page_size must be an int"),
        (dict(num_pages=4, num_layers=-1), ConfigError, "num_layers"),
        (dict(num_pages=4, head_dim=0), ConfigError, "head_dim"),
        (dict(num_pages=4, num_kv_heads=None), TypeError, "num_kv_heads must be an int"),
        (dict(num_pages=4, dtype="int8"), ConfigError, "dtype must be one of"),
        (dict(num_pages=4, dtype=np.float32), TypeError, "dtype must be one of"),
        (dict(num_pages=4, enable_prefix_caching="yes"), TypeError, "enable_prefix_caching must be a bool"),
        (dict(num_pages=4, eviction_policy="clock"), ConfigError, "eviction_policy must be one of"),
        (dict(num_pages=1 << 20, page_size=1024, head_dim=64), ConfigError, "GiB of K/V"),
    ],
)
def test_cache_config_rejects(kwargs, exc, match):
    """Wrong kind -> TypeError, wrong value -> ConfigError (a ValueError)."""
    with pytest.raises(exc, match=match):
        CacheConfig(**kwargs)


def test_pool_and_manager_constructors_reject():
    with pytest.raises(TypeError, match="config must be a CacheConfig"):
        KVCachePool({"num_pages": 4})
    cfg = CacheConfig(num_pages=4)
    with pytest.raises(ValueError, match=r"kv_cache must be an array of shape \(2, 2, 4, 16, 2, 8\)"):
        KVCachePool(cfg, kv_cache=np.zeros(3))
    with pytest.raises(TypeError, match="kv_cache must be a numpy array"):
        KVCachePool(cfg, kv_cache=[0.0])
    pool = KVCachePool(cfg)
    with pytest.raises(TypeError, match="pool must be a KVCachePool"):
        SequenceManager(cfg)
    with pytest.raises(TypeError, match="pool must be a KVCachePool"):
        AttentionEngine(cfg)
    with pytest.raises(TypeError, match="pool must be a KVCachePool, got CacheConfig"):
        SwapSpace(cfg, 4)
    with pytest.raises(ValueError, match=r"swap_space_pages must be in \[0, 16777216\], got -1"):
        SwapSpace(pool, -1)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(num_heads=3, num_kv_heads=2), "multiple of num_kv_heads"),
        (dict(head_dim=7), "head_dim must be even"),
        (dict(num_layers=0), r"num_layers must be in \[1, 4096\], got 0"),
        (dict(dtype="float16"), "dtype must be"),
    ],
)
def test_tinylm_rejects(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TinyLM(**kwargs)
