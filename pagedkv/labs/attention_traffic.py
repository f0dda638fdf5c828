"""What one paged decode step reads and copies, counted (not timed): the exact side of
`bench attention`.

`count(batch, context)` sets up the benchmark's problem (16 query heads over 4 K/V heads of
64 float32 numbers, pages of 16 scattered over the pool as after many allocations and frees),
runs `TiledAttentionEngine.paged_attention_batch` once and reads the engine's counters: the K
and V pages it read through the block tables, and the bytes it copied into a buffer before a
matmul could read them. The dense programs read the same K/V bytes from one contiguous array
and copy none. A GPU kernel such as vLLM's reads each page where it lies, so it copies none
either: the copy is what numpy adds, and it does not depend on the machine.
"""

from __future__ import annotations

import numpy as np

from pagedkv.core.config import CacheConfig
from pagedkv.core.plumbing import words
from pagedkv.core.pool import KVCachePool
from pagedkv.model.attention_tiled import TiledAttentionEngine


def token_bytes(kv_heads: int, head_dim: int, dtype_bytes: int, layers: int) -> tuple[int, str]:
    """K/V bytes one token holds, and the product that gives them, as text: K and V, each
    `kv_heads` heads of `head_dim` numbers of `dtype_bytes` bytes, in each of `layers`
    layers. Example: token_bytes(4, 64, 4, 1) -> (2048, "2 (K and V) × 4 K/V heads × 64
    numbers × 4 bytes × 1 layer = 2,048 B"): the benchmark's one layer."""
    total = 2 * kv_heads * head_dim * dtype_bytes * layers
    text = (
        f"2 (K and V) × {kv_heads} K/V heads × {head_dim} numbers × {dtype_bytes} bytes × "
        f"{words.count(layers, 'layer')} = {total:,} B"
    )
    return total, text


def count(
    batch: int, context: int, heads: int = 16, kv_heads: int = 4, head_dim: int = 64, page_size: int = 16
) -> dict:
    """K/V bytes the queries need, pages read and bytes copied by one paged decode step of
    `batch` sequences of `context` tokens, and its tiles: the (sequences, pages) it copies and
    multiplies at once, and how many it takes per pass. Example: count(2, 256)["page_reads"]
    -> 64 (2 sequences x 16 pages of 16 tokens, K and V)."""
    pages_per_seq = -(-context // page_size)
    config = CacheConfig(
        num_pages=batch * pages_per_seq,
        page_size=page_size,
        num_layers=1,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        dtype="float32",
    )
    engine = TiledAttentionEngine(KVCachePool(config))
    rng = np.random.default_rng(0)
    tables = rng.permutation(batch * pages_per_seq).reshape(batch, pages_per_seq)  # scattered
    q = np.zeros((batch, heads, head_dim), np.float32)
    engine.paged_attention_batch(0, q, tables, np.full(batch, context))
    kv_bytes = 2 * batch * context * kv_heads * head_dim * 4
    return {
        "batch": batch,
        "context": context,
        "kv_bytes": kv_bytes,  # K and V of every context: what any attention must read
        "page_reads": engine.traffic["page_reads"],
        "bytes_copied": engine.traffic["bytes_copied"],
        "kv_bytes_per_token": kv_bytes // (batch * context),  # one layer: the step runs one
        "layers": config.num_layers,
        # a tile: the (sequences, pages of each) the step copies into one buffer and multiplies
        "tile": engine.tile_shape(batch, pages_per_seq),
        "tiles": len(engine.tiles(np.full(batch, context), pages_per_seq)),  # per pass (K, then V)
    }
