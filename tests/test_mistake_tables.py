"""Notebook 08's printed tables: checked against lines written out by hand."""

from __future__ import annotations

from pagedkv.labs.mistake_tables import block_table_table, bookkeeping_table, lru_steps_table


def test_bookkeeping_table_prints_each_count_and_its_ratio():
    base = {"tokens": 1600, "hit_tokens": 0, "full_pages": 0, "missed_lookups": 0}
    costs = {
        1: {**base, "table_entries": 1600, "allocations": 300, "hash_lookups": 3000, "hit_tokens": 1300},
        16: {**base, "table_entries": 100, "allocations": 60, "hash_lookups": 150, "missed_lookups": 1},
    }
    lines = bookkeeping_table(costs, by_one=5, by_more=2).splitlines()
    assert lines[0].startswith("1,600 prompt tokens")
    assert lines[1].split() == ["block-table", "entries", "1,600", "100", "16.0x"]
    assert lines[2].split() == ["page", "allocations", "300", "60", "5.0x"]
    assert lines[3].split() == ["hash", "lookups", "3,000", "150", "20.0x"]
    assert "prefix-hit tokens: 1,300 and 0;" in lines[4] and "missed lookups: 0 and 1" in lines[4]
    assert lines[5].endswith("5 by 1 letter, 2 by 2 or more")


def test_block_table_table_has_one_row_per_quantity_and_a_column_per_page_size():
    reads = {
        "layers": 2,
        "kv_bytes": 4 * 2**30,
        1: {
            "entries": 1024,
            "table_bytes": 4096,
            "step_table_bytes": 2 * 2**20,
            "share": 0.5,
            "kv_per_entry": 2048,
        },
        16: {
            "entries": 64,
            "table_bytes": 256,
            "step_table_bytes": 2**19,
            "share": 0.125,
            "kv_per_entry": 32768,
        },
    }
    lines = block_table_table(reads, batch=8, context=128, model="M").splitlines()
    assert lines[0] == "M, 8 requests of 128 tokens: 4 GiB of K/V read per decode step, 2 layers"
    assert lines[1].split() == ["pages", "of", "1", "pages", "of", "16"]
    assert lines[2].split()[-2:] == ["1,024", "64"]
    assert lines[3].split()[-4:] == ["4", "KiB", "0", "KiB"]
    assert "all 2 layers" in lines[4] and lines[4].split()[-4:] == ["2.0", "MiB", "0.5", "MiB"]
    assert lines[5].split()[-2:] == ["50.000%", "12.500%"]
    assert lines[6].split()[-4:] == ["2", "KiB", "32", "KiB"]
    assert max(map(len, lines)) <= 90  # fits the notebook's width


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
