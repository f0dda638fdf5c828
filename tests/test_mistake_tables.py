"""Notebook 08's printed tables: checked against lines written out by hand."""

from __future__ import annotations

from pagedkv.labs.mistake_tables import bookkeeping_table, lru_steps_table, repeated_context_table


def test_bookkeeping_table_prints_each_count_and_its_ratio():
    base = {"tokens": 1600, "hit_tokens": 0, "full_pages": 0, "missed_lookups": 0}
    costs = {
        1: {**base, "table_entries": 1600, "allocations": 300, "hash_lookups": 3000, "hit_tokens": 1300},
        16: {**base, "table_entries": 100, "allocations": 60, "hash_lookups": 150, "missed_lookups": 1},
    }
    lines = bookkeeping_table(costs).splitlines()
    assert len(lines) == 9
    assert lines[0].split() == ["cost", "(1,600", "tokens)", "pages", "of", "1", "pages", "of", "16", "ratio"]
    assert lines[1].split() == ["block-table", "entries", "1,600", "100", "16.0x"]
    assert lines[2].split() == ["page", "allocations", "300", "60", "5.0x"]
    assert lines[3].split() == ["hash", "lookups", "3,000", "150", "20.0x"]
    assert lines[4] == ""  # a second small table: the counts behind them, without a ratio
    assert lines[5].split() == ["counts", "behind", "them", "pages", "of", "1", "pages", "of", "16"]
    assert lines[6:] == [
        "prefix-hit tokens          1,300             0",
        "full pages taken               0             0",
        "missed lookups                 0             1",
    ]


def test_lru_steps_table_numbers_the_three_steps():
    steps = {
        "x": {"pages_a": [0, 1], "free": 3, "lru_order": [1, 0], "other_pages": 4, "evicted": [1], "hits": 4}
    }
    assert lru_steps_table(steps).splitlines() == [
        "x:",
        "  1. request_A's pages [0, 1]; after it finishes: 3 FREE, LRU order [1, 0]",
        "     (page 0 is victim number 2)",
        "  2. the other request needs 4 pages: 3 FREE and 1 evicted, pages [1]",
        "  3. request_B's prefix hits: 4 tokens",
    ]


def test_repeated_context_table_rounds_dense_and_error_to_two_places():
    import numpy as np

    rows = [
        {
            "length": 2,
            "naive": np.array([[3.0, 6.0]]),
            "dense": np.array([[2.894, 1.106]]),
            "max_error": 4.894,
        }
    ]
    assert repeated_context_table(rows).splitlines()[1] == (
        "        2  [3, 6]                 [2.89, 1.11]      4.89"
    )
