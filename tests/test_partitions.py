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
