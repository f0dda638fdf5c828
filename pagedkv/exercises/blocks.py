"""Checkers for the block-table exercises: `slot_mapping` and `pages_needed`.

The oracles are the package's own: `SequenceManager.slot_mapping` (what vLLM's model runner
builds for `reshape_and_cache`) and the block table a real `SequenceManager` grows one
token at a time (vLLM's `KVCacheManager.allocate_slots`). Cases run smallest first, so the
first failure shown is the smallest one.

Leaves out: slot mappings of several sequences at once (the batch is a concatenation).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from pagedkv.core.config import CacheConfig
from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.exercises.guard import Failure, call, wrong

SLOT_RULE = (
    "page p owns the slots p * page_size up to p * page_size + "
    "page_size - 1; a position's page is the block-table entry of its logical block, and its "
    "offset is where it sits inside that block"
)
PAGES_RULE = (
    "a new page is taken only when the last page is full, so a "
    "sequence holds just enough pages for its tokens and an append needs a page exactly "
    "when every slot of the pages it holds is taken"
)


def grow_scattered(seqs: SequenceManager, rng: np.random.Generator, num_pages: int, length: int) -> None:
    """Grow sequence "learner" to `length` tokens in a pool whose every page a one-token filler
    holds, freeing a random filler whenever it needs a page: its block table comes out in
    random page order, as in a pool that has served for a while (the pool itself always takes
    its lowest FREE page, so a fresh pool would give an ascending table).

    Example: length 3, page_size 1 -> block_table like [5, 0, 3].
    """
    fillers = [f"filler{p}" for p in range(num_pages)]
    for filler in fillers:
        seqs.add(filler, [0])
    order = [fillers[i] for i in rng.permutation(num_pages)]
    size = seqs.pool.config.page_size
    for n in range(length):
        if n % size == 0:
            seqs.free(order.pop())
        if n == 0:
            seqs.add("learner", [0])
        else:
            seqs.append_slot("learner", 0)


def _slot_cases() -> list[tuple[dict[str, Any], list[int]]]:
    """(inputs, expected) pairs: sequences grown in a real pool with block tables in random
    page order, expected slots from `SequenceManager.slot_mapping`."""
    rng = np.random.default_rng(0)
    cases = []
    for num_blocks in (1, 2, 3):
        for page_size in (1, 2, 3, 4):
            config = CacheConfig.bookkeeping(8, page_size, enable_prefix_caching=False)
            seqs = SequenceManager(KVCachePool(config))
            length = num_blocks * page_size - int(rng.integers(0, page_size))
            grow_scattered(seqs, rng, 8, length)
            positions = sorted(rng.choice(length, size=min(length, 4), replace=False).tolist())
            inputs: dict[str, Any] = dict(
                block_table=seqs.block_table("learner"), positions=positions, page_size=page_size
            )
            cases.append((inputs, seqs.slot_mapping("learner")[positions].tolist()))
    cases.sort(key=lambda c: (len(c[0]["positions"]), len(c[0]["block_table"]), c[0]["page_size"]))
    return cases


def _slot_hint(case: dict, got: list[int]) -> str:
    table, positions, size = case["block_table"], case["positions"], case["page_size"]
    if got == positions:
        return "you returned the positions themselves: the block table decides where a token lives"
    if got == [table[p // size] + p % size for p in positions]:
        return "a page id counts pages, a slot counts token slots: page p's first slot is not p"
    if got == [table[0] * size + p for p in positions]:
        return "a sequence's pages are not contiguous: each logical block has its own page"
    if all(p % size < len(table) for p in positions) and got == [
        table[p % size] * size + p // size for p in positions
    ]:
        return "logical block and offset are swapped"
    return ""


def check_slot_mapping(fn: Callable) -> str:
    """fn(block_table, positions, page_size) -> the slot of every position."""
    name, cases = "slot_mapping", _slot_cases()
    for case, expected in cases:
        table, size = case["block_table"], case["page_size"]
        got = call(name, fn, case)
        if not isinstance(got, (list, tuple, np.ndarray)) or len(got) != len(expected):
            raise Failure(
                f"✗ {name}: return a list with one slot per position ({len(expected)} here); "
                f"got {got!r}\n  inputs:   block_table={table}, positions={case['positions']}, "
                f"page_size={size}"
            )
        got = [int(s) if isinstance(s, (int, np.integer)) else s for s in got]
        if got != expected:
            raise wrong(name, case, expected, got, SLOT_RULE, _slot_hint(case, got))
    return f"✓ {name}: all {len(cases)} cases right (page sizes 1-4, block tables in random page order)."


def _grown_tables(page_size: int, max_tokens: int) -> list[int]:
    """Pages a real SequenceManager holds after 1..max_tokens tokens (index n - 1)."""
    config = CacheConfig.bookkeeping(max_tokens, page_size, enable_prefix_caching=False)
    seqs = SequenceManager(KVCachePool(config))
    seqs.add("learner", [0])
    held = [len(seqs.block_table("learner"))]
    for _ in range(max_tokens - 1):
        seqs.append_slot("learner", 0)
        held.append(len(seqs.block_table("learner")))
    return held


def _pages_hint(num_tokens: int, page_size: int, got: object) -> str:
    if isinstance(got, float):
        return "a number of pages is an int: / gives a float"
    if got == num_tokens:
        return "that is one page per token: a page holds page_size tokens"
    if got == num_tokens // page_size:
        return "a partly filled last page is still a page the sequence holds"
    if got == num_tokens // page_size + 1:
        return "when the last page is exactly full, no extra page is needed yet"
    return ""


def check_pages_needed(fn: Callable) -> str:
    """fn(num_tokens, page_size) -> pages a sequence of num_tokens tokens holds."""
    name, max_tokens = "pages_needed", 13
    tables = {size: _grown_tables(size, max_tokens) for size in (1, 2, 3, 4, 16)}
    count = 0
    for num_tokens in range(1, max_tokens + 1):
        for page_size, held in tables.items():
            case = dict(num_tokens=num_tokens, page_size=page_size)
            expected = held[num_tokens - 1]
            got = call(name, fn, case)
            count += 1
            if isinstance(got, bool) or not isinstance(got, (int, np.integer)) or got != expected:
                raise wrong(name, case, expected, got, PAGES_RULE, _pages_hint(num_tokens, page_size, got))
    return (
        f"✓ {name}: all {count} cases agree with the block tables a real pool grows. So an "
        "append needs a page exactly when pages_needed(n + 1, page_size) > pages_needed(n, page_size)."
    )
