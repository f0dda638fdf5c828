"""CacheConfig: the one dataclass that sizes a paged KV cache.

vLLM splits the same numbers over `CacheConfig` (block size, number of GPU blocks, prefix
caching) and `ModelConfig` (layers, KV heads, head size); pagedkv keeps them together
because the pool preallocates its K/V storage from all of them at once.

Leaves out: GPU memory profiling to *derive* `num_pages` from a memory budget (vLLM's
`gpu_memory_utilization`); here the caller says how many pages it wants.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pagedkv.core.eviction import EVICTION_POLICIES
from pagedkv.core.hashing import HASH_ALGOS
from pagedkv.core.plumbing.validation import check_bool, check_choice, check_int
from pagedkv.core.prefix_index import PREFIX_INDEXES

DTYPES = ("float16", "float32", "float64")


class ConfigError(ValueError):
    """A `CacheConfig` field has a value outside its allowed range (a field of the wrong
    kind raises TypeError, as everywhere in pagedkv)."""


def _check(check: Callable[..., object], name: str, *args: object) -> None:
    try:
        check(name, *args)
    except ValueError as error:
        raise ConfigError(str(error)) from None


@dataclass(frozen=True)
class CacheConfig:
    num_pages: int  # physical pages in the pool (vLLM: num_gpu_blocks)
    page_size: int = 16  # token slots per page (vLLM: block_size; 16 is its default)
    num_layers: int = 2  # every page holds K/V for every layer
    num_kv_heads: int = 2
    head_dim: int = 8
    dtype: str = "float32"  # storage dtype of K/V
    enable_prefix_caching: bool = True  # hash full pages and reuse them across sequences
    # Which CACHED page is reclaimed first: "lru" (vLLM), one of EVICTION_POLICIES, or a
    # class with the EvictionPolicy interface, called with no arguments (pagedkv.exercises).
    eviction_policy: str | type = "lru"
    prefix_index: str = "hash"  # how prefix hits are found: "hash" (vLLM) or "radix" (SGLang)
    prefix_caching_hash_algo: str = "sha256"  # the block hash: "sha256" (vLLM's default) or "xxhash"

    def __post_init__(self) -> None:
        _check(check_int, "num_pages", self.num_pages, 1, 1 << 24)
        _check(check_int, "page_size", self.page_size, 1, 1 << 16)
        _check(check_int, "num_layers", self.num_layers, 1, 1024)
        _check(check_int, "num_kv_heads", self.num_kv_heads, 1, 1024)
        _check(check_int, "head_dim", self.head_dim, 1, 4096)
        _check(check_choice, "dtype", self.dtype, DTYPES)
        check_bool("enable_prefix_caching", self.enable_prefix_caching)
        if not isinstance(self.eviction_policy, type):  # a class is an EvictionPolicy (exercises)
            _check(check_choice, "eviction_policy", self.eviction_policy, tuple(EVICTION_POLICIES))
        _check(check_choice, "prefix_index", self.prefix_index, tuple(PREFIX_INDEXES))
        _check(check_choice, "prefix_caching_hash_algo", self.prefix_caching_hash_algo, HASH_ALGOS)
        if self.prefix_index == "radix" and self.eviction_policy != "lru":
            # The tree may only give up leaves; its leaf-first LRU is SGLang's policy.
            raise ConfigError(
                f"prefix_index='radix' evicts leaves least recently used first; "
                f"eviction_policy must be 'lru' with it, got {self.eviction_policy!r}"
            )
        # Refuse pools whose K/V storage alone would exceed 8 GiB: a typo, not a plan.
        if self.kv_bytes > 8 << 30:
            raise ConfigError(
                f"num_pages={self.num_pages} x page_size={self.page_size} x num_layers="
                f"{self.num_layers} x num_kv_heads={self.num_kv_heads} x head_dim="
                f"{self.head_dim} needs {self.kv_bytes / 2**30:.1f} GiB of K/V; "
                "the limit is 8 GiB"
            )

    @classmethod
    def bookkeeping(cls, num_pages: int, page_size: int = 16, **options: Any) -> CacheConfig:
        """A pool sized for page bookkeeping only: one layer, one KV head, head_dim 1.

        Schedulers, benchmarks and exercises that count pages, hits and evictions but never
        read K/V use this, so the pool's preallocated storage stays a few bytes a slot.
        `options` are any other fields (enable_prefix_caching, eviction_policy, prefix_index,
        prefix_caching_hash_algo, dtype).

        >>> config = CacheConfig.bookkeeping(8, 4, enable_prefix_caching=False)
        >>> config.num_slots, config.kv_shape, config.enable_prefix_caching
        (32, (1, 2, 8, 4, 1, 1), False)
        """
        return cls(
            num_pages=num_pages, page_size=page_size, num_layers=1, num_kv_heads=1, head_dim=1, **options
        )

    @property
    def num_slots(self) -> int:
        """Token slots in the whole pool: num_pages * page_size."""
        return self.num_pages * self.page_size

    @property
    def kv_shape(self) -> tuple[int, ...]:
        """Shape of the K/V store: [num_layers, 2 (K, V), num_pages, page_size, kv_heads, head_dim]."""
        return (
            self.num_layers,
            2,
            self.num_pages,
            self.page_size,
            self.num_kv_heads,
            self.head_dim,
        )

    @property
    def kv_bytes(self) -> int:
        """Bytes of K/V storage the pool preallocates."""
        return int(np.prod(self.kv_shape)) * np.dtype(self.dtype).itemsize

    @property
    def bytes_per_token(self) -> int:
        """Bytes of K/V one token occupies across all layers (2 * layers * heads * dim * itemsize)."""
        return self.kv_bytes // self.num_slots
