"""The model of vLLM v1's hash map (notebook 09b, section 1) against the pool it models."""

from pagedkv.core.sequence import SequenceManager
from pagedkv.labs.radix_vs_hash import orphan_pages
from pagedkv.labs.vllm_hash_map import HashToPages, replay_corner

from .test_chains import corner_pool


def test_every_page_per_hash_keeps_the_chain_whole() -> None:
    vllm = replay_corner(every_page=True)
    assert vllm == {"index": {(1, 2): [1], (1, 2, 3, 4): [2]}, "orphans": [], "third_finds": [1, 2]}


def test_one_page_per_hash_matches_the_pools_hash_chain() -> None:
    model = replay_corner(every_page=False)
    assert model == {"index": {(1, 2, 3, 4): [2]}, "orphans": [2], "third_finds": []}
    # the oracle: pagedkv's own pool, the same corner, page 0 evicted by a request of 6 pages
    pool = corner_pool("hash", evict_original=True)
    seqs = SequenceManager(pool)
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
