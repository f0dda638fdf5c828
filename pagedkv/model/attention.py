"""Attention through block tables, and the dense attention it must equal.

`AttentionEngine` does in numpy what vLLM's `reshape_and_cache` and PagedAttention kernels
do on a GPU: `write` stores each token's K/V at its slot (`page_id * page_size + offset`,
the slot_mapping), and `paged_attention_batch` computes softmax(q k^T / sqrt(d)) v for a
ragged decode batch (one query per sequence over its first context_lens[b] tokens) by
reading K/V through each sequence's block_table. Grouped-query attention: query head h
reads K/V head h // (num_heads // num_kv_heads).

The same as vLLM: the block tables may come as one padded [B, max pages] int array (lists
work too), a long context is split into chunks of pages as PagedAttention V2 splits it into
partitions, and positions past context_lens are masked out.
Different: a GPU kernel reads every page in place; numpy cannot multiply through an index,
so pages are first copied into one reused buffer small enough to stay in cache (CHUNK_BYTES),
a tile at a time: the whole contexts of as many sequences as fit, or one sequence a chunk of
its pages at a time, so each matmul multiplies a tall block of keys. A batch that fits in one
tile costs one copy of K, one of V and two matmuls. That copy is what paging costs here
(`bench attention`, column gather ms); a tile of one sequence whose pages are consecutive
ids (as a fresh pool's free queue hands them out) is a view of the pool and is not copied,
while the step's K/V are small enough to stay in cache (IN_PLACE_BYTES). Where V2 combines
partitions by an online softmax (a running max and sum, a rescale per partition), this
kernel makes two passes: keys @ q tile by tile into one score row per query head, one
softmax over whole rows, then the weights @ V tile by tile. A score row is head_dim / group
times smaller than its keys, and each tile costs two numpy calls per pass instead of an
online softmax's dozen. The scores are keys @ q with q laid out [B, Hkv, D, G]: a tall
matrix times a thin one, which BLAS does several times faster than q @ keys^T.

`dense_attention` is the reference: the same math over one contiguous K/V array. Tests
hold the two to float64 round-off.

Leaves out: fused kernels, ALiBi / sliding windows, and FP8 K/V.
"""

from __future__ import annotations

import math
from collections.abc import Sequence as SequenceLike

import numpy as np

from pagedkv.core.plumbing.validation import check_array, check_instance, check_int
from pagedkv.core.pool import KVCachePool
from pagedkv.core.slot_mapping import slot_mapping as slots_of

# Bytes of keys gathered per chunk of a decode batch: small enough that the chunk stays in this
# machine's 2 MiB L2 cache while matmul reads it (256 KiB - 1 MiB measured alike, 2 MiB and up
# slower; bench attention).
CHUNK_BYTES = 512 << 10
# NOTE: a tile of consecutive pages could always be read in place (a view of the pool, no
# copy), and that is faster while a step's K/V are small enough to stay in the CPU caches. Past
# that, copying the tile first is faster: the copy streams from memory at full bandwidth, while
# BLAS reading the pool's token-major rows (one head's 256 bytes out of every token's K) does
# not (bench attention --layout runs: in place wins up to 8 MiB whatever the --cache state, at
# 16 MiB it wins cold and loses when the K/V were pushed out by other work, above it loses).
IN_PLACE_BYTES = 8 << 20


def _softmax_attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """q [..., Hkv, G, T, D], k/v [..., Hkv, L, D], mask broadcastable to [..., T, L] (True = keep)."""
    scores = (q @ np.swapaxes(k, -1, -2)[..., None, :, :]) * (1.0 / np.sqrt(q.shape[-1]))
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v[..., None, :, :]


def is_run(ids: np.ndarray) -> bool:
    """Whether page ids [1, P] (one sequence's) are consecutive, so the pages sit back to back
    in the pool and the kernel reads them in place. Example: [[7, 8, 9]] -> True, [[7, 9]] -> False."""
    first, width = int(ids[0, 0]), ids.shape[1]
    return (
        ids.shape[0] == 1
        and int(ids[0, -1]) - first == width - 1
        and (width < 3 or bool((np.diff(ids[0]) == 1).all()))
    )


def _check_gqa(q_heads: int, kv_heads: int) -> int:
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
    group = _check_gqa(heads, kv_heads)
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
        self._workspace: dict[str, np.ndarray] = {}  # scratch arrays reused across calls

    def _scratch(self, name: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A work array kept between calls: fresh large arrays cost a page fault per 4 KiB
        on first touch, which was most of the time of a small decode batch."""
        size = math.prod(shape)
        held = self._workspace.get(name)
        if held is None or held.dtype != dtype or held.size < size:
            held = self._workspace[name] = np.empty(size, dtype)
        return held[:size].reshape(shape)

    def _check_layer(self, layer: int) -> int:
        return check_int("layer", layer, 0, self.slots.shape[0] - 1)

    def write(
        self, layer: int, slot_mapping: SequenceLike[int] | np.ndarray, keys: np.ndarray, values: np.ndarray
    ) -> None:
        """Store K/V of n tokens at their slots. keys, values: [n, num_kv_heads, head_dim]."""
        layer = self._check_layer(layer)
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
        layer = self._check_layer(layer)
        slots = self._context_slots(block_table, context_len)
        return self.slots[layer, 0, slots], self.slots[layer, 1, slots]

    def paged_attention(
        self, layer: int, q: np.ndarray, block_table: SequenceLike[int], context_len: int
    ) -> np.ndarray:
        """Causal attention of the last T positions of one sequence: q [T, H, D] -> [T, H, D]."""
        k, v = self.gather(layer, block_table, context_len)
        return dense_attention(q, k, v, causal=True)

    def _batch_table(
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

    def tile_shape(self, batch: int, width: int) -> tuple[int, int]:
        """(sequences, pages) read per tile: CHUNK_BYTES of keys. Whole contexts of several
        sequences when they fit, else one sequence a chunk of its pages at a time, so every
        matmul multiplies a tall block of keys (a tile of many sequences x one page each
        would cost a BLAS call per 16 tokens).
        Example: 32 KiB pages, CHUNK_BYTES 512 KiB: (8, 2) for width 2; (1, 16) for width 64."""
        page_bytes = self.page_size * self.num_kv_heads * self.head_dim * self.slots.itemsize
        pages = max(1, CHUNK_BYTES // page_bytes)
        if width <= pages:
            return max(1, min(batch, pages // width)), width
        return 1, pages

    def read_pages(self, cache: np.ndarray, ids: np.ndarray, dtype: np.dtype, in_place: bool) -> np.ndarray:
        """K or V (`cache` [num_pages, page_size, Hkv, D]) of pages ids [R, P] as a head-major
        view [R, Hkv, P * page_size, D]: with `in_place`, a view of the pool when one
        sequence's pages are a run of consecutive ids; else a copy into a reused buffer."""
        rows, width = ids.shape
        if in_place and is_run(ids):
            pages = cache[int(ids[0, 0]) : int(ids[0, 0]) + width][None]
        else:  # take(mode="clip"): no bounds-check copy (_batch_table checked the ids)
            buffer = self._scratch("pages", (rows, width, *cache.shape[1:]), cache.dtype)
            pages = cache.take(ids, axis=0, mode="clip", out=buffer)
        tokens = pages.reshape(rows, width * self.page_size, self.num_kv_heads, self.head_dim)
        return tokens.astype(dtype, copy=False).transpose(0, 2, 1, 3)  # matmul reads rows strided

    def _tall_queries(self, q: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """q [B, H, D] scaled by 1/sqrt(D) and laid out [B, Hkv, D, G]: keys @ q is then a tall
        matrix times a thin one, which BLAS does several times faster than q @ keys.T.
        Scaling q instead of the scores saves a pass over them (a Python float keeps float32
        math in float32)."""
        batch, heads, dim = q.shape
        group = _check_gqa(heads, self.num_kv_heads)
        q_t = np.empty((batch, self.num_kv_heads, dim, group), dtype)
        heads_last = q.reshape(batch, self.num_kv_heads, group, dim).transpose(0, 1, 3, 2)
        return np.multiply(heads_last, 1.0 / math.sqrt(dim), out=q_t, casting="unsafe")

    @staticmethod
    def _softmax_rows(scores: np.ndarray, context_lens: np.ndarray) -> np.ndarray:
        """exp(scores - row max) in place over rows scores [R, Hkv, G, n], with the tokens
        past each context length masked out; returns the row sums [R, Hkv, G, 1]."""
        if context_lens.min() < scores.shape[-1]:  # padding exists: mask it
            beyond = np.arange(scores.shape[-1]) >= context_lens[:, None]  # [R, n]
            np.copyto(scores, -np.inf, where=beyond[:, None, None, :])
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        return scores.sum(axis=-1, keepdims=True)

    def _tiles(self, context_lens: np.ndarray, width: int) -> list[tuple[slice, slice, slice]]:
        """The tiles of a batch whose longest context fills `width` pages: (sequences, their
        page columns, the token columns those pages hold). A group of sequences reads up to
        its longest context, so no tile reads a page past every context it serves.
        Example: lens [12, 4], 2 pages a tile, page_size 4 ->
        [(0:1, 0:2, 0:8), (0:1, 2:3, 8:12), (1:2, 0:1, 0:4)]."""
        rows, chunk = self.tile_shape(len(context_lens), width)
        if rows == len(context_lens) and chunk == width:  # one tile: the whole batch
            return [(slice(None), slice(0, width), slice(0, width * self.page_size))]
        used = -(-context_lens // self.page_size)  # pages each context reads
        tiles = []
        for b in range(0, len(used), rows):
            group = int(used[b : b + rows].max())
            for first in range(0, group, chunk):
                last = min(first + chunk, group)
                tokens = slice(first * self.page_size, last * self.page_size)
                tiles.append((slice(b, b + rows), slice(first, last), tokens))
        return tiles

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
        context_lens[b] tokens. Returns [B, num_heads, head_dim].
        """
        layer = self._check_layer(layer)
        q = np.asarray(q)
        table, lens = self._batch_table(q, block_tables, context_lens)
        cache = self.pool.kv_cache[layer]  # [2, num_pages, page_size, Hkv, D]
        dtype = q.dtype if q.dtype == cache.dtype else np.result_type(q.dtype, cache.dtype)
        q_t = self._tall_queries(q, dtype)  # [B, Hkv, D, G]
        batch, kv_heads, dim, group = q_t.shape
        width = -(-int(lens.max()) // self.page_size)  # spare pages past every context are never read
        tiles = self._tiles(lens, width)
        in_place = 2 * int(lens.sum()) * cache[0, 0, 0].nbytes <= IN_PLACE_BYTES  # K/V bytes of the contexts
        scores = self._scratch("scores", (batch, kv_heads, group, width * self.page_size), dtype)
        for rows, pages, tokens in tiles:  # pass 1: q . K, a tile of pages at a time
            keys = self.read_pages(cache[0], table[rows, pages], dtype, in_place)
            scores[rows, :, :, tokens] = np.swapaxes(keys @ q_t[rows], -1, -2)
        row_sums = self._softmax_rows(scores, lens)  # one softmax over whole rows
        out = np.empty((batch, kv_heads, group, dim), dtype)
        for rows, pages, tokens in tiles:  # pass 2: weights . V, summed over a row's tiles
            values = self.read_pages(cache[1], table[rows, pages], dtype, in_place)
            if pages.start == 0:
                np.matmul(scores[rows, :, :, tokens], values, out=out[rows])
            else:
                out[rows] += scores[rows, :, :, tokens] @ values
        out /= row_sums
        return out.reshape(q.shape)
