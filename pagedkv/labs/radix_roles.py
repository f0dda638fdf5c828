"""Notebook 09, section 5: each request's block table, block by block, with where each page
came from and what became of it (`block_rows`, `block_table_text`), read from
`pagedkv.labs.radix_vs_hash.generate_one_at_a_time`'s rows; and what a pool's prefix index
does with each page of a block table (`page_kinds`, sections 3 and 5), drawn for a repeated
request after release (`release_chains`) or listed beside an earlier one (`pair_table`)."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Sequence

from pagedkv.core.plumbing.words import count, noun
from pagedkv.core.pool import KVCachePool
from pagedkv.labs.radix_vs_hash import RequestRow, orphan_pages
from pagedkv.radix.radix_cache import MatchResult, RadixCache


def block_rows(
    rows: Sequence[RequestRow],
    i: int,
    tokens: Sequence[Sequence[int]],
    prompt_lens: Sequence[int],
    page_size: int = 4,
) -> list[tuple[int, int, str, str, str]]:
    """One row per block of request `i` (from 0) in one pool: (block k, page id, where the
    page came from, a note, its state once the request finished), read from the pool's block
    tables (`generate_one_at_a_time`'s rows). `tokens[j]` are the tokens request j stored,
    the first `prompt_lens[j]` of them its prompt.

    Where from: "prefix hit", "FREE", or "was request j's block m" (evicted: the
    block it held in its last holder, so the page's past never reads as this row's block). The
    note reads on its own, naming requests' blocks, never another row's page: "copy of
    block k" for a full prompt block recomputed although an earlier request j holds
    the same prefix (the last-token rule); none for the original, an evicted page that held
    request j's block k, the tokens this request's block k copies; "was an orphan" for an
    evicted page that was one; "partial: not full" for a last page not full.
    The state: "indexed", "orphan" (`orphan_pages`) or "FREE"."""
    row, out = rows[i], list[tuple[int, int, str, str, str]]()
    hit_blocks, full_prompt = row["hits"] // page_size, prompt_lens[i] // page_size
    copies: dict[int, int] = {}  # copy block -> the earlier request (from 0) with the same block
    for k in range(hit_blocks, full_prompt):
        prefix = list(tokens[i][: (k + 1) * page_size])
        same = [j for j in range(i) if list(tokens[j][: len(prefix)]) == prefix]
        if same:
            copies[k] = same[-1]
    for k, page in enumerate(row["pages"]):
        note = f"copy of block {k}" if k in copies else ""
        if k < hit_blocks:
            source = "prefix hit"
        elif page in row["evicted"]:
            j = max(j for j in range(i) if page in rows[j]["pages"])
            m = rows[j]["pages"].index(page)
            source = f"was request {j + 1}'s block {m}"
            if copies.get(m) == j:
                note = ""  # the original: "was request j's block m" names it already
            elif page in rows[i - 1]["orphans"]:
                note = "was an orphan"
        else:
            source = "FREE"
        if (k + 1) * page_size > len(tokens[i]):
            note = "partial: not full"
        state = "orphan" if page in row["orphans"] else "FREE" if page in row["released_free"] else "indexed"
        out.append((k, page, source, note, state))
    return out


def _span(values: Sequence[int]) -> str:
    if len(values) > 1 and list(values) == list(range(values[0], values[-1] + 1)):
        return f"{values[0]}-{values[-1]}"
    return ", ".join(map(str, values))


def block_table_text(
    rows_by_index: dict[str, list[RequestRow]],
    i: int,
    tokens: Sequence[Sequence[int]],
    prompt_lens: Sequence[int],
    page_size: int = 4,
) -> str:
    """Request `i`'s `block_rows` as a text table: block, page, came from (with the note after a
    semicolon), then the page's state after release: one column "after release" for one pool,
    one column per pool (headed by its name) when several pools share the table, so each line
    stays short enough for a projector. One table when every pool gave the request the same
    block table, else one per pool. Blocks in a row on pages in a row (up or down), with the
    same source, note and states, share a line."""
    per_pool = {n: block_rows(r, i, tokens, prompt_lens, page_size) for n, r in rows_by_index.items()}
    tables = [(list(per_pool), list(per_pool.values()))]
    if len({tuple(r[i]["pages"]) for r in rows_by_index.values()}) > 1:
        tables = [([name], [blocks]) for name, blocks in per_pool.items()]
    out: list[str] = []
    for names, pools in tables:
        lines: list[list] = []  # [blocks, pages, blocks held before, came from, state in each pool]
        for k, page, source, note, _ in pools[0]:
            states = [p[k][4] for p in pools]
            held = re.fullmatch(r"(was request \d+'s) block (\d+)", source)
            source = f"{held[1]} {{}}" if held else source  # the held block: filled in below
            came = f"{source}; {note}" if note else source
            last = lines[-1] if lines else None
            step = page - last[1][-1] if last else 0
            if (
                last
                and last[3:] == [came, *states]
                and step in (1, -1)
                and (len(last[1]) == 1 or step == last[1][-1] - last[1][-2])
            ):
                last[0].append(k)
                last[1].append(page)
                last[2] += [int(held[2])] if held else []
            else:
                lines.append([[k], [page], [int(held[2])] if held else [], came, *states])
        after = names if len(names) > 1 else ["after release"]
        cells = [["block", "page", "came from", *after]]
        cells += [
            [
                _span(line[0]),
                _span(line[1]),
                line[3].format(f"{noun(len(line[2]), 'block')} {_span(line[2])}"),
                *line[4:],
            ]
            for line in lines
        ]
        widths = [max(len(c[n]) for c in cells) for n in range(len(cells[0]))]
        name = f", {names[0]} pool" if len(names) == 1 else ""
        out += [""] if out else []
        out.append(f"request {i + 1}{name}: block table {[b[1] for b in pools[0]]}")
        out += [f"{', '.join(names)}: each pool's page state after release"] if len(names) > 1 else []
        out += [" | ".join(f"{c:{w}}" for c, w in zip(cell, widths, strict=True)).rstrip() for cell in cells]
    return "\n".join(out)


def page_kinds(pool: KVCachePool, pages: Sequence[int]) -> list[str]:
    """For each page, what the pool's prefix index does with it, as `plot_page_chains` draws
    it: "orphan" (indexed, no lookup reaches it: `orphan_pages`), "reached" (indexed, and a
    lookup from the first page reaches it) or "not indexed"."""
    orphans = set(orphan_pages(pool))
    return [
        "orphan" if p in orphans else "reached" if pool.prefix_index.holds_page(p) else "not indexed"
        for p in pages
    ]


def request_table(rows_by_index: dict[str, list[RequestRow]], page_size: int = 4) -> str:
    """`generate_one_at_a_time`'s rows as one text table, a line per request (a line per pool
    where the pools' rows differ): its hit blocks, its pages in block order (block 0's page
    first) and the pages it evicted, in eviction order."""
    names = list(rows_by_index)
    cells = [["request", "hit blocks", "pages, in block order", "pages evicted"]]
    for i in range(len(rows_by_index[names[0]])):
        rows = [(n, r[i]) for n, r in rows_by_index.items()]
        shown = {(r["hits"], tuple(r["pages"]), tuple(r["evicted"])) for _, r in rows}
        if len(shown) == 1:
            rows = [("", rows[0][1])]
        for name, row in rows:
            hit = row["hits"] // page_size
            cells.append([
                f"{i + 1} {name}".rstrip(),
                _span(range(hit)) if hit else "none",
                ", ".join(map(str, row["pages"])),
                ", ".join(map(str, row["evicted"])) or "none",
            ])  # fmt: skip
    widths = [max(len(c[n]) for c in cells) for n in range(len(cells[0]))]
    return "\n".join(
        " | ".join(f"{c:{w}}" for c, w in zip(cell, widths, strict=True)).rstrip() for cell in cells
    )


def release_chains(
    kinds: dict[str, list[str]],
    pages: Sequence[int],
    hit_blocks: int,
    original: int | None = None,
    earlier: str = "req. 1",
) -> dict[str, list]:
    """`plot_page_chains` rows for a request that repeats an earlier prompt, after its release:
    one box for its hit pages, then one per later block. Its first recomputed block is the
    copy; the last block is partial. `kinds` maps a row title to `page_kinds` of `pages`; a
    page no index holds after release is FREE, so "not indexed" becomes "free". `original`, the
    page that held the copied block in the earlier request (named `earlier`), names it in the
    copy's note and, if the request later reused that page (evicted), in that block's note
    too: the block it holds now, then the block it held in the earlier request."""
    last = len(pages) - 1
    out: dict[str, list] = {}
    for title, row in kinds.items():
        shown = ["free" if kind == "not indexed" else kind for kind in row]
        boxes = [(f"pages 0-{hit_blocks - 1}", shown[0], f"blocks 0-{hit_blocks - 1}")]
        for k in range(hit_blocks, len(pages)):
            note = f"block {k}" + (": copy" if k == hit_blocks else ": partial" if k == last else "")
            if original is not None and k == hit_blocks:
                note += f" of\n{earlier}'s block {hit_blocks}"
            elif original is not None and pages[k] == original:
                note = f"now block {k}; was\n{earlier}'s block {hit_blocks}"
            boxes.append((f"page {pages[k]}", shown[k], note))
        out[title] = boxes
    return out


def pair_table(
    rows: Sequence[RequestRow],
    first: int,
    later: int,
    tokens: Sequence[Sequence[int]],
    prompt_lens: Sequence[int],
) -> str:
    """Two requests' block tables side by side, a line per block: its page in request `first`
    and in request `later` (from 0), where the later one's page came from, and a note (a copy,
    what the page held before, partial: `block_rows`'s note), in separate columns."""
    a, b = rows[first]["pages"], block_rows(rows, later, tokens, prompt_lens)
    cells = [
        [
            "block",
            f"request {first + 1}",
            f"request {later + 1}",
            f"request {later + 1}'s page came from",
            "note",
        ]
    ]
    for k, page, source, note, _ in b:
        cells.append([str(k), str(a[k]) if k < len(a) else "", str(page), source, note])
    widths = [max(len(c[n]) for c in cells) for n in range(5)]
    return "\n".join(
        " | ".join(f"{c:{w}}" for c, w in zip(cell, widths, strict=True)).rstrip(" |") for cell in cells
    )


def insert_rest(tree: RadixCache, tokens: Sequence[int], match: MatchResult, next_page: int) -> list[int]:
    """Insert `tokens` into a `RadixCache` on the matched pages plus new pages numbered from
    `next_page` for the rest of its full pages (the page size is the tree's); returns the new
    pages."""
    new = list(range(next_page, next_page + len(tokens) // tree.page_size - match.num_pages))
    tree.insert(tokens, match.page_ids + new)
    return new


ACCOUNT_KEY = (  # 09b, section 3: the key at the top of the first accounting box
    "both: a line both pools count the same\n"
    "each total: total now = total before - what left + what came\n"
    "came from: a prefix hit, a FREE page, or an evicted page named by the block it last held\n"
    "last columns: the page's state after the request's release (indexed: CACHED and in the index)\n"
    "read aloud, request 2's 'indexed: 12 = 9 - 1 evicted + 4 new [9, 10, 11, 8]': 9 pages were\n"
    "indexed before; page 8 was evicted (-1); pages 9, 10, 11, 8 filled and went in (+4): 12"
)


def lookup_note(before: RadixCache, after: RadixCache, decode: Callable[[Sequence[int]], str]) -> str:
    """Section 1: what a lookup did to the tree, read from copies made before and after it:
    the node it split and the two nodes it left, and that the split falls on a page boundary
    (a match counts whole pages only), or that the tree is unchanged."""
    old = [tuple(n.key) for n in before.nodes() if n.key]
    new = [tuple(n.key) for n in after.nodes() if n.key]
    gone, came = [k for k in old if k not in new], [k for k in new if k not in old]
    if not gone and not came:
        return f"no: the lookup left the tree as it was ({after.num_nodes} nodes)"
    head = len(came[0])  # the split node's first part: depth first, the parent comes first
    pages = head // after.page_size
    return (
        f"yes: the lookup split {', '.join(repr(decode(k)) for k in gone)} into "
        f"{' and '.join(repr(decode(k)) for k in came)}; no page moved\n"
        f"the split falls on a page boundary ({count(pages, 'page')} = {head} tokens): "
        "a match counts whole pages only"
    )


def swap_text(
    rows: Sequence[RequestRow],
    i: int,
    j: int,
    block: int,
    lru: Sequence[int] | None = None,
    width: int = 80,
) -> str:
    """Section 5's first box, in steps: a small block -> page table of request `i` (from 0),
    which repeats request `j` and recomputed its `block` (a copy), with a prefill and a decode
    column read from the two block tables: at prefill the copy's page, at decode the page
    request `j` held `block` in (the original), evicted and reused, and for each later block its
    page: evicted from the last earlier request that held it, or FREE. Then the LRU order before
    request `i` (first evicted first; only when `lru` is given), then two plain sentences that
    read it, naming the block the copy's page held before. Lines are wrapped at spaces to
    `width` characters so no word breaks on a projector."""
    pages_i, original = rows[i]["pages"], rows[j]["pages"][block]
    copy = pages_i[block]
    lines = [] if lru is None else [f"LRU order before request {i + 1}, first evicted first:", str(list(lru))]
    header = f"both pools, request {i + 1}'s block -> page, in time order:"
    cells = [("block", "prefill", "decode"), (str(block), f"page {copy}, copy of block {block}", "")]
    later = pages_i.index(original) if original in pages_i else None
    if later is None:
        cells.append(("", "", f"page {original} (the original) goes to no block"))
    for k, page in enumerate(pages_i[block + 1 :], start=block + 1):  # the decode blocks
        held = [h for h in range(i) if page in rows[h]["pages"]]
        was = f", request {held[-1] + 1}'s block {rows[held[-1]]['pages'].index(page)}" if held else ""
        evicted = rows[i].get("evicted")  # rows without it (tests): a page held before was
        gone = bool(held) if evicted is None else page in evicted
        said_k = f"page {page}{was}: evicted, reused" if was and gone else f"page {page}: FREE"
        cells.append((str(k), "", said_k))
    widths = [max(len(c[n]) for c in cells) for n in range(3)]
    table = [" | ".join(f"{c:{w}}" for c, w in zip(cell, widths, strict=True)).rstrip() for cell in cells]
    held = [h for h in range(i) if copy in rows[h]["pages"]]
    said = [f"Prefill: request {i + 1} recomputes block {block} on page {copy}."]
    if held:
        was = f"request {held[-1] + 1}'s block {rows[held[-1]]['pages'].index(copy)}"
        said = [f"Prefill: request {i + 1} evicts page {copy} ({was}) and recomputes block {block} on it."]
    if later is not None:
        said.append(
            f"Decode: request {i + 1} evicts page {original} (request {j + 1}'s block {block}, "
            f"the original) and writes block {later} on it."
        )
    wrap = [textwrap.fill(line, width, break_long_words=False) for line in [*lines, *said]]
    return "\n".join([header, *table, "", *wrap])  # a blank line: table, then its reading


def evictions_table(rows_by_index: dict[str, list[RequestRow]], i: int) -> str:
    """Section 5's second box: a line per pool, the pages request `i` (from 0) evicted in
    eviction order, then the hit tokens and evictions of requests 0 to `i` together."""
    cells = [["pool", f"request {i + 1} evicts", f"hit tokens, requests 1-{i + 1}", "evictions"]]
    for name, rows in rows_by_index.items():
        hits = sum(r["hits"] for r in rows[: i + 1])
        cells.append(
            [name, ", ".join(map(str, rows[i]["evicted"])) or "none", str(hits), str(rows[i]["evictions"])]
        )
    widths = [max(len(c[n]) for c in cells) for n in range(4)]
    return "\n".join(
        " | ".join(f"{c:{w}}" for c, w in zip(cell, widths, strict=True)).rstrip() for cell in cells
    )
