"""Dense decode attention: one query per sequence over contiguous K/V, four ways.

The baselines `bench attention` times the paged kernel (`TiledAttentionEngine.paged_attention_batch`)
against. Each takes K and V laid out [B, Hkv, L, D], the layout batched matmul reads fastest,
as a model without paging would keep them (one contiguous reservation per sequence, as
FasterTransformer does), and returns the attention outputs [B, Hkv, G, D] of queries grouped
[B, Hkv, G, D] (G query heads per K/V head). `dense_decode` is the textbook program;
`dense_decode_chunked` is FlashDecoding's online softmax over slices; `dense_decode_tall`
computes the scores as k @ q^T, a tall matrix times a thin one, as the paged kernel does;
`dense_decode_two_pass` is the paged kernel's two passes over slices without the page copies.
The benchmark takes the fastest at each point, so paging is compared with the best dense
numpy program, not a weak one.

Leaves out: masks (every context is full), prefill (one query per sequence).
"""

from __future__ import annotations

import math

import numpy as np


def dense_decode(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """q [B, Hkv, G, D], k/v [B, Hkv, L, D] -> [B, Hkv, G, D]: one softmax over the context."""
    scores = q @ k.transpose(0, 1, 3, 2)  # [B, Hkv, G, L]
    scores *= 1.0 / math.sqrt(q.shape[-1])
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=-1, keepdims=True)
    return scores @ v


def dense_decode_tall(q_t: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The same with the scores computed as k @ q_t (q_t [B, Hkv, D, G], pre-scaled): a tall
    matrix times a thin one, several times faster in BLAS than q @ k^T (the paged kernel's
    formulation, so the dense side gets it too)."""
    scores = np.ascontiguousarray(np.swapaxes(k @ q_t, -1, -2))  # [B, Hkv, G, L]
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    return (scores @ v) / scores.sum(axis=-1, keepdims=True)


def dense_decode_two_pass(q_t: np.ndarray, k: np.ndarray, v: np.ndarray, chunk: int) -> np.ndarray:
    """The paged kernel's two passes over contiguous K/V: k @ q_t slice by slice into one
    score row, one softmax, then the weights times V slice by slice; no copies of K or V."""
    length = k.shape[2]
    scores = np.empty((*q_t.shape[:2], q_t.shape[3], length), q_t.dtype)  # [B, Hkv, G, L]
    for first in range(0, length, chunk):
        scores[..., first : first + chunk] = np.swapaxes(k[:, :, first : first + chunk] @ q_t, -1, -2)
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    out = np.zeros((*scores.shape[:3], v.shape[3]), q_t.dtype)
    for first in range(0, length, chunk):
        out += scores[..., first : first + chunk] @ v[:, :, first : first + chunk]
    return out / scores.sum(axis=-1, keepdims=True)


def dense_decode_chunked(q: np.ndarray, k: np.ndarray, v: np.ndarray, chunk: int) -> np.ndarray:
    """The same, over contiguous slices of `chunk` tokens combined by an online softmax."""
    running_max: np.ndarray | None = None
    denom: np.ndarray | None = None
    acc: np.ndarray | None = None
    for first in range(0, k.shape[2], chunk):
        scores = q @ k[:, :, first : first + chunk].transpose(0, 1, 3, 2)
        scores *= 1.0 / math.sqrt(q.shape[-1])
        chunk_max = scores.max(axis=-1, keepdims=True)
        new_max = chunk_max if running_max is None else np.maximum(running_max, chunk_max)
        scores -= new_max
        np.exp(scores, out=scores)
        part = scores @ v[:, :, first : first + chunk]
        if running_max is None:
            denom, acc = scores.sum(axis=-1, keepdims=True), part
        else:
            correction = np.exp(running_max - new_max)
            denom = denom * correction + scores.sum(axis=-1, keepdims=True)
            acc = acc * correction + part
        running_max = new_max
    assert acc is not None and denom is not None, "k holds no tokens"
    return acc / denom
