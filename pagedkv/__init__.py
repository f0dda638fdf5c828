"""pagedkv: a paged KV cache, exact and explained.

The folders are layers (docs/design.md, "The house"): `core` (pages, block tables, prefix
caching, eviction, copy-on-write) at the bottom, then `radix`, `engine`, `model`, `labs`,
`scenarios`, `viz`, `exercises`, `bench` and `service`. This file names the public API.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from pagedkv.core.config import CacheConfig
from pagedkv.core.eviction import EvictionPolicy, LRUEvictionPolicy, MRUEvictionPolicy
from pagedkv.core.hashing import block_hashes, hash_block_tokens
from pagedkv.core.observe.snapshot import PoolSnapshot
from pagedkv.core.page import Page, PageState
from pagedkv.core.plumbing.events import Event
from pagedkv.core.pool import KVCachePool, OutOfPagesError
from pagedkv.core.sequence import Sequence, SequenceManager, UnknownSequenceError
from pagedkv.labs import eviction_policies as _eviction_policies  # noqa: F401  (registers fifo, lfu, arc, s3fifo)
from pagedkv.radix import radix_index as _radix_index  # noqa: F401  (registers prefix_index="radix")

# The model and the engine load on first use: `import pagedkv` (and `python -m pagedkv --help`)
# costs numpy and the core, not the layers above it (tests/test_imports.py).
_LAZY = {  # name -> module
    "AttentionEngine": "pagedkv.model.attention",
    "ContiguousKVCache": "pagedkv.labs.contiguous",
    "Scheduler": "pagedkv.engine.scheduler",
    "TinyLM": "pagedkv.model.tinylm",
    "dense_attention": "pagedkv.model.attention",
}
if TYPE_CHECKING:
    from pagedkv.engine.scheduler import Scheduler
    from pagedkv.labs.contiguous import ContiguousKVCache
    from pagedkv.model.attention import AttentionEngine, dense_attention
    from pagedkv.model.tinylm import TinyLM


# Modules that lived at the top of the package before it had layers, under their old names:
# `from pagedkv import costs` keeps working in learners' notebooks.
_MOVED_MODULES = {"costs": "pagedkv.labs.costs"}


def __getattr__(name: str) -> object:
    if name in _MOVED_MODULES:
        module = importlib.import_module(_MOVED_MODULES[name])
        globals()[name] = module
        return module
    if name not in _LAZY:
        raise AttributeError(f"module 'pagedkv' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # the next access skips this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_MOVED_MODULES))


__version__ = "0.2.0"

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
    "__version__",
    "block_hashes",
    "dense_attention",
    "hash_block_tokens",
]
