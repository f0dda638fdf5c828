"""The speed path of paged decode attention: `TiledAttentionEngine.paged_attention_batch`.

attention.py is the kernel to read; this is the one TinyLM runs for a step of decodes,
because it is several times faster in numpy. What it does differently, and why:

A GPU kernel reads every page in place; numpy cannot multiply through an index, so pages
are first copied into one reused buffer small enough to stay in cache (CHUNK_BYTES), a
tile at a time: the whole contexts of as many sequences as fit, or one sequence a chunk of
its pages at a time (as PagedAttention V2 splits a long context into partitions), so each
matmul multiplies a tall block of keys. A batch that fits in one tile costs one copy of K,
one of V and two matmuls. That copy is what paging costs here (`bench attention`, column
gather ms); a tile of one sequence whose pages are consecutive ids (as a fresh pool's free
queue hands them out) is a view of the pool and is not copied, while the step's K/V are
small enough to stay in cache (IN_PLACE_BYTES). Where V2 gives each partition its own softmax
(its max and exp-sum) and a reduce kernel rescales and adds the partitions' outputs, this
kernel makes two passes: keys @ q tile by tile into one score row per query head, one
softmax over whole rows, then the weights @ V tile by tile. A score row is head_dim / group
times smaller than its keys, and each tile costs two numpy calls per pass instead of an
online softmax's dozen. The scores are keys @ q with q laid out [B, Hkv, D, G]: a tall
matrix times a thin one, which BLAS does several times faster than q @ keys^T.

How it is checked: tests/test_attention*.py hold it, under tile sizes patched small enough
to force several tiles, in-place reads and copies, to `dense_attention` over the same K/V
and to the plain `AttentionEngine.paged_attention_batch`; `bench attention` times it.
The two byte sizes were tuned on one machine (2 MiB L2); elsewhere they cost speed, never
exactness.

Leaves out: fused kernels, online softmax, FP8 K/V.
"""

from __future__ import annotations

import math
from collections.abc import Sequence as SequenceLike

import numpy as np

from pagedkv.core.pool import KVCachePool
from pagedkv.model.attention import AttentionEngine, check_gqa

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


def is_run(ids: np.ndarray) -> bool:
    """Whether page ids [1, P] (one sequence's) are consecutive, so the pages sit back to back
    in the pool and the kernel reads them in place. Example: [[7, 8, 9]] -> True, [[7, 9]] -> False."""
    first, width = int(ids[0, 0]), ids.shape[1]
    return (
        ids.shape[0] == 1
        and int(ids[0, -1]) - first == width - 1
        and (width < 3 or bool((np.diff(ids[0]) == 1).all()))
    )


class TiledAttentionEngine(AttentionEngine):
    """An AttentionEngine whose decode batch reads pages in cache-sized tiles."""

    def __init__(self, pool: KVCachePool) -> None:
        super().__init__(pool)
        self._workspace: dict[str, np.ndarray] = {}  # scratch arrays reused across calls
        # K or V pages read since creation, and bytes copied to a buffer before a matmul
        self.traffic = {"page_reads": 0, "bytes_copied": 0}

    def _scratch(self, name: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A work array kept between calls: fresh large arrays cost a page fault per 4 KiB
        on first touch, which was most of the time of a small decode batch."""
        size = math.prod(shape)
        held = self._workspace.get(name)
        if held is None or held.dtype != dtype or held.size < size:
            held = self._workspace[name] = np.empty(size, dtype)
        return held[:size].reshape(shape)

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
        self.traffic["page_reads"] += ids.size
        if in_place and is_run(ids):
            pages = cache[int(ids[0, 0]) : int(ids[0, 0]) + width][None]
        else:  # take(mode="clip"): no bounds-check copy (_batch_table checked the ids)
            buffer = self._scratch("pages", (rows, width, *cache.shape[1:]), cache.dtype)
            pages = cache.take(ids, axis=0, mode="clip", out=buffer)
            self.traffic["bytes_copied"] += buffer.nbytes
        tokens = pages.reshape(rows, width * self.page_size, self.num_kv_heads, self.head_dim)
        return tokens.astype(dtype, copy=False).transpose(0, 2, 1, 3)  # matmul reads rows strided

    def _tall_queries(self, q: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """q [B, H, D] scaled by 1/sqrt(D) and laid out [B, Hkv, D, G]: keys @ q is then a tall
        matrix times a thin one, which BLAS does several times faster than q @ keys.T.
        Scaling q instead of the scores saves a pass over them (a Python float keeps float32
        math in float32)."""
        batch, heads, dim = q.shape
        group = check_gqa(heads, self.num_kv_heads)
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

    def tiles(self, context_lens: np.ndarray, width: int) -> list[tuple[slice, slice, slice]]:
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
        layer = self.check_layer(layer)
        q = np.asarray(q)
        table, lens = self.batch_table(q, block_tables, context_lens)
        cache = self.pool.kv_cache[layer]  # [2, num_pages, page_size, Hkv, D]
        dtype = q.dtype if q.dtype == cache.dtype else np.result_type(q.dtype, cache.dtype)
        q_t = self._tall_queries(q, dtype)  # [B, Hkv, D, G]
        batch, kv_heads, dim, group = q_t.shape
        width = -(-int(lens.max()) // self.page_size)  # spare pages past every context are never read
        tiles = self.tiles(lens, width)
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
