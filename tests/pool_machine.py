"""The rules both Hypothesis state machines drive: add / append / fork / free against a
reference pool, run on the real pool and on the reference in the same order.

A subclass builds `self.pool`, `self.mgr` (the SequenceManager) and `self.ref` (a
ReferencePool) in `__init__` and adds its own `@invariant()`; `agrees_on_pages` checks the
part every machine shares. A failed operation (out of pages) must fail in both and leave
the real pool's snapshot unchanged.
"""

from __future__ import annotations

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, rule

from pagedkv import OutOfPagesError, PageState
from pagedkv.exercises.reference_pool import OutOfPages

# A tiny alphabet makes shared prefixes (and so prefix hits) common.
tokens_st = st.lists(st.integers(0, 2), min_size=1, max_size=14)


class PoolRules(RuleBasedStateMachine):
    seqs = Bundle("seqs")

    def __init__(self):
        super().__init__()
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
            before = self.mgr.snapshot()
            with pytest.raises(OutOfPagesError):
                self.mgr.add(seq, tokens, extra_key=extra)
            assert self.mgr.snapshot() == before
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
            before = self.mgr.snapshot()
            with pytest.raises(OutOfPagesError):
                self.mgr.append_slot(seq, token)
            assert self.mgr.snapshot() == before
            return
        slot = self.mgr.append_slot(seq, token)
        table, page_size = self.ref.tables[seq], self.pool.config.page_size
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

    def agrees_on_pages(self):
        """Every page's state, ref count and tokens, the block tables, the eviction order and
        the counters equal the reference's; the pool's own invariants hold."""
        self.mgr.check_invariants()
        ref, pool = self.ref, self.pool
        for pid in range(pool.num_pages):
            page = pool.page(pid)
            assert page.state is PageState[ref.state(pid)], pid
            assert page.ref_count == ref.ref[pid], pid
            assert page.token_ids == ref.tokens[pid], pid
        assert {s: self.mgr.block_table(s) for s in self.mgr.sequences} == ref.tables
        assert pool.eviction.order() == ref.eviction_order()
        assert pool.stats.as_dict() == ref.stats
