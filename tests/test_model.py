"""TinyLM through the paged cache is token-identical to recomputing everything without one.

The oracle is `forward_reference` / `generate_reference`: dense attention over the whole
token list every step, no pool, no slots, no block tables.
"""

from __future__ import annotations

import numpy as np
import pytest

from pagedkv import KVCachePool, SequenceManager, TinyLM

PROMPTS = ["The KV cache holds pages.", "The KV cache holds", "paged attention", "x"]


@pytest.fixture(scope="module")
def model():
    return TinyLM(seed=1)


@pytest.mark.parametrize("page_size", [1, 4, 16])
@pytest.mark.parametrize("caching", [True, False])
def test_generation_matches_recompute(model, page_size, caching):
    pool = KVCachePool(model.cache_config(128, page_size, enable_prefix_caching=caching))
    seqs = SequenceManager(pool)
    out = model.generate(seqs, PROMPTS, 12)
    for i, prompt in enumerate(PROMPTS):
        assert out[f"req{i}"] == model.generate_reference(prompt, 12)
    seqs.check_invariants()


def test_prefill_and_decode_logits_match_recompute(model):
    pool = KVCachePool(model.cache_config(32, 4))
    seqs = SequenceManager(pool)
    tokens = model.encode("hello paged world")
    seqs.add("a", tokens)
    logits = model.forward(seqs, ["a"])[0]
    for _ in range(10):
        ref = model.forward_reference(tokens)[-1]
        np.testing.assert_allclose(logits, ref, atol=1e-5, rtol=0)
        token = int(logits.argmax())
        tokens.append(token)
        seqs.append_slot("a", token)
        logits = model.forward(seqs, ["a"])[0]
    seqs.check_invariants()


def test_prefix_hits_give_the_same_tokens_and_skip_the_cached_prefix(model):
    pool = KVCachePool(model.cache_config(64, 4))
    seqs = SequenceManager(pool)
    first = model.generate(seqs, ["shared system prompt: hi"], 8)
    assert pool.num_cached_pages > 0
    hits_before = pool.stats.prefix_hits
    second = model.generate(seqs, ["shared system prompt: bye"], 8, seq_ids=["b"])
    assert pool.stats.prefix_hits - hits_before == 20  # 'shared system prompt' = 20 tokens = 5 pages
    assert first["req0"] == model.generate_reference("shared system prompt: hi", 8)
    assert second["b"] == model.generate_reference("shared system prompt: bye", 8)


def test_identical_prompt_fully_cached_still_runs_the_last_token(model):
    pool = KVCachePool(model.cache_config(64, 4))
    seqs = SequenceManager(pool)
    prompt = "sixteen tokens!!"  # exactly 4 full pages
    a = model.generate(seqs, [prompt], 6, seq_ids=["a"])
    b = model.generate(seqs, [prompt], 6, seq_ids=["b"])
    assert a["a"] == b["b"] == model.generate_reference(prompt, 6)
    assert pool.stats.prefix_hits == 12  # 3 pages: the page with the last token is recomputed


def test_parallel_samples_match_independently_seeded_reference_runs(model):
    """n samples: sample k matches a reference run seeded seed + k (vLLM v1's n)."""
    pool = KVCachePool(model.cache_config(64, 4))
    seqs = SequenceManager(pool)
    prompt = "forked prompt"  # 13 tokens: 3 full pages shared through the prefix cache
    out = model.generate(seqs, [prompt], 7, n=3, temperature=0.8, seed=5, free=False)
    assert pool.stats.prefix_hits == 2 * 12 and not seqs.cow_log
    for k in range(3):
        assert out[f"req0.{k}"] == model.generate_reference(prompt, 7, 0.8, seed=5 + k)
    seqs.check_invariants()


def test_generation_stays_exact_through_evictions(model):
    """A small pool forces evictions of cached pages between requests."""
    pool = KVCachePool(model.cache_config(12, 4))
    seqs = SequenceManager(pool)
    prompts = ["alpha beta gamma", "alpha beta delta", "zeta eta theta!", "alpha beta gamma"]
    for i, prompt in enumerate(prompts):
        out = model.generate(seqs, [prompt], 10, seq_ids=[f"r{i}"])
        assert out[f"r{i}"] == model.generate_reference(prompt, 10)
        seqs.check_invariants()
    assert pool.stats.evictions > 0


def test_batch_of_mixed_lengths_matches_recompute(model):
    """Prefill and decode of several sequences in one forward call (ragged batch)."""
    pool = KVCachePool(model.cache_config(64, 4))
    seqs = SequenceManager(pool)
    out = model.generate(seqs, ["a", "bb bb", "ccc ccc ccc", "dddd dddd dddd dddd"], 9)
    for i, p in enumerate(["a", "bb bb", "ccc ccc ccc", "dddd dddd dddd dddd"]):
        assert out[f"req{i}"] == model.generate_reference(p, 9)


def test_float64_logits_match_to_round_off():
    model = TinyLM(seed=2, dtype="float64")
    pool = KVCachePool(model.cache_config(32, 4))
    seqs = SequenceManager(pool)
    tokens = model.encode("double precision")
    seqs.add("a", tokens)
    logits = model.forward(seqs, ["a"])[0]
    np.testing.assert_allclose(logits, model.forward_reference(tokens)[-1], atol=1e-12, rtol=0)


def test_model_refuses_pool_of_the_wrong_shape(model):
    from pagedkv import CacheConfig

    pool = KVCachePool(CacheConfig(num_pages=8, page_size=4, num_layers=3))
    seqs = SequenceManager(pool)
    seqs.add("a", [1, 2, 3])
    before = seqs.snapshot()
    with pytest.raises(ValueError, match="cache_config"):
        model.forward(seqs, ["a"])
    assert seqs.snapshot() == before


def test_a_prompt_the_pool_cannot_hold_is_refused_before_anything_is_admitted(model):
    """The second prompt cannot fit the pool: nothing is admitted, nothing is cached."""
    pool = KVCachePool(model.cache_config(8, 4))
    seqs = SequenceManager(pool)
    with pytest.raises(ValueError, match="grows to 43 tokens, more than the pool's 8 pages"):
        model.generate(seqs, ["sixteen tokens!!", "x" * 40], 4)
    assert len(seqs) == 0 and pool.num_cached_pages == 0
    seqs.check_invariants()


def test_a_batch_blocked_by_pages_held_elsewhere_frees_what_it_admitted(model):
    pool = KVCachePool(model.cache_config(8, 4))
    seqs = SequenceManager(pool)
    seqs.add("held", list(range(20)))  # 5 of the 8 pages, outside the generation
    with pytest.raises(RuntimeError, match="no progress"):
        model.generate(seqs, ["sixteen tokens!!"], 4)  # needs 4 pages, 3 are left
    assert list(seqs.sequences) == ["held"]
    seqs.check_invariants()


def test_prepare_builds_the_context_the_model_reads():
    """As in the example of pagedkv.engine.context: two new tokens of one sequence beside a prompt."""
    from pagedkv import CacheConfig
    from pagedkv.engine.context import prepare

    seqs = SequenceManager(KVCachePool(CacheConfig.bookkeeping(8, 4)))
    seqs.add("a", [1, 2, 3, 4])
    seqs.add("b", [5, 6, 7])
    seqs.set_computed("a", 4)
    seqs.append_slot("a", 8)
    seqs.append_slot("a", 9)
    ctx = prepare(seqs, ["a", "b"])
    slots = [seqs.get("a").slot(4), seqs.get("a").slot(5), *seqs.slot_mapping("b").tolist()]
    assert ctx.token_ids.tolist() == [8, 9, 5, 6, 7] and ctx.positions.tolist() == [4, 5, 0, 1, 2]
    assert ctx.slot_mapping.tolist() == slots
    assert ctx.query_start_loc.tolist() == [0, 2, 5] and ctx.context_lens.tolist() == [6, 3]
    assert ctx.block_tables == [seqs.block_table("a"), seqs.block_table("b")]
    assert not ctx.is_decode and ctx.last_rows.tolist() == [1, 4]
