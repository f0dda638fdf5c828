"""The model of vLLM v1's hash map (notebook 09, section 5) against the pool it models."""

from pagedkv.core.config import CacheConfig
from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.labs.radix_vs_hash import orphan_pages
from pagedkv.labs.vllm_hash_map import HashToPages, replay_corner


def test_every_page_per_hash_keeps_the_chain_whole() -> None:
    vllm = replay_corner(every_page=True)
    assert vllm == {"index": {(1, 2): [1], (1, 2, 3, 4): [2]}, "orphans": [], "third_finds": [1, 2]}


def test_one_page_per_hash_matches_the_pools_hash_chain() -> None:
    model = replay_corner(every_page=False)
    assert model == {"index": {(1, 2, 3, 4): [2]}, "orphans": [2], "third_finds": []}
    # the oracle: pagedkv's own pool, the same corner, page 0 evicted by a request of 6 pages
    pool = KVCachePool(CacheConfig.bookkeeping(8, 2, prefix_index="hash"))
    seqs = SequenceManager(pool)
    seqs.add("first", [1, 2])
    seqs.free("first")
    seqs.add("second", [1, 2])
    seqs.append_slot("second", 3)
    seqs.append_slot("second", 4)
    seqs.add("other", list(range(10, 22)))  # 5 FREE pages, then page 0
    assert 0 in seqs.block_table("other") and seqs.block_table("second") == [1, 2]
    assert orphan_pages(pool) == model["orphans"]
    assert seqs.plan_add("third", [1, 2, 3, 4, 5]).num_cached_tokens == 2 * len(model["third_finds"])


def test_evicting_one_of_two_pages_keeps_the_hash() -> None:
    index = HashToPages(every_page=True, page_size=2)
    assert index.insert((7, 8), 3) and index.insert((7, 8), 4)
    index.evict(3)
    assert index.lookup([7, 8, 9]) == [4] and index.orphans() == []
    index.evict(4)
    assert index.pages == {} and index.lookup([7, 8]) == []
    one = HashToPages(every_page=False, page_size=2)
    assert one.insert((7, 8), 3) and not one.insert((7, 8), 4)
