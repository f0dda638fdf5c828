"""The waiting queues: the priority heap admits in (priority, arrival) order, as a plain
sorted list (the oracle) does, through adds, pops, requeues and removals."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pagedkv.engine.request import FCFSQueue, PriorityQueue, RequestState

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(-3, 3)),
        st.tuples(st.just("pop"), st.just(0)),
        st.tuples(st.just("remove"), st.integers(0, 50)),
    ),
    max_size=60,
)


@given(OPS)
def test_priority_queue_matches_a_sorted_list(ops):
    queue, oracle, arrivals = PriorityQueue(), [], 0
    for op, value in ops:
        if op == "add":
            state = RequestState(f"r{arrivals}", [1], 1, arrivals, priority=value)
            arrivals += 1
            queue.add(state)
            oracle.append(state)
        elif op == "pop" and oracle:
            oracle.sort(key=lambda s: (s.priority, s.arrival))
            assert queue.pop() is oracle.pop(0)
        elif op == "remove" and oracle:
            victim = oracle.pop(value % len(oracle))
            queue.remove(victim)
        ordered = sorted(oracle, key=lambda s: (s.priority, s.arrival))
        assert list(queue) == ordered and len(queue) == len(ordered)
        if ordered:
            assert queue[0] is ordered[0] and queue[len(ordered) - 1] is ordered[-1]


@pytest.mark.parametrize("queue_type", [FCFSQueue, PriorityQueue])
def test_removing_a_request_not_queued_raises_and_changes_nothing(queue_type):
    queue = queue_type()
    queued, other = RequestState("a", [1], 1, 0), RequestState("b", [1], 1, 1)
    queue.add(queued)
    with pytest.raises(ValueError):
        queue.remove(other)
    assert list(queue) == [queued]
