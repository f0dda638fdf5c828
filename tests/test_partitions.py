"""The partitioned softmax's reduce step against an independent oracle: the softmax average
written without any max subtracted, and numpy's float64 exp2 softmax."""

from fractions import Fraction

import numpy as np
import pytest

from pagedkv.model.partitions import reduce_partitions, softmax_average, split_partitions


def _oracle(scores, values):
    # no max subtracted at all: 2**s itself, exact as a Fraction
    weights = [Fraction(2) ** s for s in scores]
    return sum(w * v for w, v in zip(weights, values)) / sum(weights)


def test_hand_example():
    scores, values = [1, 3, 0, 2, 5, 4, 2, 5], [2, 0, 4, 1, 3, 6, 2, 1]
    parts = split_partitions(scores, values, 4)
    assert [(p.max, p.exp_sum, p.out) for p in parts] == [
        (3, Fraction(15, 8), Fraction(4, 5)),
        (5, Fraction(21, 8), Fraction(58, 21)),
    ]
    top, factors, out = reduce_partitions(parts)
    assert (top, factors, out) == (5, [Fraction(1, 4), Fraction(1)], Fraction(244, 99))
    assert out == softmax_average(scores, values) == _oracle(scores, values)


@pytest.mark.parametrize("seed", range(20))
def test_reduce_equals_one_softmax(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    scores = [int(x) for x in rng.integers(-20, 20, n)]
    values = [int(x) for x in rng.integers(-9, 10, n)]
    expected = _oracle(scores, values)
    for size in (1, 3, 4, n):
        assert reduce_partitions(split_partitions(scores, values, size))[2] == expected
    weights = np.exp2(np.array(scores, float) - max(scores))
    assert float(expected) == pytest.approx(float(weights @ np.array(values, float) / weights.sum()))


def test_bad_input():
    with pytest.raises(ValueError):
        split_partitions([1, 2], [1], 1)
    with pytest.raises(ValueError):
        split_partitions([1], [1], 0)
    with pytest.raises(TypeError):
        softmax_average([1.5], [1])
    with pytest.raises(ValueError):
        reduce_partitions([])


def test_float32_paths_round_near_the_exact_fraction():
    from pagedkv.model.partitions import float32_average, float32_reduce

    eps = Fraction(2) ** -23
    # hand example: every sum is exact in float32, so the one softmax rounds once (its division)
    scores, values = [1, 3, 0, 2, 5, 4, 2, 5], [2, 0, 4, 1, 3, 6, 2, 1]
    assert float32_average(scores, values)[2] == np.float32(244 / 99)
    rng = np.random.default_rng(1)
    for _ in range(50):
        n = int(rng.integers(1, 20))
        row_scores, row_values = rng.integers(0, 8, n).tolist(), rng.integers(0, 10, n).tolist()
        exact = _oracle(row_scores, row_values)
        results = [float32_average(row_scores, row_values)[2], float32_reduce(row_scores, row_values, 4)]
        for got in results:
            assert isinstance(got, np.float32)
            assert exact == 0 or abs(Fraction(float(got)) - exact) <= 2 * eps * exact
    # the notebook's second row: the two float32 paths end one float32 step apart
    row = ([4, 1, 6, 0, 1, 1, 4, 2], [1, 0, 5, 1, 2, 9, 5, 7])
    one, reduced = float32_average(*row)[2], float32_reduce(*row, 4)
    assert one == np.nextafter(reduced, np.float32(np.inf))


def _vllm_rule(max_seq_len, num_seqs, num_heads):
    # vLLM's dispatch as written in vllm/attention/ops/paged_attn.py, partitions of 512 tokens
    max_num_partitions = (max_seq_len + 512 - 1) // 512
    use_v1 = max_seq_len <= 8192 and (max_num_partitions == 1 or num_seqs * num_heads > 512)
    return "v1" if use_v1 else "v2"


def test_vllm_kernel_version_hand_cases():
    from pagedkv.model.partitions import PARTITION_SIZE, vllm_kernel_version

    assert PARTITION_SIZE == 512
    assert vllm_kernel_version(512, 1, 1) == "v1"  # one partition: no reduce needed
    assert vllm_kernel_version(513, 1, 32) == "v2"  # two partitions, 32 groups
    assert vllm_kernel_version(8192, 1, 32) == "v2"  # notebook 02: 32 groups
    assert vllm_kernel_version(8192, 20, 32) == "v1"  # notebook 02: 640 groups
    assert vllm_kernel_version(8192, 16, 32) == "v2"  # exactly 512 groups: not more than 512
    assert vllm_kernel_version(8193, 100, 32) == "v2"  # too long for v1's shared memory


def test_vllm_kernel_version_matches_the_rule():
    from pagedkv.model.partitions import vllm_kernel_version

    for max_seq_len in (1, 511, 512, 513, 1024, 4096, 8192, 8193, 20_000):
        for num_seqs in (1, 2, 16, 17, 64):
            for num_heads in (1, 8, 32, 40):
                assert vllm_kernel_version(max_seq_len, num_seqs, num_heads) == _vllm_rule(
                    max_seq_len, num_seqs, num_heads
                )
