"""The host tier: K/V read back equals K/V written, and generation through two tiers equals
the reference model recomputing everything (the package's first promise: it is exact)."""

from __future__ import annotations

import numpy as np
import pytest

from pagedkv import CacheConfig, KVCachePool, SequenceManager, TinyLM
from pagedkv.core.hashing import block_hashes
from pagedkv.labs.tiers import HostTier

MODEL = TinyLM()


def _prompts(count: int, shared: int, own: int, seed: int, kinds: int = 4) -> list[list[int]]:
    """`count` prompts, each one of `kinds` shared prefixes of `shared` tokens then `own` tokens."""
    rng = np.random.default_rng(seed)
    prefixes = [rng.integers(0, 256, shared).tolist() for _ in range(kinds)]
    return [prefixes[i % kinds] + rng.integers(0, 256, own).tolist() for i in range(count)]


def _two_tier(
    num_pages: int, page_size: int, host_pages: int, policy: str = "lru", write: str = "write_back"
):
    pool = KVCachePool(MODEL.cache_config(num_pages, page_size))
    seqs = SequenceManager(pool)
    return pool, seqs, HostTier(pool, host_pages * pool.config.kv_bytes // num_pages, policy, write)


def test_kv_read_back_equals_kv_written():
    prompt = _prompts(1, 16, 5, seed=1)[0]
    oracle_pool = KVCachePool(MODEL.cache_config(64, 4))  # roomy: nothing is ever evicted
    MODEL.generate(SequenceManager(oracle_pool), [prompt], 3)
    pool, seqs, tier = _two_tier(8, 4, 32)
    MODEL.generate(seqs, [prompt], 3, seq_ids=["a"])
    for i, other in enumerate(_prompts(3, 0, 21, seed=2)):  # push a's pages out of the pool
        MODEL.generate(seqs, [other], 3, seq_ids=[f"flood{i}"])
    hashes = block_hashes(prompt, 4)[: (len(prompt) - 1) // 4]
    assert all(pool.get_cached_block(h) is None for h in hashes) and all(h in tier.index for h in hashes)
    for h in hashes:  # the offloaded copy is the K/V the model computed
        np.testing.assert_array_equal(
            tier.kv[tier.index[h]], oracle_pool.kv_cache[:, :, oracle_pool.get_cached_block(h)]
        )
    info = tier.load_prefix(prompt)
    assert info == {"gpu_hit_tokens": 0, "host_hit_tokens": 20, "reload_bytes": 5 * tier.page_bytes}
    for h in hashes:  # and the copy back into the pool is the same K/V again
        np.testing.assert_array_equal(
            pool.kv_cache[:, :, pool.get_cached_block(h)],
            oracle_pool.kv_cache[:, :, oracle_pool.get_cached_block(h)],
        )
    seqs.check_invariants()


@pytest.mark.parametrize("page_size", [4, 8])
@pytest.mark.parametrize("policy, write", [("lru", "write_back"), ("mru", "write_through")])
@pytest.mark.parametrize("n", [1, 2])  # n = 2: forked samples copy-on-write under pressure
def test_generation_through_two_tiers_equals_the_reference(page_size, policy, write, n):
    pool, seqs, tier = _two_tier(10 if page_size == 4 else 6, page_size, 24, policy, write)
    prompts = _prompts(8, 2 * page_size, 3, seed=page_size)
    for rnd in range(2):
        for i, prompt in enumerate(prompts):
            tier.load_prefix(prompt)
            hits = pool.stats.prefix_hits
            out = MODEL.generate(seqs, [prompt], 4, seq_ids=[f"{rnd}-{i}"], n=n)
            reference = MODEL.generate_reference(prompt, 4)
            assert all(tokens == reference for tokens in out.values())
            seqs.check_invariants()
            assert pool.stats.prefix_hits >= hits
    if n == 1 or write == "write_through":  # write-back loses prefixes COW overwrote (docstring)
        assert tier.stats.host_hit_tokens > 0 and tier.stats.reload_bytes > 0
    assert tier.stats.offload_bytes == tier.stats.offloaded_pages * tier.page_bytes
    assert len(tier) <= tier.num_pages


def test_a_full_tier_drops_its_own_victims():
    pool, seqs, tier = _two_tier(6, 4, 2)
    for i, prompt in enumerate(_prompts(6, 0, 13, seed=3)):
        MODEL.generate(seqs, [prompt], 2, seq_ids=[i])
    assert len(tier) == 2 and tier.stats.dropped_pages == tier.stats.offloaded_pages - 2


def test_bad_input_names_the_argument():
    pool = KVCachePool(MODEL.cache_config(4, 4))
    page = pool.config.kv_bytes // 4
    with pytest.raises(ValueError, match="capacity_bytes"):
        HostTier(pool, page - 1)  # smaller than a page
    with pytest.raises(ValueError, match="eviction_policy"):
        HostTier(pool, 4 * page, "clock")
    with pytest.raises(ValueError, match="write_policy"):
        HostTier(pool, 4 * page, write_policy="lazy")
    with pytest.raises(TypeError, match="pool"):
        HostTier("pool", 4 * page)


def test_quick_bench_a_larger_tier_serves_more_and_generation_stays_exact():
    from pagedkv.bench import tiers as bench_tiers

    report = bench_tiers.run(quick=True)
    runs = report.data["runs"]
    assert report.data["exact"] is True
    assert runs["0"]["host_hit_rate"] == 0 and runs["0"]["offload_pages"] == 0
    # The tier sits under the pool: it never changes what the pool itself serves.
    assert runs["0"]["gpu_hit_rate"] == runs["64"]["gpu_hit_rate"] == runs["256"]["gpu_hit_rate"]
    assert 0 < runs["64"]["host_hit_rate"] < runs["256"]["host_hit_rate"]
    queried = sum(r.prompt_len for r in bench_tiers.popular_system_prompts(300, 32, 64, 0))
    for run in runs.values():  # host hits are exactly the reloaded pages' tokens
        assert run["reload_pages"] * 16 == pytest.approx(run["host_hit_rate"] * queried)
    assert report.figure() is not None


@pytest.mark.parametrize("option, word", [({"model": "GPT-9"}, "model"), ({"gpu": "TPUv5"}, "gpu")])
def test_bench_bad_names(option, word):
    from pagedkv.bench import tiers as bench_tiers

    with pytest.raises(ValueError, match=word):
        bench_tiers.run(quick=True, **option)


def test_a_detached_tier_no_longer_offloads():
    pool, seqs, tier = _two_tier(6, 4, 8)
    tier.detach()
    for i, prompt in enumerate(_prompts(4, 0, 13, seed=5)):
        MODEL.generate(seqs, [prompt], 2, seq_ids=[i])
    assert pool.stats.evictions > 0 and tier.stats.offloaded_pages == 0 and len(tier) == 0


@pytest.mark.parametrize("algo", ["sha256", "xxhash"])
def test_the_tier_names_blocks_with_the_pools_hash(algo):
    """A prefix offloaded to the host tier comes back whichever block hash the pool uses."""
    pool = KVCachePool(CacheConfig(num_pages=4, page_size=2, prefix_caching_hash_algo=algo))
    seqs = SequenceManager(pool)
    tier = HostTier(pool, 8 * pool.config.kv_bytes // 4)
    prompt = [1, 2, 3, 4, 5]
    seqs.add("a", prompt)
    seqs.free("a")  # [1, 2] and [3, 4] CACHED
    seqs.add("b", [9, 9, 8, 8, 7, 7, 6])
    seqs.free("b")  # evicts them: offloaded to the tier
    assert len(tier) >= 2
    tier.load_prefix(prompt)
    seqs.check_invariants()
    assert seqs.add("c", prompt) == 4  # both full pages of the prefix, reloaded


def test_bench_columns_are_per_request_or_per_reload_as_the_note_says():
    """Hand computation from the run's counts: /req divides by all requests, /reload by the
    requests that reloaded pages, and each reload is costed on its own (a copy of its bytes
    over a 25 GB/s link plus 10 us per page, layer, K or V) before averaging."""
    from pagedkv.bench import tiers as bench_tiers

    report = bench_tiers.run(quick=True)
    page_bytes = 16 * 128 * 1024  # 16 tokens of Llama-3-8B: 32 layers x 8 K/V heads x 128 x 2 x 2 bytes
    assert any("/req: over all 300 requests" in note for note in report.notes)
    for row, run in zip(report.rows[1:], list(report.data["runs"].values())[1:]):
        by_pages = {int(k): n for k, n in run["reloads"].items()}
        reloads = sum(by_pages.values())
        assert sum(p * n for p, n in by_pages.items()) == run["reload_pages"]
        assert 0 < reloads < 300
        reload_ms = sum(n * 1e3 * (p * page_bytes / 25e9 + 2 * 32 * p * 10e-6) for p, n in by_pages.items())
        offload, count, mib, reload, recompute = row[3:]
        assert offload == round(run["offload_pages"] * page_bytes / 300 / 2**20, 2)
        assert count == reloads
        assert mib == round(run["reload_pages"] * 2 / reloads, 2)  # a page is 2 MiB
        assert reload == pytest.approx(reload_ms / reloads, abs=0.006)
        assert 17.5 < recompute < 18  # a prefill of up to 4 pages: one read of the weights + 3 ms


def test_hits_text_reads_the_runs_hit_rates():
    from pagedkv.bench import tiers as bench_tiers

    # made-up runs: the pool's rate the same in all three (then one number), the tier's on top
    runs = {
        "0": {"gpu_hit_rate": 0.25, "host_hit_rate": 0.0},
        "64": {"gpu_hit_rate": 0.25, "host_hit_rate": 0.125},
        "256": {"gpu_hit_rate": 0.25, "host_hit_rate": 0.5},
    }
    text = " ".join(bench_tiers.hits_text(runs).split())
    assert text.startswith("The pool hits 25 % of prompt tokens in all 3 runs, with or without a tier.")
    assert "12.5 % with 64 host pages and 50.0 % with 256 host pages, so 38 % and 75 % in all." in text
    runs["64"]["gpu_hit_rate"] = 0.5
    assert "50 % with 64 host pages" in bench_tiers.hits_text(runs)
