"""A small pool for tests: the K/V are tiny because these tests check bookkeeping."""

from __future__ import annotations

from pagedkv import CacheConfig, KVCachePool, SequenceManager


def make(num_pages=8, page_size=4, caching=True, policy="lru", **options):
    """A fresh (pool, manager) pair; `options` are further CacheConfig fields."""
    cfg = CacheConfig(
        num_pages=num_pages,
        page_size=page_size,
        num_layers=1,
        num_kv_heads=1,
        head_dim=2,
        enable_prefix_caching=caching,
        eviction_policy=policy,
        **options,
    )
    pool = KVCachePool(cfg)
    return pool, SequenceManager(pool)
