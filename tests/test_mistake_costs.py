"""What notebook 08's page-per-token and k·v-sum mistakes cost: checked against counts worked
out by hand and against attention written out with softmax."""

from __future__ import annotations

import math

import numpy as np

from pagedkv.labs.mistake_costs import (
    block_table_reads,
    bookkeeping_counts,
    longest_earlier_prefix,
    repeated_context,
)


def test_block_table_entries_and_allocations_follow_the_page_count():
    # Two prompts, no shared prefix, served one at a time in a roomy pool: each holds
    # ceil(n / page_size) pages, all of them new.
    prompts = [list(range(1, 11)), list(range(100, 108))]  # 10 and 8 tokens
    for size in (1, 4, 16):
        counts = bookkeeping_counts(prompts, size, num_tokens=64)
        pages = sum(math.ceil(len(p) / size) for p in prompts)
        assert counts["tokens"] == 18
        assert counts["table_entries"] == counts["allocations"] == pages


def test_a_shared_prefix_is_not_allocated_again():
    shared = list(range(1, 9))  # 8 tokens: 2 full pages of 4, or 8 pages of 1
    prompts = [shared + [50, 51], shared + [60, 61]]
    # pages of 4: first 3 pages (2 full + 1 partial); second hits 2 and takes 1
    assert bookkeeping_counts(prompts, 4, 64)["allocations"] == 3 + 1
    # pages of 1: first 10; second hits the 8 shared tokens and takes 2
    assert bookkeeping_counts(prompts, 1, 64)["allocations"] == 10 + 2


def test_hit_tokens_and_full_pages_match_a_count_by_hand():
    shared = list(range(1, 9))  # 8 tokens: 2 full pages of 4, or 8 pages of 1
    prompts = [shared + [50, 51], shared + [60, 61]]  # 10 tokens each
    four, one = bookkeeping_counts(prompts, 4, 64), bookkeeping_counts(prompts, 1, 64)
    assert (four["hit_tokens"], four["full_pages"]) == (0 + 8, 2 + 2)  # 2 full pages of 4 each
    assert (one["hit_tokens"], one["full_pages"]) == (0 + 8, 10 + 10)  # every 1-token page is full
    # pages of 1: each full page is looked up at release and once before (a hit or a new
    # page indexed), plus one missed lookup per admission that stops at a miss (both here)
    assert one["hash_lookups"] == 2 * 20 + 2
    assert one["missed_lookups"] == 2  # token 1 for the first prompt, token 60 for the second
    # pages of 4: the first misses its first page; the second hits 2 pages, then stops at
    # the last-token cap, (10 - 1) // 4 = 2 pages, before any lookup can miss
    assert four["missed_lookups"] == 1


def test_longest_earlier_prefix_by_hand():
    prompts = [[1, 2, 3], [1, 2, 4], [5], [1, 2, 3], [1, 9, 9, 9]]
    # none before; [1, 2]; nothing; [1, 2, 3] capped at len - 1 = 2; [1]; then the
    # hits with 1-token pages in a roomy pool are the same numbers
    assert longest_earlier_prefix(prompts) == [0, 2, 0, 2, 1]
    assert bookkeeping_counts(prompts, 1, 64)["hit_tokens"] == 0 + 2 + 0 + 2 + 1


def test_hash_lookups_count_every_full_page_at_least_once():
    prompt = list(range(1, 17))  # 16 tokens
    one, four = bookkeeping_counts([prompt], 1, 64), bookkeeping_counts([prompt], 4, 64)
    assert one["hash_lookups"] >= 16 > four["hash_lookups"] >= 4


def test_block_table_reads_by_hand():
    # Qwen2.5-7B's published config: 28 layers, 4 K/V heads of 128 numbers in bfloat16, so
    # one token's K and V take 2 x 4 x 128 x 2 = 2,048 bytes in each layer.
    reads = block_table_reads(2, 33, "Qwen2.5-7B", page_sizes=(1, 16))
    assert reads["layers"] == 28 and reads["kv_bytes"] == 2 * 33 * 28 * 2048
    one, sixteen = reads[1], reads[16]
    assert (one["entries"], sixteen["entries"]) == (2 * 33, 2 * 3)  # ceil(33 / 16) = 3
    assert (one["table_bytes"], sixteen["table_bytes"]) == (66 * 4, 6 * 4)
    assert one["step_table_bytes"] == 28 * 264
    assert math.isclose(one["share"], 28 * 264 / (2 * 33 * 28 * 2048))
    assert (one["kv_per_entry"], sixteen["kv_per_entry"]) == (2048, 16 * 2048)


def _softmax_attention(q, k, v):
    scores = [float(np.dot(q, key)) / math.sqrt(len(q)) for key in k]
    top = max(scores)
    weights = [math.exp(s - top) for s in scores]
    return np.sum([w * val for w, val in zip(weights, v, strict=True)], axis=0) / sum(weights)


def test_repeating_the_context_scales_the_sum_and_leaves_attention_alone():
    q = np.array([[[4.0, 0.0]]])
    k = np.array([[[1.0, 0.0]], [[0.0, 2.0]]])
    v = np.array([[[3.0, 1.0]], [[1.0, 3.0]]])
    rows = repeated_context(q, k, v, repeats=(1, 3))
    expected = _softmax_attention(q[0, 0], k[:, 0], v[:, 0])
    for row, n in zip(rows, (1, 3), strict=True):
        assert row["length"] == 2 * n
        assert row["naive"].tolist() == [[3.0 * n, 6.0 * n]]  # 1*3 + 0*1, 0*1 + 2*3, n times
        np.testing.assert_allclose(row["dense"][0], expected, rtol=1e-12)
        assert np.isclose(row["max_error"], np.abs(row["naive"][0] - expected).max())
