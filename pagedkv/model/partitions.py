"""The reduce step of a partitioned decode kernel, on one score row in exact fractions.

vLLM's PagedAttention v2 (`paged_attention_v2_kernel` and `paged_attention_v2_reduce_kernel`
in `csrc/attention/attention_kernels.cuh`) and flash-decoding cut a long context into
partitions and run them in parallel. Each partition runs its own softmax: it subtracts its
own max m_i from its scores, sums the exponentials into s_i, and returns its own weighted
average o_i of the values. The reduce step takes the row's max M = max m_i, rescales each sum
by exp(m_i - M), and returns sum_i w_i o_i / sum_i w_i with w_i = s_i exp(m_i - M): exactly
the one-softmax average over the whole row.

Here scores are integers and the exponential's base is 2, so every exponential is a power of
2 and every number an exact `Fraction`: the combine equals the one-softmax average exactly,
with no rounding to hide a mistake (with base e the algebra is the same).
`TiledAttentionEngine` needs no reduce: its pass 1 keeps a query's whole score row.

`float32_average` and `float32_reduce` run the same two paths in float32, one scalar operation
at a time, so their last bits are the same on every CPU.

Leaves out: heads, several queries, float16 and bfloat16.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from pagedkv.core.plumbing.validation import check_int, check_items

# vLLM's partition size for PagedAttention v2 (`_PARTITION_SIZE` in vllm/attention/ops/paged_attn.py)
PARTITION_SIZE = 512


def vllm_kernel_version(max_seq_len: int, num_seqs: int, num_heads: int) -> str:
    """The PagedAttention kernel vLLM's decode picks: "v1" when max_seq_len <= 8192 and either
    the context fits one partition of `PARTITION_SIZE` tokens or num_seqs * num_heads > 512
    (enough (sequence, head) groups to fill the GPU without partitions), else "v2".
    Example: vllm_kernel_version(8192, 1, 32) -> "v2"; vllm_kernel_version(8192, 20, 32) -> "v1"."""
    check_int("max_seq_len", max_seq_len, 1)
    check_int("num_seqs", num_seqs, 1)
    check_int("num_heads", num_heads, 1)
    partitions = -(-max_seq_len // PARTITION_SIZE)
    fits = max_seq_len <= 8192
    return "v1" if fits and (partitions == 1 or num_seqs * num_heads > 512) else "v2"


class Partition(NamedTuple):
    """One partition's own softmax: its tokens [start, stop), its max score, the sum of
    2 ** (score - max) over its tokens, and its weighted average of the values."""

    start: int
    stop: int
    max: int
    exp_sum: Fraction
    out: Fraction


def _check(scores: Sequence[int], values: Sequence[int]) -> None:
    check_items("scores", scores, int)
    check_items("values", values, int)
    if len(scores) != len(values):
        raise ValueError(f"need as many scores as values; got {len(scores)} and {len(values)}")


def softmax_average(scores: Sequence[int], values: Sequence[int]) -> Fraction:
    """The one-softmax output over the whole row: sum 2**(s - max) * v / sum 2**(s - max).
    Example: softmax_average([0, 1], [3, 6]) -> Fraction(5) (weights 1/3 and 2/3)."""
    _check(scores, values)
    top = max(scores)
    weights = [Fraction(2) ** (s - top) for s in scores]
    return sum((w * v for w, v in zip(weights, values)), Fraction(0)) / sum(weights)


def split_partitions(scores: Sequence[int], values: Sequence[int], size: int) -> list[Partition]:
    """Each partition of `size` tokens with its own softmax (its own max, exp-sum, output).
    Example: split_partitions([0, 1], [3, 6], 1) -> [Partition(0, 1, 0, 1, 3), Partition(1, 2, 1, 1, 6)]."""
    _check(scores, values)
    check_int("size", size, 1)
    parts = []
    for start in range(0, len(scores), size):
        stop = min(start + size, len(scores))
        part_scores, part_values = scores[start:stop], values[start:stop]
        top = max(part_scores)
        exp_sum = sum((Fraction(2) ** (s - top) for s in part_scores), Fraction(0))
        parts.append(Partition(start, stop, top, exp_sum, softmax_average(part_scores, part_values)))
    return parts


def reduce_partitions(parts: Sequence[Partition]) -> tuple[int, list[Fraction], Fraction]:
    """The reduce step: (the row's max M, each partition's rescale factor 2**(m_i - M), the
    combined output sum w_i o_i / sum w_i with w_i = exp_sum_i * factor_i).
    Example: for the partitions above -> (1, [1/2, 1], 5)."""
    if not parts:
        raise ValueError("need at least one partition")
    top = max(p.max for p in parts)
    factors = [Fraction(2) ** (p.max - top) for p in parts]
    weights = [p.exp_sum * f for p, f in zip(parts, factors)]
    out = sum((w * p.out for w, p in zip(weights, parts)), Fraction(0)) / sum(weights)
    return top, factors, out


def float32_average(scores: Sequence[int], values: Sequence[int]) -> tuple[int, np.float32, np.float32]:
    """The same softmax in float32, one scalar operation at a time, tokens in order:
    (max, its sum of 2 ** (s - max), its output). Each operation rounds to the nearest
    float32, the same on every CPU (no BLAS, no vector unit picks an order).
    Example: float32_average([0, 1], [3, 6]) -> (1, 1.5, 5.0)."""
    _check(scores, values)
    top, num, den = max(scores), np.float32(0), np.float32(0)
    for s, v in zip(scores, values):
        weight = np.float32(2.0 ** (s - top))  # a power of 2: exact
        num = np.float32(num + np.float32(weight * np.float32(v)))
        den = np.float32(den + weight)
    return top, den, np.float32(num / den)


def float32_reduce(scores: Sequence[int], values: Sequence[int], size: int) -> np.float32:
    """The partitioned path in float32: each partition of `size` tokens runs
    `float32_average`, then the reduce step rescales and combines them, one scalar
    operation at a time. Its roundings fall in other places than the one softmax's, so the
    two float32 results may differ in their last bits.
    Example: float32_reduce([0, 1], [3, 6], 1) -> 5.0."""
    check_int("size", size, 1)
    parts = [float32_average(scores[i : i + size], values[i : i + size]) for i in range(0, len(scores), size)]
    top, num, den = max(p[0] for p in parts), np.float32(0), np.float32(0)
    for part_max, exp_sum, out in parts:
        weight = np.float32(exp_sum * np.float32(2.0 ** (part_max - top)))
        num = np.float32(num + np.float32(weight * out))
        den = np.float32(den + weight)
    return np.float32(num / den)
