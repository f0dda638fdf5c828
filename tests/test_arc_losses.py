"""arc_losses: the list each ARC victim left, and where a prefix lookup stops, on a hand-worked trace."""

from __future__ import annotations

from pagedkv.labs.arc_losses import _TracedARC, arc_lost_hits, lost_at, lru_lost_lookups
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


def test_traced_arc_counts_returning_ghosts_and_how_far_they_move_p() -> None:
    """Worked by hand from ARC's rules: a B1 ghost grows p by max(1, |B2|/|B1|), a B2 ghost
    shrinks it by max(1, |B1|/|B2|) (an empty list counting 1, counted after the ghost left)."""
    arc = _TracedARC()
    arc.attach(8, lambda page_id: f"x{page_id}")
    for key in ("x1", "y1", "z1"):
        arc._b1.remember(key, 8)  # noqa: SLF001 (a state built by hand)
    for key in ("x2", "y2", "z2", "w2", "v2"):
        arc._b2.remember(key, 8)  # noqa: SLF001
    arc.add(1)  # x1 in B1: |B1| = 2 after it leaves, |B2| = 5: p = 0 + 5/2
    assert arc.p == 2.5
    arc.add(2)  # x2 in B2: |B1| = 2, |B2| = 4: p shrinks by max(1, 2/4) = 1
    assert arc.p == 1.5
    arc.add(3)  # x3 is no ghost: nothing counted
    assert (arc.tally["B1 ghost back"], arc.tally["B2 ghost back"]) == (1, 1)
    assert arc.p_moves == {"p grown": 2.5, "p shrunk": 1.0} and arc.p_top == 2.5  # p fell to 1.5


def test_arc_lost_hits_replays_plain_arc() -> None:
    chat = lab_workload("chat")
    lost, tally, p_top = arc_lost_hits(chat, 2048)
    assert tally["evicted from T1"] + tally["evicted from T2"] == replay(chat, 2048, "arc").evictions
    assert (lost["T1"], lost["T2"]) == (15, 34) and p_top == 128


def test_the_10b_arc_quiz_answer_is_what_arc_computes() -> None:
    """10b-check-arc: p = 2, |B1| = 3, |B2| = 2; content in B2 is cached again -> p = 0, in T2."""
    import json
    from pathlib import Path

    import pagedkv
    from pagedkv.labs.eviction_policies import ARCEvictionPolicy

    arc = ARCEvictionPolicy()
    arc.attach(8, lambda page_id: "d" if page_id == 1 else f"x{page_id}")
    arc.p = 2.0
    for key in "abc":
        arc._b1.remember(key, 8)  # noqa: SLF001 (a state built by hand)
    for key in "de":
        arc._b2.remember(key, 8)  # noqa: SLF001
    arc.add(1)
    assert arc.p == 0.0 and arc.queues()["T2"] == [1]
    bank = json.loads((Path(pagedkv.__file__).parent / "data" / "questions.json").read_text())
    assert bank["quiz"]["10b-check-arc"]["questions"][0]["answer"] == "0"


def test_lru_lost_lookups_counts_lookups_stopped_at_evicted_content() -> None:
    """Worked by hand: 3 pages of 4 tokens. A (8 prompt tokens + 1 output) leaves its 2 full
    pages cached; B evicts both; A again stops at its evicted first page (lost 1) and evicts
    B's; B again stops at B's (lost 2); C is new content, never cached: not lost."""
    from pagedkv.labs.lab_workloads import LabRequest

    a = LabRequest("a", list(range(1, 9)), [100])
    b = LabRequest("b", list(range(11, 19)), [100])
    c = LabRequest("c", list(range(21, 29)), [100])
    assert lru_lost_lookups([a, b, c], 12, page_size=4) == 0
    assert lru_lost_lookups([a, b, a, b, c], 12, page_size=4) == 2


def test_lost_hits_text_prints_one_step_a_line_and_p_ends_at_its_moves() -> None:
    """Worked by hand: 2 B1 ghosts grew p by 4 (2 each), 3 B2 ghosts shrank it by 3 (1 each),
    so p, from 0, ends at 4 - 3 = 1."""
    from collections import Counter

    from pagedkv.labs.arc_losses import lost_hits_text

    tally = {"B1 ghost back": 2, "B2 ghost back": 3, "p grown": 4.0, "p shrunk": 3.0, "p at the end": 1.0}
    tally |= {"evicted from T1": 5, "evicted from T2": 7}
    lines = lost_hits_text(Counter({"T1": 1, "T2": 2}), tally, 4.0, 8, 2).split("\n")
    assert [line[:2] for line in lines] == ["1.", "2.", "3.", "4.", "5."]
    assert lines[0].endswith("grew p by 4 pages in all, about 2 each")
    assert lines[1].endswith("shrank p by 3 pages in all, about 1 each")
    assert lines[2] == "3. p rose to 4 of 8 pages; it ended at 1 = 4 - 3"
    assert lines[4].endswith("3 (under LRU: 2); 2 of the 3 at content T2 gave up")
