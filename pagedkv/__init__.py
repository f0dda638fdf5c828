"""pagedkv: a paged KV cache, exact and explained."""

from .attention import AttentionEngine, dense_attention
from .config import CacheConfig
from .contiguous import ContiguousKVCache
from .eviction import EvictionPolicy, LRUEvictionPolicy, MRUEvictionPolicy
from .hashing import block_hashes, hash_block_tokens
from .model import TinyLM
from .page import Page, PageState
from .pool import Event, KVCachePool, OutOfPagesError, PoolSnapshot
from .scheduler import Scheduler
from .sequence import Sequence, SequenceManager, UnknownSequenceError

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
