"""Attention through block tables, and the dense attention it must equal.

`AttentionEngine` does in numpy what vLLM's `reshape_and_cache` kernel and its paged
attention do on a GPU, the plain way: `write` stores each token's K/V at its slot
(`page_id * page_size + offset`, the slot_mapping); `gather` turns a sequence's block table
into slots and reads its keys and values; `paged_attention` and `paged_attention_batch`
gather, then compute softmax(q k^T / sqrt(d)) v with `dense_attention`. Grouped-query
attention: query head h reads K/V head h // (num_heads // num_kv_heads). The block tables of
a batch may come as one padded [B, max pages] int array (as engines keep them) or lists;
positions past context_lens are never read.

This is the path to read. attention_tiled.py holds the speed path TinyLM runs for a batch
of decodes (`TiledAttentionEngine`: pages read in cache-sized tiles, two passes); tests
hold both to `dense_attention` over the same K/V, to float64 round-off.

`dense_attention` is the reference: the same math over one contiguous K/V array.

Leaves out: a kernel that reads pages in place (a GPU's; numpy cannot multiply through an
index, so the pages are copied out first), ALiBi / sliding windows, and FP8 K/V.
"""

from __future__ import annotations

from collections.abc import Sequence as SequenceLike

import numpy as np

from pagedkv.core.plumbing.validation import check_array, check_instance, check_int
from pagedkv.core.pool import KVCachePool
from pagedkv.core.slot_mapping import slot_mapping as slots_of


def _softmax_attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """q [..., Hkv, G, T, D], k/v [..., Hkv, L, D], mask broadcastable to [..., T, L] (True = keep)."""
    scores = (q @ np.swapaxes(k, -1, -2)[..., None, :, :]) * (1.0 / np.sqrt(q.shape[-1]))
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v[..., None, :, :]


def check_gqa(q_heads: int, kv_heads: int) -> int:
    if q_heads % kv_heads:
        raise ValueError(f"query heads ({q_heads}) must be a multiple of kv heads ({kv_heads})")
    return q_heads // kv_heads


def dense_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = True) -> np.ndarray:
    """Attention of T queries over L contiguous keys/values.

    q: [T, num_heads, head_dim] — the queries of the last T positions of the context.
    k, v: [L, num_kv_heads, head_dim]. Returns [T, num_heads, head_dim]. With `causal`, the
    query at position L - T + i sees keys 0 .. L - T + i.
    """
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    if q.ndim != 3 or k.ndim != 3 or k.shape != v.shape or q.shape[2] != k.shape[2]:
        raise ValueError(f"need q [T, H, D] and k, v [L, Hkv, D]; got {q.shape}, {k.shape}, {v.shape}")
    t, heads, dim = q.shape
    length, kv_heads, _ = k.shape
    if t > length:
        raise ValueError(f"q has {t} positions but the context only {length}")
    group = check_gqa(heads, kv_heads)
    qg = q.reshape(t, kv_heads, group, dim).transpose(1, 2, 0, 3)  # [Hkv, G, T, D]
    mask = None
    if causal:
        mask = np.arange(length)[None, :] <= np.arange(length - t, length)[:, None]  # [T, L]
    out = _softmax_attend(qg, k.transpose(1, 0, 2), v.transpose(1, 0, 2), mask)  # [Hkv, G, T, D]
    return out.transpose(2, 0, 1, 3).reshape(t, heads, dim)


class AttentionEngine:
    """Writes K/V into a pool's pages and attends through block tables."""

    def __init__(self, pool: KVCachePool) -> None:
        check_instance("pool", pool, KVCachePool)
        cfg = pool.config
        self.pool = pool
        self.page_size = cfg.page_size
        self.num_kv_heads, self.head_dim = cfg.num_kv_heads, cfg.head_dim
        # A view of the store with pages and offsets flattened into slots.
        self.slots = pool.kv_cache.reshape(
            cfg.num_layers, 2, cfg.num_slots, cfg.num_kv_heads, cfg.head_dim
        )  # [layers, 2, num_slots, kv_heads, head_dim]

    def check_layer(self, layer: int) -> int:
        return check_int("layer", layer, 0, self.slots.shape[0] - 1)

    def write(
        self, layer: int, slot_mapping: SequenceLike[int] | np.ndarray, keys: np.ndarray, values: np.ndarray
    ) -> None:
        """Store K/V of n tokens at their slots. keys, values: [n, num_kv_heads, head_dim]."""
        layer = self.check_layer(layer)
        slots = np.asarray(slot_mapping)
        if slots.ndim != 1 or (slots.size and slots.dtype.kind not in "iu"):
            raise TypeError(f"slot_mapping must be a 1-D int array, got {slots.dtype} {slots.shape}")
        expect = (slots.size, self.num_kv_heads, self.head_dim)
        check_array("keys", keys, expect, finite=True)
        check_array("values", values, expect, finite=True)
        if slots.size and (slots.min() < 0 or slots.max() >= self.slots.shape[2]):
            raise ValueError(
                f"slot_mapping must hold slots in [0, {self.slots.shape[2] - 1}], "
                f"got {slots.min()}..{slots.max()}"
            )
        self.slots[layer, 0, slots] = keys
        self.slots[layer, 1, slots] = values

    def _context_slots(self, block_table: SequenceLike[int], context_len: int) -> np.ndarray:
        context_len = check_int("context_len", context_len, 1, len(block_table) * self.page_size)
        return slots_of(block_table, self.page_size, np.arange(context_len))

    def gather(
        self, layer: int, block_table: SequenceLike[int], context_len: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """The first context_len keys and values of a sequence: two [L, kv_heads, head_dim] arrays."""
        layer = self.check_layer(layer)
        slots = self._context_slots(block_table, context_len)
        return self.slots[layer, 0, slots], self.slots[layer, 1, slots]

    def paged_attention(
        self, layer: int, q: np.ndarray, block_table: SequenceLike[int], context_len: int
    ) -> np.ndarray:
        """Causal attention of the last T positions of one sequence: q [T, H, D] -> [T, H, D]."""
        k, v = self.gather(layer, block_table, context_len)
        return dense_attention(q, k, v, causal=True)

    def batch_table(
        self,
        q: np.ndarray,
        block_tables: SequenceLike[SequenceLike[int]] | np.ndarray,
        context_lens: SequenceLike[int] | np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Check a decode batch; return its block tables as one [B, max pages] array, padded
        with page 0 (masked by the lengths), and the lengths as an int64 array."""
        batch = len(block_tables)
        if q.ndim != 3 or q.shape[0] != batch or q.shape[2] != self.head_dim or len(context_lens) != batch:
            raise ValueError(
                f"need q [B, H, {self.head_dim}] with B = len(block_tables) = len(context_lens); "
                f"got q {q.shape}, {batch} block tables, {len(context_lens)} lengths"
            )
        lens = np.asarray(context_lens, dtype=np.int64)
        if isinstance(block_tables, np.ndarray) and block_tables.ndim == 2:  # padded [B, max pages]
            table, capacity = block_tables, block_tables.shape[1] * self.page_size
        else:
            table, capacity = self._padded_table(block_tables)
        if batch == 0 or lens.min() < 1 or (lens > capacity).any():
            raise ValueError(f"context_lens must be in [1, pages * page_size], got {lens.tolist()}")
        if table.dtype.kind not in "iu":
            raise TypeError(f"block_tables must hold int page ids, got {table.dtype}")
        # Viewed unsigned, a negative id is huge: one max checks both bounds.
        if table.view(f"u{table.itemsize}").max() >= self.pool.num_pages:
            raise ValueError(f"block_tables must hold page ids in [0, {self.pool.num_pages - 1}]")
        return table, lens

    def _padded_table(
        self, block_tables: SequenceLike[SequenceLike[int]] | np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Block tables of any lengths as one [B, max pages] array padded with page 0, and the
        tokens each can hold."""
        pages = np.fromiter(map(len, block_tables), np.int64, len(block_tables))
        width = int(pages.max()) if pages.size else 0
        if (pages == width).all():  # one call converts equal-length tables
            table = np.asarray(block_tables).reshape(len(block_tables), width)
        else:
            table = np.zeros((len(block_tables), width), dtype=np.int64)
            for b, row in enumerate(block_tables):
                table[b, : len(row)] = row
        return table, pages * self.page_size

    def paged_attention_batch(
        self,
        layer: int,
        q: np.ndarray,
        block_tables: SequenceLike[SequenceLike[int]] | np.ndarray,
        context_lens: SequenceLike[int] | np.ndarray,
    ) -> np.ndarray:
        """Decode attention for a ragged batch: one query per sequence at its last position.

        q: [B, num_heads, head_dim]; block_tables[b] holds sequence b's pages (lists, or one
        [B, max pages] int array as engines keep it); the query of b attends to its first
        context_lens[b] tokens. Returns [B, num_heads, head_dim]. Each sequence's K/V are
        gathered and attended to one at a time (TiledAttentionEngine does the batch at once).
        """
        layer = self.check_layer(layer)
        q = np.asarray(q)
        table, lens = self.batch_table(q, block_tables, context_lens)
        out = [self.paged_attention(layer, q[b : b + 1], table[b], int(lens[b])) for b in range(len(lens))]
        # dense_attention scales by a float64 1/sqrt(d): return the dtype of q and the pool.
        return np.concatenate(out).astype(np.result_type(q.dtype, self.slots.dtype), copy=False)
