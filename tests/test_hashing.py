"""Chained block hashes: full blocks only, chained, salted by the extra key, stable across processes."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import numpy as np
import pytest
import xxhash

from pagedkv import CacheConfig, KVCachePool, SequenceManager, block_hashes, hash_block_tokens
from pagedkv.core.config import ConfigError
from pagedkv.core.hashing import ROOT_HASH


def test_chain_matches_a_hand_written_sha256_chain():
    tokens = [3, 1, 4, 1, 5, 9, 2]
    parent = ROOT_HASH
    want = []
    for i in range(3):  # 3 full blocks of 2; token 2 is a partial block
        block = b"".join(t.to_bytes(8, "little") for t in tokens[2 * i : 2 * i + 2])
        parent = hashlib.sha256(parent + block).digest()
        want.append(parent)
    assert block_hashes(tokens, 2) == want


def test_xxhash_chain_matches_a_hand_written_xxh3_128_chain():
    tokens = [3, 1, 4, 1, 5, 9, 2]
    parent = ROOT_HASH
    want = []
    for i in range(3):
        block = b"".join(t.to_bytes(8, "little") for t in tokens[2 * i : 2 * i + 2])
        parent = xxhash.xxh3_128(parent + block).digest()
        want.append(parent)
    assert block_hashes(tokens, 2, algo="xxhash") == want
    assert want != block_hashes(tokens, 2)  # a different H, different names
    assert hash_block_tokens(want[0], tokens[2:4], algo="xxhash") == want[1]


def test_the_hash_algo_changes_names_not_hits():
    """Both algos admit, hit and evict identically on the same requests; only digests differ."""
    rng = np.random.default_rng(0)
    shared = rng.integers(0, 1000, 24).tolist()
    prompts = [shared + rng.integers(0, 1000, int(rng.integers(1, 20))).tolist() for _ in range(12)]
    results = {}
    for algo in ("sha256", "xxhash"):
        pool = KVCachePool(CacheConfig.bookkeeping(12, 4, prefix_caching_hash_algo=algo))
        seqs = SequenceManager(pool)
        hits = []
        for i, prompt in enumerate(prompts):
            hits.append(seqs.add(i, prompt))
            seqs.check_invariants()  # recomputes every chain with the pool's algo
            seqs.free(i)
        results[algo] = (hits, pool.stats.as_dict(), seqs.snapshot().lru_rank.tolist())
        assert pool.page(0).block_hash in {*block_hashes(prompts[-1], 4, algo=algo), None}
    assert results["sha256"] == results["xxhash"] and sum(results["sha256"][0]) > 0


def test_an_unknown_hash_algo_is_refused():
    with pytest.raises(ConfigError, match="prefix_caching_hash_algo must be one of"):
        CacheConfig.bookkeeping(4, 2, prefix_caching_hash_algo="md5")
    with pytest.raises(TypeError, match="prefix_caching_hash_algo"):
        CacheConfig.bookkeeping(4, 2, prefix_caching_hash_algo=256)


def test_a_hash_names_the_whole_prefix():
    a = block_hashes([1, 2, 3, 4], 2)
    b = block_hashes([9, 9, 3, 4], 2)
    assert a[0] != b[0] and a[1] != b[1]  # same second block, different prefix
    assert hash_block_tokens(a[0], [3, 4]) == a[1]
    assert hash_block_tokens(None, [1, 2]) == a[0]


def test_partial_blocks_have_no_hash():
    assert block_hashes([1, 2, 3], 4) == []
    assert len(block_hashes(list(range(9)), 4)) == 2


@pytest.mark.parametrize("key", ["adapter", b"salt", 7])
def test_extra_key_changes_every_block_through_the_chain(key):
    plain = block_hashes(list(range(8)), 2)
    salted = block_hashes(list(range(8)), 2, key)
    assert all(p != s for p, s in zip(plain, salted))
    assert hash_block_tokens(None, [0, 1], key) == salted[0]
    assert hash_block_tokens(salted[0], [2, 3]) == salted[1]


def test_extra_keys_of_different_types_do_not_collide():
    assert len({block_hashes([1, 2], 2, k)[0] for k in ("7", b"7", 7, None)}) == 4
    with pytest.raises(TypeError, match="extra_key"):
        block_hashes([1, 2], 2, 1.5)


def test_lists_and_arrays_hash_alike():
    assert block_hashes([5, 6, 7, 8], 2) == block_hashes(np.array([5, 6, 7, 8], dtype=np.int32), 2)


@pytest.mark.parametrize("algo", ["sha256", "xxhash"])
def test_digests_are_the_same_in_another_process(algo):
    code = f"from pagedkv import block_hashes; print(block_hashes([1, 2, 3, 4], 2, algo={algo!r})[1].hex())"
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert outs == {block_hashes([1, 2, 3, 4], 2, algo=algo)[1].hex()}
