"""Workload generators: seeded, and their sample means match the documented (paper) means."""

from __future__ import annotations

import numpy as np
import pytest

from pagedkv.labs import workloads
from pagedkv.labs.workloads import (
    MAX_LEN,
    WORKLOADS,
    Request,
    alpaca_like,
    beam_parents,
    lengths,
    mean_lengths,
    parallel_sampling,
    sharegpt_like,
    with_system_prompt,
)


@pytest.mark.parametrize("workload", ["sharegpt", "alpaca"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_means_match_the_paper(workload, seed):
    prompt, output = lengths(workload, 40_000, seed)
    mean_prompt, mean_output = WORKLOADS[workload]["paper_means"]
    # Log-normal with sigma <= 1: the sample mean of 40,000 draws is within ~1 % (1 s.e.).
    assert prompt.mean() == pytest.approx(mean_prompt, rel=0.04)
    assert output.mean() == pytest.approx(mean_output, rel=0.04)
    assert prompt.min() >= 1 and output.min() >= 1
    assert prompt.max() <= MAX_LEN and output.max() <= MAX_LEN


def test_sharegpt_is_longer_and_more_spread_than_alpaca():
    sg, al = sharegpt_like(2000), alpaca_like(2000)
    assert np.mean([r.prompt_len for r in sg]) > 5 * np.mean([r.prompt_len for r in al])
    assert np.std([r.max_new_tokens for r in sg]) > np.std([r.max_new_tokens for r in al])


@pytest.mark.parametrize("make", [sharegpt_like, alpaca_like])
def test_seeded(make):
    a, b, c = make(50, seed=3), make(50, seed=3), make(50, seed=4)
    assert a == b
    assert a != c
    assert len({r.req_id for r in a}) == 50
    lens = [r.prompt_len for r in a]
    assert lens == lengths("sharegpt" if make is sharegpt_like else "alpaca", 50, 3)[0].tolist()


def test_vocab_and_final_len():
    reqs = alpaca_like(100, vocab_size=256)
    assert all(0 <= t < 256 for r in reqs for t in r.prompt_token_ids)
    r = reqs[0]
    assert r.final_len == r.prompt_len + r.max_new_tokens - 1


def test_system_prompt_and_parallel_sampling():
    base = sharegpt_like(10, seed=1)
    shared = with_system_prompt(base, 64, seed=5)
    first = shared[0].prompt_token_ids[:64]
    assert all(r.prompt_token_ids[:64] == first for r in shared)
    for s, b in zip(shared, base, strict=True):
        assert s.prompt_token_ids[64:] == b.prompt_token_ids
    assert [r.n for r in parallel_sampling(base, 4)] == [4] * 10
    assert base[0].n == 1  # the originals are untouched


def test_beam_parents_favour_the_best_beam():
    parents = beam_parents(4, 20_000, seed=0, decay=0.5)
    assert parents.shape == (20_000, 4)
    assert (np.diff(parents, axis=1) >= 0).all()
    share = np.bincount(parents.ravel(), minlength=4) / parents.size
    np.testing.assert_allclose(share, np.array([8, 4, 2, 1]) / 15, atol=0.01)
    assert np.array_equal(beam_parents(4, 5, seed=1), beam_parents(4, 5, seed=1))
    assert (beam_parents(3, 100, decay=1.0) < 3).all()


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: lengths("wiki", 5), "workload must be one of"),
        (lambda: lengths("alpaca", 0), r"num_requests must be in \[1, "),
        (lambda: sharegpt_like(5, vocab_size=0), "vocab_size must be in"),
        (lambda: with_system_prompt([], -1), "length must be in"),
        (lambda: parallel_sampling([], 0), r"n must be in \[1, 1024\], got 0"),
        (lambda: beam_parents(2, 3, decay=0.0), r"decay must be in \(0, 1\]"),
    ],
)
def test_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_ops_trace_shares_prefix_on_even_requests():
    trace = workloads.ops_trace(6, 32, 16, seed=0)
    assert all((trace[i][:16] == trace[0][:16]).all() for i in (2, 4))
    assert not (trace[1][:16] == trace[0][:16]).all()


def test_mean_lengths_are_the_draws_own_means():
    requests = [
        Request("a", [1, 2, 3], 10),
        Request("b", [4], 5),
    ]
    assert mean_lengths(requests) == (2.0, 7.5)  # (3 + 1) / 2 and (10 + 5) / 2, by hand
    with pytest.raises(ValueError):
        mean_lengths([])


def test_distinct_prefixes_counts_first_tokens_by_hand():
    """Three requests, two of them after the same 3-token prefix: 2 distinct prefixes of 3
    tokens, 3 of 4 (the requests differ in their 4th token), and a bad length is refused."""
    from pagedkv.labs.workloads import Request, distinct_prefixes

    requests = [Request("a", [1, 2, 3, 4], 1), Request("b", [1, 2, 3, 5], 1), Request("c", [9, 2, 3, 4], 1)]
    assert distinct_prefixes(requests, 3) == 2 and distinct_prefixes(requests, 4) == 3
    assert distinct_prefixes([], 3) == 0
    with pytest.raises(ValueError, match="length"):
        distinct_prefixes(requests, 0)
