"""Notebook 09, section 3: what each page evicted for a request was before it, during it and
after it, read from `pagedkv.labs.radix_vs_hash.generate_one_at_a_time`'s rows; and what a
pool's prefix index does with each page of a block table (`page_kinds`, sections 3 and 5)."""

from __future__ import annotations

from collections.abc import Sequence

from pagedkv.core.pool import KVCachePool
from pagedkv.labs.radix_vs_hash import RequestRow, orphan_pages


def page_roles(
    rows_by_index: dict[str, list[RequestRow]],
    i: int,
    prompt_pages: int,
    orphans: dict[str, list[int]],
    page_size: int = 4,
) -> list[tuple[int, str, str, str]]:
    """One row per page request `i` (from 0) evicted and reused, in its block order:
    (page id, its role before the request, its role during it, its state after release).
    A role names a block by its position in the block table, from 0 ("request 1's block 7").

    `prompt_pages` is the request's number of full prompt pages: a new page among them is a
    recomputed copy (the last-token rule). `orphans` names each pool's orphan pages after the
    request (`orphan_pages`). The after column is "FREE", "indexed" or "orphan", with the
    pool's name when the pools differ (notebook 09, section 3)."""
    rows = next(iter(rows_by_index.values()))
    row, out = rows[i], []
    for k, page in enumerate(row["pages"]):
        if page not in row["evicted"]:
            continue
        j = max(j for j in range(i) if page in rows[j]["pages"])
        before = f"request {j + 1}'s block {rows[j]['pages'].index(page)}"
        copy = row["hits"] // page_size <= k < prompt_pages
        partial = k == len(row["pages"]) - 1 and k >= prompt_pages
        during = f"request {i + 1}'s block {k}{' (copy)' * copy}{' (partial)' * partial}"
        after = {}
        for name, pool_rows in rows_by_index.items():
            state = "FREE" if page in pool_rows[i]["released_free"] else "indexed"
            after[name] = "orphan" if page in orphans[name] else state
        if len(set(after.values())) == 1:
            indexed = any(page in r[i]["new_indexed"] for r in rows_by_index.values())
            text = after[next(iter(after))] + ("" if indexed else " (never indexed)")
        else:
            text = " / ".join(f"{state} ({name})" for name, state in after.items())
        out.append((page, before, f"evicted -> {during}", text))
    return out


def role_table(roles: Sequence[tuple[int, str, str, str]], i: int) -> str:
    """`page_roles` as a text table, one line a page."""
    head = ("page", f"before request {i + 1}", f"during request {i + 1}", "after release")
    lines = [(str(p), b, d, a) for p, b, d, a in roles]
    widths = [max(len(line[c]) for line in [head, *lines]) for c in range(4)]
    return "\n".join(
        " | ".join(f"{cell:{w}}" for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in [head, *lines]
    )


def page_kinds(pool: KVCachePool, pages: Sequence[int]) -> list[str]:
    """For each page, what the pool's prefix index does with it, as `plot_page_chains` draws
    it: "orphan" (indexed, no lookup reaches it: `orphan_pages`), "reached" (indexed, and a
    lookup from the first page reaches it) or "not indexed"."""
    orphans = set(orphan_pages(pool))
    return [
        "orphan" if p in orphans else "reached" if pool.prefix_index.holds_page(p) else "not indexed"
        for p in pages
    ]
