"""arc_losses: the list each ARC victim left, and where a prefix lookup stops, on a hand-worked trace."""

from __future__ import annotations

from pagedkv.labs.arc_losses import _TracedARC, arc_lost_hits, lost_at
from pagedkv.labs.hit_rate_lab import replay
from pagedkv.labs.lab_workloads import lab_workload


def test_traced_arc_records_the_list_each_victim_left() -> None:
    arc = _TracedARC()
    arc.attach(2, lambda page_id: f"block {page_id}")
    arc.add_all([1, 2])  # T1: [1, 2]
    arc.remove(1)  # a hit revives page 1 ...
    arc.add(1)  # ... released again: T2: [1]
    assert arc.pop_victim() == 2  # T1 holds 1 page > p = 0: evict from T1
    assert arc.pop_victim() == 1  # T1 empty: evict from T2
    assert arc.evicted_from == {"block 2": "T1", "block 1": "T2"}
    assert lost_at(["block 1", "block 2"], arc.seen, arc.evicted_from) == "T2"
    assert lost_at(["block 3", "block 1"], arc.seen, arc.evicted_from) is None  # never cached
    arc.add(2)  # block 2 cached again: no longer lost
    assert arc.evicted_from == {"block 1": "T2"}
    assert lost_at(["block 2"], arc.seen, arc.evicted_from) is None
    assert lost_at(["block 2", "block 1"], arc.seen, arc.evicted_from) == "T2"


def test_arc_lost_hits_replays_plain_arc() -> None:
    chat = lab_workload("chat")
    lost, tally, p_top = arc_lost_hits(chat, 2048)
    assert tally["evicted from T1"] + tally["evicted from T2"] == replay(chat, 2048, "arc").evictions
    assert (lost["T1"], lost["T2"]) == (15, 34) and p_top == 128
