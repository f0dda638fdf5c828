"""Notebook 10's worked ARC trace against a trace worked by hand from ARC's rules, and the
readers of `bench eviction`'s curves (close pairs, best policy per size) against curves
made up by hand."""

from __future__ import annotations

import pytest

from pagedkv.bench import Report
from pagedkv.bench.eviction import best_by_size, close_pairs
from pagedkv.labs.eviction_policies import ARCEvictionPolicy, S3FIFOEvictionPolicy
from pagedkv.labs.policy_trace import arc_table, trace_policy

STEPS = [
    "cache 1:A 2:B 3:C",
    "hit 1",
    "evict",
    "evict",
    "cache 2:B",
    "cache 3:D",
    "evict",
    "cache 4:A",
    "evict",
]

# Worked by hand: (victim, T1, T2, B1, B2, p) after each step, on a pool of 4 pages.
BY_HAND = [
    ("", [1, 2, 3], [], [], [], 0),  # new content: T1
    ("", [2, 3], [1], [], [], 0),  # a prefix hit: page 1 moves to T2
    ("2:B", [3], [1], ["B"], [], 0),  # T1 holds 2 > p = 0: T1's oldest, its hash into B1
    ("3:C", [], [1], ["B", "C"], [], 0),  # T1 holds 1 > 0: T1 again
    ("", [], [1, 2], ["C"], [], 1),  # B was a B1 ghost: T2, p grows by max(|B2|/|B1|, 1) = 1
    ("", [3], [1, 2], ["C"], [], 1),  # new content D: T1
    ("1:A", [3], [2], ["C"], ["A"], 1),  # T1 holds 1, not more than p = 1: T2's oldest
    ("", [3], [2, 4], ["C"], [], 0),  # A, now on page 4, was a B2 ghost: T2, p shrinks by 1
    ("3:D", [], [2, 4], ["C", "D"], [], 0),  # T1 holds 1 > p = 0: T1's oldest
]


def test_arc_trace_matches_the_trace_worked_by_hand():
    rows = trace_policy(ARCEvictionPolicy(), 4, STEPS)
    got = [(r["victim"], r["T1"], r["T2"], r["B1"], r["B2"], r["p"]) for r in rows]
    assert got == BY_HAND
    table = arc_table(rows).splitlines()
    assert len(table) == 1 + len(STEPS) and max(map(len, table)) <= 90
    assert table[5].split() == ["5", "cache", "2:B", "1:A", "2:B", "C", "1"]
    assert table[7].split() == ["7", "evict", "1:A", "3:D", "2:B", "C", "A", "1"]


def test_trace_of_s3fifo_evicts_as_worked_by_hand():
    steps = ["cache 1:A 2:B", "hit 1", "hit 2", "cache 3:C 4:D 5:E 6:F", *["evict"] * 6]
    rows = trace_policy(S3FIFOEvictionPolicy(), 20, steps)
    assert [r["victim"] for r in rows[4:]] == ["3:C", "4:D", "5:E", "1:A", "2:B", "6:F"]
    assert rows[6]["G"] == ["D", "E"] and rows[-1]["G"] == ["F"]


def test_trace_refuses_an_unknown_step():
    with pytest.raises(ValueError, match="'cache PAGE:CONTENT"):
        trace_policy(ARCEvictionPolicy(), 4, ["hold 1"])


def made_up_report() -> Report:
    curves = {
        "a": {"lru": [0.1, 0.3], "leaf-lru": [0.1, 0.3], "arc": [0.104, 0.5], "lfu": [0.2, 0.496]},
        "b": {"lru": [0.6, 0.7], "leaf-lru": [0.6, 0.7], "arc": [0.5, 0.65], "lfu": [0.5, 0.69]},
    }
    return Report(title="t", columns=[], rows=[], data={"curves": curves, "sizes": [1024, 2048]})


def test_close_pairs_lists_every_pair_within_half_a_point_but_leaf_lru():
    # a, 1024: arc 10.4, lru 10.0 (0.4 apart), lfu 20.0; a, 2048: arc 50.0, lfu 49.6;
    # b, 1024: arc = lfu 50.0; b, 2048: lru 70.0, lfu 69.0 (1 point: not close), arc 65.0
    assert close_pairs(made_up_report()) == [
        ("a", 1024, "arc", "lru", 10.4, 10.0),
        ("a", 2048, "arc", "lfu", 50.0, 49.6),
        ("b", 1024, "arc", "lfu", 50.0, 50.0),
    ]
    assert ("b", 2048, "lru", "lfu", 70.0, 69.0) in close_pairs(made_up_report(), points=1.0)


def test_best_by_size_follows_the_highest_rate_at_each_size():
    assert best_by_size(made_up_report()) == {"a": ["lfu", "arc"], "b": ["lru", "lru"]}


def test_s3fifo_drain_prints_each_victim_and_its_queue():
    from pagedkv.core.eviction import make_eviction_policy
    from pagedkv.labs.policy_trace import s3fifo_drain

    s3 = make_eviction_policy("s3fifo")
    s3.attach(20, lambda page_id: f"h{page_id}")
    s3.add_all([1, 2])
    for page_id in (1, 2):
        s3.remove(page_id)
        s3.add(page_id)
    s3.add_all([3, 4, 5, 6])
    lines = s3fifo_drain(s3)
    assert lines[0] == "no victim yet, [1, 2] from S to M, count 0:  S [3, 4, 5, 6]  M [1, 2]  G []"
    assert [line.split(":")[0] for line in lines[1:]] == [
        "evict 3 from S", "evict 4 from S", "evict 5 from S",
        "evict 1 from M", "evict 2 from M", "evict 6 from S",
    ]  # fmt: skip
    assert lines[-1].endswith("G ['h6']")


def test_s3fifo_drain_why_names_the_rule_that_chose_each_victim():
    from pagedkv.core.eviction import make_eviction_policy
    from pagedkv.labs.policy_trace import s3fifo_drain

    s3 = make_eviction_policy("s3fifo")
    s3.attach(20, lambda page_id: f"h{page_id}")  # 20 pages: S's share is 2
    s3.add_all([1, 2])
    for page_id in (1, 2):
        s3.remove(page_id)
        s3.add(page_id)
    s3.add_all([3, 4, 5, 6])
    whys = [line.split("\n  why, ")[1] for line in s3fifo_drain(s3, num_pages=20)]
    # the rule numbers of notebook 10b's key: 1 moves S's revived head to M, 2 evicts S's head,
    # 3 evicts M's head while S is under its share, 4 starts at S once M is empty
    assert [w.split(":")[0] for w in whys] == ["rule 1"] + ["rule 2"] * 3 + ["rule 3"] * 2 + ["rules 4 and 2"]
    whys = [w.split(": ", 1)[1] for w in whys]
    # S's size before each victim, counted by hand from the rules: 6, then 4, 3, 2 after
    # 1 and 2 moved to M; then S held 1 (under its share), then M is empty
    assert whys[0].startswith("before it, S held 6 >= its share 2")
    assert whys[0].endswith("to M's tail, the search goes on at S's new head")
    assert [w.split(":")[0] for w in whys[1:4]] == [
        f"before it, S held {n} >= its share 2" for n in (4, 3, 2)
    ]
    kept = "before it, S held 1 < its share 2: M's head, count 0 -> evicted (G is cut only when S evicts)"
    assert whys[4] == whys[5] == kept
    assert whys[6].startswith("M is empty")
    # G's bound after each victim from S: M's pages then (2 while pages 1 and 2 are in M),
    # at least one once M is empty. G gains one hash per victim from S: 1 and 2 hashes fit
    # M's 2 pages, so nothing is cut; the third victim's hash makes 3, cut to 2
    within, cut = "G within M's 2 pages: nothing cut)", "G cut to M's 2 pages)"
    assert [w.split("(")[1] for w in whys[1:4]] == [within, within, cut]
    assert whys[6].endswith("(G cut to at least one hash)")
