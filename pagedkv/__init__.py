"""pagedkv: a paged KV cache, exact and explained."""

from pagedkv.core.config import CacheConfig
from pagedkv.core.eviction import EvictionPolicy, LRUEvictionPolicy, MRUEvictionPolicy
from pagedkv.core.hashing import block_hashes, hash_block_tokens
from pagedkv.core.page import Page, PageState
from pagedkv.core.pool import Event, KVCachePool, OutOfPagesError, PoolSnapshot
from pagedkv.core.sequence import Sequence, SequenceManager, UnknownSequenceError
from pagedkv.engine.scheduler import Scheduler
from pagedkv.labs.contiguous import ContiguousKVCache
from pagedkv.model.attention import AttentionEngine, dense_attention
from pagedkv.model.tinylm import TinyLM

__all__ = [
    "AttentionEngine",
    "CacheConfig",
    "ContiguousKVCache",
    "Event",
    "EvictionPolicy",
    "KVCachePool",
    "LRUEvictionPolicy",
    "MRUEvictionPolicy",
    "OutOfPagesError",
    "Page",
    "PageState",
    "PoolSnapshot",
    "Scheduler",
    "Sequence",
    "SequenceManager",
    "TinyLM",
    "UnknownSequenceError",
    "block_hashes",
    "dense_attention",
    "hash_block_tokens",
]
