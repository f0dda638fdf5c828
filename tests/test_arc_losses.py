"""arc_losses: the list each ARC victim left, and where a prefix lookup stops, on a hand-worked trace."""

from __future__ import annotations

import pytest

from pagedkv.labs.arc_losses import _TracedARC, arc_beside_lru, loss_split_text, lost_at, p_steps_text
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


@pytest.mark.parametrize(("stream", "size"), [("chat", 2048), ("chat", 1024), ("rag", 2048), ("zipf", 1024)])
def test_arc_beside_lru_splits_exactly_the_gap_between_the_two_replays(stream: str, size: int) -> None:
    """The oracle: LRU's and ARC's hit tokens from the ordinary replay. The causes (T2, T1,
    other) minus ARC's gains must add up to their difference exactly."""
    requests = lab_workload(stream)
    split, tally, _ = arc_beside_lru(requests, size)
    lru, arc = replay(requests, size, "lru"), replay(requests, size, "arc")
    assert split["T2"] + split["T1"] + split["other"] - split["gain"] == lru.hit_tokens - arc.hit_tokens
    assert tally["evicted from T1"] + tally["evicted from T2"] == arc.evictions


def test_arc_beside_lru_on_chat_at_2048_p_reaches_the_whole_cache() -> None:
    split, _, p_top = arc_beside_lru(lab_workload("chat"), 2048)
    assert p_top == 2048 // 16
    assert split["other"] == 0  # a lookup ARC cuts short stops at content ARC evicted


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


def test_p_steps_text_prints_one_step_a_line_and_p_ends_at_its_moves() -> None:
    """Worked by hand: 2 B1 ghosts grew p by 4 (2 each), 3 B2 ghosts shrank it by 3 (1 each),
    so p, from 0, ends at 4 - 3 = 1."""
    tally = {"B1 ghost back": 2, "B2 ghost back": 3, "p grown": 4.0, "p shrunk": 3.0, "p at the end": 1.0}
    tally |= {"evicted from T1": 5, "evicted from T2": 7}
    lines = p_steps_text(tally, 4.0, 8).split("\n")
    assert [line[:2] for line in lines] == ["1.", "2.", "3.", "4."]
    assert lines[0].endswith("grew p by 4 pages in all (after the cap), about 2 each")
    assert lines[1].endswith("shrank p by 3 pages in all, about 1 each")
    assert lines[2] == "3. p rose to 4 of 8 pages; it ended at 1 = 4 - 3"
    assert lines[3] == "4. ARC's victims: 12, of them 7 from T2 (revived)"


def test_loss_split_text_adds_up_in_tokens_and_points() -> None:
    """Worked by hand, of 1,000 prompt tokens: 60 lost at T2's content (3 requests), 20 at T1's
    (1), 30 gained (2): net 60 + 20 - 30 = 50 tokens, 5.0 points = 6.0 + 2.0 - 3.0."""
    split = {"T2": 60, "T2 requests": 3, "T1": 20, "T1 requests": 1, "gain": 30, "gain requests": 2}
    lines = loss_split_text(split, 1000).split("\n")
    assert lines[0] == (
        "5. requests where ARC hits fewer prompt tokens than LRU: 4;"
        " their lookup stopped at content T2 gave up: 3, T1 gave up: 1"
    )
    assert lines[1] == "6. prompt tokens they lose, at content T2 gave up: 60, T1 gave up: 20"
    assert lines[2] == "7. requests where ARC hits more: 2, gaining 30 tokens"
    assert lines[3] == (
        "8. net: 60 + 20 - 30 = 50 tokens of 1,000: 5.0 points = 6.0 (T2) + 2.0 (T1) - 3.0 (gains)"
    )
    with_other = loss_split_text({**split, "other": 10, "other requests": 1}, 1000).split("\n")
    assert with_other[0].endswith("T1 gave up: 1, neither: 1")
    assert with_other[3].startswith("8. net: 60 + 20 + 10 - 30 = 60 tokens")
