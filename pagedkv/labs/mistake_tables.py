"""Notebook 08's printed tables, formatted here so its cells stay short.

- `bookkeeping_table`: the counts of `mistake_costs.bookkeeping_counts` for pages of 1 and 16.
- `repeated_context_table`: the rows of `mistake_costs.repeated_context`, one per length.
- `lru_steps_table`: the steps of `naive.lru_steps` for each cache, numbered as in the text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_BOOKKEEPING_ROWS = (
    ("table_entries", "block-table entries"),
    ("allocations", "page allocations"),
    ("hash_lookups", "hash lookups"),
)
# Counts the costs above are made of, printed without a ratio.
_SOURCE_ROWS = (
    ("hit_tokens", "prefix-hit tokens"),
    ("full_pages", "full pages taken"),
    ("missed_lookups", "missed lookups"),
)


def bookkeeping_table(costs: Mapping[int, Mapping[str, int]]) -> str:
    """Two small tables for pages of 1 against pages of 16 (`costs[1]`, `costs[16]`): the three
    costs with their ratio, then, after a blank line, the counts they come from (no ratio)."""
    one, sixteen = costs[1], costs[16]
    lines = [f"cost ({one['tokens']:,} tokens)   pages of 1   pages of 16   ratio"]
    for key, name in _BOOKKEEPING_ROWS:
        lines.append(f"{name:19}   {one[key]:10,}   {sixteen[key]:11,}   {one[key] / sixteen[key]:5.1f}x")
    lines += ["", f"{'counts behind them':19}   {'pages of 1':>10}   {'pages of 16':>11}"]
    for key, name in _SOURCE_ROWS:
        lines.append(f"{name:19}   {one[key]:10,}   {sixteen[key]:11,}")
    return "\n".join(lines)


def lru_steps_table(steps: Mapping[str, Mapping[str, Any]]) -> str:
    """The LRU test's three steps (from `lru_steps`) for each named cache: request_A's pages,
    the FREE count and LRU order once it finished, the pages the other request evicted, and
    request_B's prefix-hit tokens."""
    lines = []
    for name, s in steps.items():
        lines += [
            f"{name}:",
            f"  1. request_A's pages {s['pages_a']}; after it finishes: {s['free']} FREE, "
            f"LRU order {s['lru_order']}",
            f"     (page 0 is victim number {list(s['lru_order']).index(0) + 1})",
            f"  2. the other request needs {s['other_pages']} pages: {s['free']} FREE and "
            f"{len(s['evicted'])} evicted, pages {s['evicted']}",
            f"  3. request_B's prefix hits: {s['hits']} tokens",
        ]
    return "\n".join(lines)


def repeated_context_table(rows: list[Mapping[str, Any]]) -> str:
    """One line per context length: the naive output (integers), dense attention's output and
    their largest difference, both to 2 decimals."""
    lines = ["positions  naive: sum of k * v   dense attention   max |naive - dense|"]
    for row in rows:
        naive, dense = row["naive"][0], row["dense"][0]
        lines.append(
            f"{row['length']:9}  {str(naive.astype(int).tolist()):20}   "
            f"[{dense[0]:.2f}, {dense[1]:.2f}]      {row['max_error']:.2f}"
        )
    return "\n".join(lines)
