"""A policy traced step by step, for the eviction lab's worked examples.

A few pool events are played on a policy outside any pool: pages cached with some content,
a prefix hit that revives a page (its request then releases it again), an eviction. After
each step the policy's `queues()` are recorded, so a notebook can print how its lists move.
Content is named by a short string (A, B, ...), standing for a block hash: that is what a
ghost remembers once its page is gone.

Leaves out: ACTIVE pages that stay ACTIVE (every revived page is released in the same step).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pagedkv.core.eviction import EvictionPolicy


def trace_policy(policy: EvictionPolicy, num_pages: int, steps: Sequence[str]) -> list[dict[str, Any]]:
    """Play `steps` on `policy` (a new one, with a `queues()` method) for a pool of
    `num_pages` pages; one row per step: its text, the page evicted ("page:content", or
    "") and `policy.queues()` after it. A step is "cache 1:A 2:B" (pages 1 and 2 turn
    CACHED holding content A and B), "hit 1" (a prefix hit revives page 1, its request
    releases it again) or "evict" (one `pop_victim()` call: there is no pool, so no FREE
    page is taken first). Each row also keeps "content", every page's content at that step."""
    content: dict[int, str] = {}
    policy.attach(num_pages, content.__getitem__)
    rows = []
    for step in steps:
        verb, *args = step.split()
        victim = ""
        if verb == "cache":
            pages = []
            for arg in args:
                page, name = arg.split(":")
                content[int(page)] = name
                pages.append(int(page))
            policy.add_all(pages)
        elif verb == "hit":
            policy.remove(int(args[0]))
            policy.add(int(args[0]))
        elif verb == "evict":
            page_id = policy.pop_victim()
            victim = f"{page_id}:{content[page_id]}"
        else:
            raise ValueError(f"a step is 'cache PAGE:CONTENT ...', 'hit PAGE' or 'evict', got {step!r}")
        queues = policy.queues()  # type: ignore[attr-defined]
        rows.append({"step": step, "victim": victim, "content": dict(content), **queues})
    return rows


def arc_table(rows: list[dict[str, Any]]) -> str:
    """`trace_policy`'s rows for ARC as a table: the step, the victim, T1 and T2 (pages as
    page:content, oldest first), B1 and B2 (content, oldest first) and p."""
    lines = [f"{'':3s}{'step':18s}{'evicts':8s}{'T1':13s}{'T2':13s}{'B1':7s}{'B2':7s}p"]
    for i, row in enumerate(rows, 1):
        t1, t2 = (" ".join(f"{p}:{row['content'][p]}" for p in row[q]) for q in ("T1", "T2"))
        b1, b2 = (" ".join(str(k) for k in row[q]) for q in ("B1", "B2"))
        lines.append(f"{i:<3d}{row['step']:18s}{row['victim']:8s}{t1:13s}{t2:13s}{b1:7s}{b2:7s}{row['p']:g}")
    return "\n".join(lines)


def s3fifo_drain(policy: EvictionPolicy, num_pages: int | None = None) -> list[str]:
    """Evict every page of an S3-FIFO `policy` with `pop_victim()`, one line per victim:
    "evict 3 from S:  S [4, 5, 6]  M [1, 2]  G ['block 3']" (queues after it). If the first
    search moves pages from S to M before it finds a victim, that move is a line of its own
    (queues after the move).
    Given the pool's `num_pages`, each line gets a second line, "  why, rule N: ...", the rule
    that chose it, numbered as in notebook 10b's key (1: S's head with a count above 0 moves
    to M; 2: S's head with count 0 is evicted; 3: with S under its share, M's head with count
    0 is evicted; 4: with M empty, the search starts at S), and, for a victim from S, whether G
    was then cut ("G cut to M's 2 pages") or already within its bound ("G within M's 2 pages:
    nothing cut")."""
    lines: list[str] = []
    why = num_pages is not None
    share = policy.SMALL_SHARE * (num_pages or 0)  # type: ignore[attr-defined]
    while len(policy):
        before = policy.queues()  # type: ignore[attr-defined]
        victim = policy.pop_victim()
        after = policy.queues()  # type: ignore[attr-defined]
        moved = [p for p in after["M"] if p not in before["M"]]
        if moved and not lines:
            held = len(before["S"])
            reason = (
                f"why, rule 1: before it, S held {held} >= its share {share:g}: S's head, count above 0"
                " -> to M's tail, the search goes on at S's new head"
            )
            before = {**before, "S": [p for p in before["S"] if p not in moved], "M": before["M"] + moved}
            state = f"S {before['S']}  M {before['M']}  G {before['G']}"
            lines.append(f"no victim yet, {moved} from S to M, count 0:  {state}")
            lines[-1] += f"\n  {reason}" if why else ""
        came_from = "S" if victim in before["S"] else "M"
        lines.append(f"evict {victim} from {came_from}:  S {after['S']}  M {after['M']}  G {after['G']}")
        if why:
            dropped = len(before["G"]) + 1 > len(after["G"])  # G lost a hash to its bound
            small, main = len(before["S"]), len(before["M"])
            lines[-1] += "\n  " + _s3_reason(small, main, share, came_from, len(after["M"]), dropped)
    return lines


def _s3_reason(small: int, main: int, share: float, came_from: str, main_after: int, dropped: bool) -> str:
    """Why S3-FIFO took its victim from `came_from`, by rule number, given S's and M's sizes
    before it, and how far G was cut: to as many hashes as M holds pages after it (`main_after`),
    at least one; `dropped` says whether G lost a hash (else it was already within that bound)."""
    if came_from == "M":
        kept = "G is cut only when S evicts"
        held = f"before it, S held {small} < its share {share:g}"
        return f"why, rule 3: {held}: M's head, count 0 -> evicted ({kept})"
    pages = f"M's {main_after} page{'s' if main_after > 1 else ''}"
    bound = "at least one hash" if main_after == 0 else pages
    cut = f"G cut to {bound}" if dropped else f"G within {bound}: nothing cut"
    if main == 0 and small < share:
        return f"why, rules 4 and 2: M is empty: S's head, count 0 -> evicted, hash into G ({cut})"
    held = f"before it, S held {small} >= its share {share:g}"
    return f"why, rule 2: {held}: S's head, count 0 -> evicted, hash into G ({cut})"
