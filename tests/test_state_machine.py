"""Hypothesis drives add / append / fork / free against the plain reference model.

After every step the real pool must agree with the reference on ref counts, page states,
page contents, block tables, the eviction order, the COW record and every counter, and
`check_invariants()` must hold. Failed operations (out of pages) must fail in both and
change nothing in the real pool.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis.stateful import invariant

from pagedkv.exercises.reference_pool import ReferencePool

from .hypothesis_profiles import examples
from .pool_machine import PoolRules
from .pools import make


def make_machine(num_pages: int, page_size: int, caching: bool, policy: str):
    class PoolMachine(PoolRules):
        def __init__(self):
            super().__init__()
            self.pool, self.mgr = make(num_pages, page_size, caching, policy)
            self.ref = ReferencePool(num_pages, page_size, caching, policy)

        @invariant()
        def agrees_with_reference(self):
            self.agrees_on_pages()
            assert self.mgr.cow_log == self.ref.cow_log
            assert self.pool.num_free_pages == len(self.ref.free)
            assert self.pool.num_cached_pages == len(self.ref.evictable)

    PoolMachine.TestCase.settings = settings(
        max_examples=examples(60),
        stateful_step_count=40,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    return PoolMachine


# Pool pressure: 4 pages run out constantly; 12 pages rarely.
TestTightLRU = make_machine(num_pages=4, page_size=2, caching=True, policy="lru").TestCase
TestRoomyLRU = make_machine(num_pages=12, page_size=3, caching=True, policy="lru").TestCase
TestTightMRU = make_machine(num_pages=5, page_size=2, caching=True, policy="mru").TestCase
TestNoCaching = make_machine(num_pages=6, page_size=2, caching=False, policy="lru").TestCase
TestPageSizeOne = make_machine(num_pages=8, page_size=1, caching=True, policy="lru").TestCase
