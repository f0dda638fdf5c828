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
