"""CacheConfig: derived sizes (bad values are covered in test_bad_input.py)."""

from __future__ import annotations

import numpy as np

from pagedkv import CacheConfig, KVCachePool, TinyLM


def test_sizes_and_preallocated_store():
    cfg = CacheConfig(num_pages=16, page_size=4, num_layers=2, num_kv_heads=2, head_dim=8)
    assert cfg.num_slots == 64
    assert cfg.kv_shape == (2, 2, 16, 4, 2, 8)
    assert cfg.kv_bytes == 2 * 2 * 16 * 4 * 2 * 8 * 4
    assert cfg.bytes_per_token == 2 * 2 * 2 * 8 * 4
    pool = KVCachePool(cfg)
    assert pool.kv_cache.shape == cfg.kv_shape and pool.kv_cache.dtype == np.float32
    assert pool.kv_cache[0].shape == (2, 16, 4, 2, 8)  # per layer [2, num_pages, page_size, H, D]


def test_page_views_write_through_to_the_store():
    pool = KVCachePool(CacheConfig(num_pages=4, page_size=2, dtype="float64"))
    pool.page(3).values[1, 0] = 5.0
    assert (pool.kv_cache[1, 1, 3, 0] == 5.0).all()


def test_model_cache_config_fits_the_model():
    model = TinyLM(num_layers=3, num_heads=6, num_kv_heads=3, head_dim=4)
    cfg = model.cache_config(10, page_size=8, enable_prefix_caching=False)
    assert (cfg.num_layers, cfg.num_kv_heads, cfg.head_dim) == (3, 3, 4)
    assert cfg.page_size == 8 and not cfg.enable_prefix_caching
