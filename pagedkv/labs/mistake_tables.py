"""Notebook 08's printed tables, formatted here so its cells stay short.

- `bookkeeping_table`: the counts of `mistake_costs.bookkeeping_counts` for pages of 1 and 16.
- `block_table_table`: the counts of `mistake_costs.block_table_reads`, one row per quantity.
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


def bookkeeping_table(costs: Mapping[int, Mapping[str, int]], by_one: int, by_more: int) -> str:
    """The three costs of pages of 1 against pages of 16 (`costs[1]`, `costs[16]`), their
    ratio, the counts they are made of, and how many later requests share their first own
    letter (`by_one`) or more (`by_more`) with an earlier request."""
    one, sixteen = costs[1], costs[16]
    lines = [f"{one['tokens']:,} prompt tokens   pages of 1   pages of 16   ratio"]
    for key, name in _BOOKKEEPING_ROWS:
        lines.append(f"{name:19}   {one[key]:10,}   {sixteen[key]:11,}   {one[key] / sixteen[key]:5.1f}x")
    lines.append(
        f"prefix-hit tokens: {one['hit_tokens']:,} and {sixteen['hit_tokens']:,};   "
        f"full pages: {one['full_pages']:,} and {sixteen['full_pages']:,};   "
        f"missed lookups: {one['missed_lookups']} and {sixteen['missed_lookups']}"
    )
    lines.append(
        f"requests 2-40 whose own letters start like an earlier request's: "
        f"{by_one} by 1 letter, {by_more} by 2 or more"
    )
    return "\n".join(lines)


def block_table_table(reads: Mapping[Any, Any], batch: int, context: int, model: str) -> str:
    """One decode step's block-table reads next to its K/V reads (`reads` from
    `block_table_reads` with page sizes 1 and 16): one row per quantity, one column per page
    size."""
    layers = reads["layers"]
    rows = (
        ("block-table entries read per layer", lambda r: f"{r['entries']:,}"),
        ("block-table bytes per layer", lambda r: f"{r['table_bytes'] / 2**10:,.0f} KiB"),
        (
            f"block-table bytes read per step, all {layers} layers",
            lambda r: f"{r['step_table_bytes'] / 2**20:.1f} MiB",
        ),
        ("share of the K/V read per step", lambda r: f"{r['share']:.3%}"),
        ("K/V of one layer per entry", lambda r: f"{r['kv_per_entry'] / 2**10:.0f} KiB"),
    )
    lines = [
        f"{model}, {batch} requests of {context:,} tokens: {reads['kv_bytes'] / 2**30:.0f} GiB "
        f"of K/V read per decode step, {layers} layers",
        f"{'':46}   pages of 1   pages of 16",
    ]
    for name, cell in rows:
        lines.append(f"{name:46}   {cell(reads[1]):>10}   {cell(reads[16]):>11}")
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
