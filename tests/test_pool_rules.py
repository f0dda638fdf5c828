"""Each rule of the page pool (docs/design.md), shown on a small worked example.

The state-machine test checks the same rules at random against a reference model; these
tests name the rules one by one so a failure says which rule broke.
"""

from __future__ import annotations

import numpy as np
import pytest

from pagedkv import (
    CacheConfig,
    KVCachePool,
    OutOfPagesError,
    PageState,
    UnknownSequenceError,
    block_hashes,
)
from pagedkv.core.free_queue import FreeQueue
from pagedkv.core.hashing import token_bytes
from pagedkv.core.slot_mapping import num_blocks, slot_mapping

from .pools import make

FREE, ACTIVE, CACHED = PageState.FREE, PageState.ACTIVE, PageState.CACHED


def states(pool):
    return [pool.page(p).state.name[0] for p in range(pool.num_pages)]


# docs/design.md rule 2
@pytest.mark.parametrize("page_size", [1, 2, 4, 16])
@pytest.mark.parametrize("caching", [True, False])
def test_pages_are_taken_only_when_the_last_is_full(page_size, caching):
    pool, seqs = make(num_pages=64, page_size=page_size, caching=caching)
    seqs.add("a", [7])
    for n in range(2, 40):
        seqs.append_slot("a", n)
        assert len(seqs.block_table("a")) == -(-n // page_size)
        assert pool.stats.allocations == -(-n // page_size)
        seqs.check_invariants()
    assert seqs.block_table("a") == list(range(-(-39 // page_size)))  # lowest ids first


# docs/design.md, "Vocabulary", slot
def test_slots_are_page_id_times_page_size_plus_offset():
    pool, seqs = make(page_size=4)
    seqs.add("x", [1, 2])  # page 0
    seqs.add("a", [1, 2, 3, 4, 5])  # pages 1, 2
    assert seqs.slot_mapping("a").tolist() == [4, 5, 6, 7, 8]
    assert seqs.append_slot("a", 6) == 9
    seqs.free("x")
    for t in (7, 8):
        seqs.append_slot("a", t)
    assert seqs.append_slot("a", 9) == 0  # page 2 is full, page 0 is the lowest FREE page
    assert seqs.get("a").slot(8) == 0


# docs/design.md, "Vocabulary", slot: the worked examples of slot_mapping.py, by hand
def test_slot_mapping_and_num_blocks_worked_examples():
    assert slot_mapping([7, 2], 4, 5) == 2 * 4 + 1
    assert slot_mapping([7, 2], 4, np.array([0, 3, 4])).tolist() == [28, 31, 8]
    assert slot_mapping(np.array([7, 2]), 4, np.int64(4)) == 8
    assert [num_blocks(n, 4) for n in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]


# docs/design.md rule 1: lowest page id first, whatever order pages come back in
def test_free_queue_hands_out_the_lowest_ids_first():
    queue = FreeQueue([9, 3, 5, 0])
    assert queue.peek_n(2) == [0, 3] and len(queue) == 4
    assert queue.popleft_n(2) == [0, 3]
    queue.extend([8, 1])
    queue.append(4)
    assert queue.page_ids() == [1, 4, 5, 8, 9]
    with pytest.raises(ValueError, match="n must be <= 5 FREE pages, got 6"):
        queue.popleft_n(6)
    assert queue.popleft_n(5) == [1, 4, 5, 8, 9] and len(queue) == 0


def test_free_queue_hands_out_the_lowest_ids_across_gaps():
    queue = FreeQueue(range(10), num_pages=10)
    assert queue.popleft_n(3) == [0, 1, 2]
    queue.popleft_n(4)  # 3, 4, 5, 6
    queue.extend([5, 1, 2])  # returned in any order
    assert queue.peek_n(5) == [1, 2, 5, 7, 8] and queue.popleft_n(5) == [1, 2, 5, 7, 8]
    assert queue.page_ids() == [9] and 9 in queue and 1 not in queue


def test_a_page_holds_only_the_tokens_written_since_it_was_handed_out():
    """A page that turns FREE drops its tokens: it reports none, and a page handed out
    again holds only its new tokens."""
    pool, seqs = make(num_pages=4, page_size=2, caching=False)
    seqs.add("a", [1, 2, 3])
    seqs.free("a")
    assert [pool.page(p).token_ids for p in range(4)] == [[], [], [], []]
    assert seqs.snapshot().fill.tolist() == [0, 0, 0, 0]
    pool.tick()
    [page_id] = pool.get_new_blocks(1)  # a bare allocation: no tokens recorded
    assert page_id == 0 and pool.page(0).num_tokens == 0 and pool.page(0).token_ids == []
    pool.free_blocks([0])
    seqs.add("b", [7])
    assert pool.page(0).token_ids == [7] and pool.page(1).token_ids == []
    seqs.check_invariants()


# docs/design.md rule 1
def test_allocation_prefers_free_pages_lowest_id_first_then_lru_cached():
    pool, seqs = make(num_pages=6, page_size=2)
    seqs.add("a", [1, 2, 3, 4])  # pages 0, 1 (full)
    seqs.add("b", [5, 6, 7])  # pages 2, 3
    seqs.free("a")  # 1 then 0 become CACHED (tail first)
    assert pool.eviction.order() == [1, 0]
    seqs.add("c", [9, 9, 9, 9, 9])  # needs 3 pages: FREE 4, 5, then evict LRU page 1
    assert seqs.block_table("c") == [4, 5, 1]
    assert pool.stats.evictions == 1
    assert pool.eviction.order() == [0]
    assert pool.get_cached_block(block_hashes([1, 2, 3, 4], 2)[1]) is None  # page 1's hash left the index
    assert pool.get_cached_block(block_hashes([1, 2], 2)[0]) == 0


# docs/design.md rules 1 and 9
def test_out_of_pages_is_a_memory_error_and_changes_nothing():
    pool, seqs = make(num_pages=3, page_size=2)
    seqs.add("a", [1, 2, 3, 4, 5])  # all three pages ACTIVE, the last one half full
    before = seqs.snapshot()
    with pytest.raises(MemoryError):
        seqs.add("b", [1])
    assert seqs.snapshot() == before
    seqs.append_slot("a", 6)  # fits into the last page
    full = seqs.snapshot()
    assert full.fill.tolist() == [2, 2, 2] and full.clock == before.clock + 1
    with pytest.raises(OutOfPagesError, match="ACTIVE"):
        seqs.append_slot("a", 7)
    assert seqs.snapshot() == full
    seqs.check_invariants()


# docs/design.md rule 3
def test_ref_counts_equal_block_table_membership_through_fork_and_free():
    pool, seqs = make(page_size=2)
    seqs.add("p", [1, 2, 3])
    seqs.fork("p", "c1")
    seqs.fork("c1", "c2")
    assert [pool.ref_count(p) for p in seqs.block_table("p")] == [3, 3]
    seqs.free("c1")
    assert [pool.ref_count(p) for p in seqs.block_table("p")] == [2, 2]
    seqs.check_invariants()


# docs/design.md rule 4
def test_only_full_pages_are_hashed_and_indexed():
    pool, seqs = make(page_size=4)
    seqs.add("a", [1, 2, 3, 4, 5, 6])
    full, partial = seqs.block_table("a")
    assert pool.page(full).block_hash == block_hashes([1, 2, 3, 4], 4)[0]
    assert pool.page(partial).block_hash is None
    seqs.append_slot("a", 7)
    assert pool.page(partial).block_hash is None
    seqs.append_slot("a", 8)  # fills the page: hashed at once
    assert pool.page(partial).block_hash == block_hashes([1, 2, 3, 4, 5, 6, 7, 8], 4)[1]
    assert pool.get_cached_block(pool.page(partial).block_hash) == partial


# docs/design.md rule 5
def test_prefix_lookup_stops_at_the_first_miss():
    pool, seqs = make(num_pages=16, page_size=2)
    seqs.add("a", [1, 2, 3, 4, 5, 6, 7])
    # Same first and third block, different second block: chaining makes block 3 a miss too.
    assert seqs.add("b", [1, 2, 9, 9, 5, 6, 7]) == 2
    assert seqs.block_table("b")[0] == seqs.block_table("a")[0]
    assert seqs.block_table("b")[2] != seqs.block_table("a")[2]


# docs/design.md rule 5
def test_the_last_prompt_token_is_always_computed():
    pool, seqs = make(num_pages=16, page_size=4)
    seqs.add("a", list(range(8)))
    seqs.free("a")
    # A fully cached 8-token prompt reuses only the first page: the page with token 8 reruns.
    assert seqs.add("b", list(range(8))) == 4
    # ... and that recomputed page duplicates an indexed one: it is not indexed a second time.
    dup = seqs.block_table("b")[1]
    assert pool.page(dup).block_hash == pool.page(1).block_hash
    assert pool.get_cached_block(pool.page(dup).block_hash) == 1
    assert pool.page(1).state is CACHED
    seqs.free("b")
    assert pool.page(dup).state is FREE  # redundant content is not kept
    assert seqs.add("c", list(range(9))) == 8  # 9 tokens: both full pages can now hit


# docs/design.md rule 5
def test_collision_guard_refuses_a_hash_hit_with_other_tokens():
    pool, seqs = make(num_pages=8, page_size=2)
    seqs.add("a", [1, 2, 3])
    seqs.free("a")
    # Simulate a hash collision (same digest, different tokens): overwrite the second
    # token page 0 holds.
    pool.table.token_data[0], pool.table.token_block[0] = token_bytes([1, 99]), 0
    assert pool.page(0).token_ids == [1, 99]
    assert seqs.add("b", [1, 2, 3]) == 0
    assert seqs.block_table("b")[0] != 0


# docs/design.md rule 6
def test_release_is_tail_first_so_the_deepest_page_is_evicted_first():
    pool, seqs = make(num_pages=8, page_size=2)
    seqs.add("a", [1, 2, 3, 4, 5, 6])
    seqs.add("b", [7, 8, 9, 10, 11])
    seqs.free("a")
    seqs.free("b")
    # a's pages 2, 1, 0 then b's 4, 3 (b's partial page 5 becomes FREE)
    assert pool.eviction.order() == [2, 1, 0, 4, 3]
    assert pool.page(5).state is FREE
    snap = seqs.snapshot()
    assert snap.lru_rank.tolist() == [2, 1, 0, 4, 3, -1, -1, -1]


# docs/design.md rules 1 and 6
def test_mru_policy_evicts_the_most_recently_released_page():
    pool, seqs = make(num_pages=3, page_size=2, policy="mru")
    seqs.add("a", [1, 2, 3, 4, 5])
    seqs.free("a")  # page 2 partial -> FREE; 1 then 0 CACHED
    assert pool.eviction.order() == [0, 1]
    seqs.add("b", [8, 8, 8, 8, 8])
    assert seqs.block_table("b") == [2, 0, 1]


# docs/design.md rule 5
def test_prefix_hit_on_a_cached_page_revives_it():
    pool, seqs = make(num_pages=8, page_size=2)
    seqs.add("a", [1, 2, 3, 4, 5])
    seqs.free("a")
    assert pool.eviction.order() == [1, 0]
    assert seqs.add("b", [1, 2, 3, 4, 6]) == 4
    assert pool.page(0).state is ACTIVE and pool.page(1).state is ACTIVE
    assert pool.eviction.order() == []
    assert pool.stats.prefix_hits == 4 and pool.stats.prefix_queries == 10


# docs/design.md rule 5
def test_prefix_hit_on_an_active_page_shares_it():
    pool, seqs = make(num_pages=8, page_size=2)
    seqs.add("a", [1, 2, 3])
    assert seqs.add("b", [1, 2, 5]) == 2
    assert pool.ref_count(0) == 2
    assert seqs.get("b").num_computed_tokens == 2


# docs/design.md rule 7
def test_fork_then_copy_on_write_records_src_and_dst_and_copies_kv():
    pool, seqs = make(num_pages=8, page_size=4)
    seqs.add("a", [1, 2, 3, 4, 5, 6])
    pool.kv_cache[:, :, 1, :2] = 7.0  # K/V of tokens 5, 6 in page 1
    seqs.fork("a", "b")
    assert pool.stats.allocations == 2  # fork takes no page
    slot = seqs.append_slot("b", 9)
    assert seqs.cow_log == [(1, 2)]
    assert seqs.block_table("b") == [0, 2] and slot == 2 * 4 + 2
    assert pool.page(2).token_ids == [5, 6, 9]
    assert (pool.kv_cache[:, :, 2, :2] == 7.0).all()
    assert pool.ref_count(1) == 1 and pool.stats.cow_copies == 1
    assert seqs.append_slot("a", 8) == 1 * 4 + 2  # now the only holder: writes in place
    assert seqs.cow_log == [(1, 2)]
    seqs.check_invariants()


# docs/design.md rule 7
def test_a_full_shared_last_page_needs_no_copy():
    pool, seqs = make(num_pages=8, page_size=2)
    seqs.add("a", [1, 2, 3, 4])
    seqs.fork("a", "b")
    seqs.append_slot("b", 5)
    assert seqs.cow_log == [] and seqs.block_table("b")[:2] == seqs.block_table("a")


# docs/design.md rule 7
@pytest.mark.parametrize("holders_outside", [0, 1])
def test_pages_needed_for_decode_is_exact(holders_outside):
    pool, seqs = make(num_pages=32, page_size=4)
    seqs.add("full", [1, 2, 3, 4])
    seqs.add("p", [5, 6, 7])
    for k in range(3):
        seqs.fork("p", f"p{k}")
    batch = ["full", "p", "p0", "p1", "p2"]
    if holders_outside:
        seqs.fork("p", "bystander")
    needed = seqs.pages_needed_for_decode(batch)
    before = pool.stats.allocations
    for seq in batch:
        seqs.append_slot(seq, 0)
    assert pool.stats.allocations - before == needed == 1 + 4 - 1 + holders_outside


# docs/design.md rule 8
def test_clock_ticks_once_per_successful_operation():
    pool, seqs = make()
    ops = [
        lambda: seqs.add("a", [1, 2, 3]),
        lambda: seqs.append_slot("a", 4),
        lambda: seqs.fork("a", "b"),
        lambda: seqs.free("b"),
        lambda: seqs.free("a"),
        pool.reset_prefix_cache,
    ]
    for n, op in enumerate(ops, 1):
        op()
        assert pool.clock == n
    with pytest.raises(KeyError):
        seqs.free("a")
    assert pool.clock == len(ops)


# docs/design.md rule 8
def test_last_access_follows_the_clock():
    pool, seqs = make(page_size=2)
    seqs.add("a", [1, 2, 3])
    seqs.append_slot("a", 4)
    assert [pool.page(p).last_access for p in seqs.block_table("a")] == [1, 2]


# docs/design.md, "Counts and counters"
def test_counts_usage_and_token_usage():
    pool, seqs = make(num_pages=8, page_size=4)
    seqs.add("a", [1] * 6)  # 2 pages, 6 tokens
    seqs.add("b", [2] * 4)
    seqs.free("b")  # 1 CACHED page
    assert (pool.num_free_pages, pool.num_cached_pages, pool.num_active_pages) == (5, 1, 2)
    assert pool.usage == 2 / 8
    assert pool.token_usage == 6 / 32
    snap = seqs.snapshot()
    assert snap.usage == pool.usage and snap.token_usage == pool.token_usage


# docs/design.md, "Prefix caching off"
def test_prefix_caching_off_never_hashes_or_caches():
    pool, seqs = make(caching=False, page_size=2)
    seqs.add("a", [1, 2, 3, 4])
    seqs.free("a")
    assert states(pool) == ["F"] * 8
    assert seqs.add("b", [1, 2, 3, 4, 5]) == 0
    assert pool.stats.prefix_queries == 0 and pool.stats.prefix_hits == 0
    assert all(pool.page(p).block_hash is None for p in range(8))


# docs/design.md, "Extra key"
def test_extra_key_separates_caches():
    pool, seqs = make(num_pages=16, page_size=2)
    seqs.add("a", [1, 2, 3, 4, 5], extra_key="tenant-1")
    assert seqs.add("b", [1, 2, 3, 4, 5]) == 0
    assert seqs.add("c", [1, 2, 3, 4, 5], extra_key="tenant-1") == 4
    assert seqs.add("d", [1, 2, 3, 4, 5], extra_key="tenant-2") == 0
    # The extra key reaches later pages through the chain, also when they fill during decode.
    seqs.add("e", [1], extra_key="t")
    seqs.append_slot("e", 2)
    assert pool.page(seqs.block_table("e")[0]).block_hash == block_hashes([1, 2], 2, "t")[0]


# docs/design.md, "Reset"
def test_reset_prefix_cache_refuses_while_active_then_frees_cached_pages():
    pool, seqs = make(page_size=2)
    seqs.add("a", [1, 2, 3, 4])
    assert pool.reset_prefix_cache() is False
    seqs.free("a")
    assert pool.num_cached_pages == 2
    assert pool.reset_prefix_cache() is True
    assert pool.num_free_pages == 8 and pool.get_cached_block(block_hashes([1, 2], 2)[0]) is None
    seqs.check_invariants()


# docs/design.md, "Duplicate full pages"
def test_duplicate_is_not_reindexed_after_the_original_is_evicted():
    pool, seqs = make(num_pages=4, page_size=2)
    seqs.add("a", [1, 2, 3])  # page 0 full+indexed, page 1 partial
    seqs.add("b", [1, 2])  # last-token rule: page 2 duplicates page 0, not indexed
    seqs.free("a")
    seqs.add("c", [9, 9, 9, 9, 9])  # FREE 1, 3, then evicts page 0 (the original)
    assert pool.stats.evictions == 1
    seqs.free("b")
    assert pool.page(2).state is FREE  # the duplicate was never indexed: not resurrected
    seqs.check_invariants()


# docs/design.md, "Data flow"
def test_snapshot_is_plain_data_and_a_copy():
    pool, seqs = make(num_pages=6, page_size=2)
    seqs.add("a", [1, 2, 3])
    seqs.fork("a", "b")
    snap = seqs.snapshot()
    assert snap.state.tolist() == [ACTIVE, ACTIVE, FREE, FREE, FREE, FREE]
    assert snap.ref_count.tolist()[:2] == [2, 2]
    assert snap.owner.tolist() == [0, 0, -1, -1, -1, -1]  # the oldest holder
    assert snap.block_tables == {"a": (0, 1), "b": (0, 1)}
    assert isinstance(snap.state, np.ndarray)
    seqs.append_slot("b", 4)
    assert snap.block_tables["b"] == (0, 1)  # unchanged: a copy, not a view


# docs/design.md, "Data flow"
def test_events_report_what_happened():
    pool, seqs = make(num_pages=3, page_size=2)
    events = []
    pool.add_listener(events.append)
    seqs.add("a", [1, 2, 3])  # pages 0 (full), 1
    seqs.fork("a", "b")
    seqs.append_slot("b", 4)  # b copies page 1 to page 2
    seqs.free("a")  # page 1 FREE; page 0 still held by b
    seqs.free("b")  # tail first: page 2 then page 0 become CACHED
    seqs.add("c", [5, 6, 7, 8])  # FREE page 1, then evict LRU page 2
    kinds = [(e.kind, e.page_id) for e in events]
    assert kinds == [
        ("allocate", 0), ("allocate", 1),
        ("fork", 0), ("fork", 1),
        ("allocate", 2), ("cow", 2),
        ("free", 1),
        ("cache", 2), ("cache", 0),
        ("evict", 2), ("allocate", 1), ("allocate", 2),
    ]  # fmt: skip
    assert {e.seq_id for e in events if e.kind == "evict"} == {"c"}


# docs/design.md rule 9
def test_a_listener_that_raises_sees_a_consistent_pool_and_breaks_nothing():
    pool, seqs = make(num_pages=4, page_size=2)
    seen = []

    def nosy(event):
        seqs.check_invariants()  # events arrive only once the operation is complete
        seen.append(event.kind)
        raise RuntimeError("listener failed")

    seqs.add("a", [1, 2, 3])
    pool.add_listener(nosy)
    with pytest.raises(RuntimeError, match="listener failed"):
        seqs.free("a")
    assert "a" not in seqs and seen == ["free"]
    seqs.check_invariants()
    assert pool.eviction.order() == [0]


# docs/design.md, "K/V layout"
def test_kv_cache_passed_in_must_be_c_contiguous():
    cfg = CacheConfig(num_pages=4, page_size=2, num_layers=1, num_kv_heads=1, head_dim=2)
    fortran = np.asfortranarray(np.zeros(cfg.kv_shape, np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        KVCachePool(cfg, kv_cache=fortran)


# docs/design.md rule 4
def test_invariants_catch_a_page_indexed_under_the_wrong_hash():
    view = make(page_size=2)[0].page(0)
    for name in ("block_hash", "page_id", "ref_count", "_table"):
        with pytest.raises(AttributeError, match="read-only view"):  # a Page is a read-only view
            setattr(view, name, 3)
    pool, seqs = make(page_size=2)
    seqs.add("a", [1, 2, 3, 4, 5])
    pool.table.block_hash[seqs.block_table("a")[1]] = b"bogus"  # corrupt the page's metadata
    with pytest.raises(AssertionError, match="hash is not the chain's"):
        seqs.check_invariants()


# docs/design.md, "Admission is all or nothing"
def test_plan_add_changes_nothing_and_add_does_what_it_says():
    pool, seqs = make(num_pages=8, page_size=2)
    seqs.add("a", [1, 2, 3, 4, 5])
    seqs.free("a")
    before = seqs.snapshot()
    plan = seqs.plan_add("b", [1, 2, 3, 4, 9, 9])
    assert seqs.snapshot() == before
    assert plan.hits == [0, 1] and plan.revived == [0, 1] and plan.num_new_pages == 1
    assert seqs.add("b", [1, 2, 3, 4, 9, 9]) == plan.num_cached_tokens == 4
    assert seqs.block_table("b")[:2] == plan.hits


# docs/design.md, "Data flow"
def test_a_removed_listener_hears_nothing_more():
    pool, seqs = make(page_size=2)
    heard = []
    pool.add_listener(heard.append)
    seqs.add("a", [1, 2, 3])
    pool.remove_listener(heard.append)
    seqs.free("a")
    assert [e.kind for e in heard] == ["allocate", "allocate"]


# docs/design.md rules 2 and 7: a decode step of many sequences in one call
def test_append_slots_does_what_append_slot_does_pair_by_pair_and_stops_when_pages_run_out():
    def run(batched):
        pool, seqs = make(num_pages=7, page_size=2)
        seqs.add("a", [1, 2, 3])
        seqs.fork("a", "b")  # shares a's partial last page: the first append copies it
        seqs.add("c", [4, 5])
        pairs = [("a", 6), ("b", 7), ("c", 8), ("a", 9), ("c", 10), ("b", 11), ("c", 12), ("a", 13)]
        if batched == "tokens":  # the same appends, slots not asked for: how many were made
            slots = seqs.append_tokens([s for s, _ in pairs], [t for _, t in pairs])
        elif batched:
            slots = seqs.append_slots([s for s, _ in pairs], [t for _, t in pairs])
        else:
            slots = []
            for seq_id, token in pairs:
                try:
                    slots.append(seqs.append_slot(seq_id, token))
                except OutOfPagesError:
                    break
        seqs.check_invariants()
        return slots, seqs.snapshot(), {s: seqs.get(s).token_ids for s in "abc"}

    slots, snap, tokens = run(batched=True)
    assert (slots, snap, tokens) == run(batched=False)
    assert 0 < len(slots) < 8  # the pool ran out before the last pair
    assert run(batched="tokens") == (len(slots), snap, tokens)


def test_append_slots_checks_every_pair_before_it_appends():
    pool, seqs = make(num_pages=8, page_size=2)
    seqs.add("a", [1, 2, 3])
    before = seqs.snapshot()
    with pytest.raises(UnknownSequenceError):
        seqs.append_slots(["a", "nope"], [4, 5])
    with pytest.raises(TypeError, match=r"token_ids\[1\] must be an int"):
        seqs.append_slots(["a", "a"], [4, 5.0])
    with pytest.raises(ValueError, match="as long"):
        seqs.append_slots(["a"], [4, 5])
    with pytest.raises(ValueError, match=r"token_ids\[2\] must be in \[0, 2\*\*63 - 1\], got -1"):
        seqs.append_tokens(["a", "a", "a"], [4, 5, -1])
    with pytest.raises(TypeError, match=r"token_ids\[0\] must be an int, got True"):
        seqs.append_tokens(["a"], [True])
    with pytest.raises(UnknownSequenceError, match="seq_id 'nope' is not a live"):
        seqs.append_tokens(["nope"], [4])
    assert seqs.snapshot() == before and seqs.get("a").token_ids == [1, 2, 3]
    assert seqs.append_tokens(["a", "a"], [np.int64(4), 2**63 - 1]) == 2  # numpy ints are ints
    assert seqs.get("a").token_ids == [1, 2, 3, 4, 2**63 - 1]
