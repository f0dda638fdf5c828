"""Hypothesis drives add / append / fork / free against the plain reference model.

After every step the real pool must agree with the reference on ref counts, page states,
page contents, block tables, the eviction order, the COW record and every counter, and
`check_invariants()` must hold. Failed operations (out of pages) must fail in both and
change nothing in the real pool.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, rule

from pagedkv import OutOfPagesError, PageState
from pagedkv.reference_pool import OutOfPages, ReferencePool

from .pools import make

# A tiny alphabet makes shared prefixes (and so prefix hits) common.
tokens_st = st.lists(st.integers(0, 2), min_size=1, max_size=14)


def make_machine(num_pages: int, page_size: int, caching: bool, policy: str):
    class PoolMachine(RuleBasedStateMachine):
        seqs = Bundle("seqs")

        def __init__(self):
            super().__init__()
            self.pool, self.mgr = make(num_pages, page_size, caching, policy)
            self.ref = ReferencePool(num_pages, page_size, caching, policy)
            self.next_id = 0

        def _new_id(self) -> str:
            self.next_id += 1
            return f"s{self.next_id}"

        @rule(target=seqs, tokens=tokens_st, extra=st.sampled_from([None, None, "salt"]))
        def add(self, tokens, extra):
            seq = self._new_id()
            try:
                expected = self.ref.add(seq, tokens, extra)
            except OutOfPages:
                before = self.pool.snapshot()
                with pytest.raises(OutOfPagesError):
                    self.mgr.add(seq, tokens, extra_key=extra)
                assert self.pool.snapshot() == before
                return None
            assert self.mgr.add(seq, tokens, extra_key=extra) == expected
            return seq

        @rule(seq=seqs, token=st.integers(0, 2))
        def append(self, seq, token):
            if seq is None or seq not in self.ref.tables:
                return
            try:
                self.ref.append(seq, token)
            except OutOfPages:
                before = self.pool.snapshot()
                with pytest.raises(OutOfPagesError):
                    self.mgr.append_slot(seq, token)
                assert self.pool.snapshot() == before
                return
            slot = self.mgr.append_slot(seq, token)
            table = self.ref.tables[seq]
            assert slot == table[-1] * page_size + (len(self.ref.seq_tokens[seq]) - 1) % page_size

        @rule(target=seqs, parent=seqs)
        def fork(self, parent):
            if parent is None or parent not in self.ref.tables:
                return None
            child = self._new_id()
            self.ref.fork(parent, child)
            self.mgr.fork(parent, child)
            return child

        @rule(seq=consumes(seqs))
        def free(self, seq):
            if seq is None or seq not in self.ref.tables:
                return
            self.ref.free_seq(seq)
            self.mgr.free(seq)

        @invariant()
        def agrees_with_reference(self):
            self.pool.check_invariants()
            ref, pool = self.ref, self.pool
            for pid in range(num_pages):
                page = pool.page(pid)
                assert page.state is PageState[ref.state(pid)], pid
                assert page.ref_count == ref.ref[pid], pid
                assert page.token_ids == ref.tokens[pid], pid
            assert {s: self.mgr.block_table(s) for s in self.mgr.sequences} == ref.tables
            assert pool.eviction.order() == ref.eviction_order()
            assert pool.stats.as_dict() == ref.stats
            assert self.mgr.cow_log == ref.cow_log
            assert pool.num_free_pages == len(ref.free)
            assert pool.num_cached_pages == len(ref.evictable)

    PoolMachine.TestCase.settings = settings(
        max_examples=60,
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
