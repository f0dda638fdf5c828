"""Eviction policies: an ordered set with O(1) add, remove-from-the-middle and pop-victim."""

from __future__ import annotations

import pytest

from pagedkv import LRUEvictionPolicy, MRUEvictionPolicy
from pagedkv.core.eviction import make_eviction_policy


@pytest.mark.parametrize("cls,victims", [(LRUEvictionPolicy, [1, 3, 4]), (MRUEvictionPolicy, [4, 3, 1])])
def test_order_and_victims(cls, victims):
    policy = cls()
    for page_id in (1, 2, 3):
        policy.add(page_id)
    policy.remove(2)  # a prefix hit revives a page in the middle
    policy.add_all([4])
    assert len(policy) == 3 and 2 not in policy and 4 in policy
    assert policy.order() == victims
    assert [policy.pop_victim() for _ in range(3)] == victims
    assert policy.order() == []
    with pytest.raises(KeyError):
        policy.pop_victim()


@pytest.mark.parametrize("cls", [LRUEvictionPolicy, MRUEvictionPolicy])
def test_a_page_is_never_in_the_set_twice(cls):
    policy = cls()
    policy.add(5)
    with pytest.raises(ValueError, match="already evictable"):
        policy.add(5)
    with pytest.raises(ValueError, match="already evictable"):
        policy.add_all([6, 5])
    assert policy.order() == [5]
    with pytest.raises(KeyError):
        policy.remove(7)


def test_pop_victims_in_bulk_matches_one_by_one():
    a, b = LRUEvictionPolicy(), LRUEvictionPolicy()
    a.add_all(list(range(10)))
    b.add_all(list(range(10)))
    assert a.pop_victims(4) == [b.pop_victim() for _ in range(4)] == [0, 1, 2, 3]
    with pytest.raises(KeyError):
        a.pop_victims(7)
    assert a.order() == b.order()


def test_many_operations_stay_bounded():
    """No stale entries: after 100k add/remove cycles the set holds exactly its members."""
    policy = LRUEvictionPolicy()
    for i in range(100_000):
        policy.add(i % 50)
        policy.remove(i % 50)
    assert len(policy) == 0 and policy.order() == [] and policy.release_order() == []


def test_factory():
    assert isinstance(make_eviction_policy("lru"), LRUEvictionPolicy)
    assert isinstance(make_eviction_policy("mru"), MRUEvictionPolicy)
    with pytest.raises(ValueError, match="eviction_policy must be one of"):
        make_eviction_policy("random")
