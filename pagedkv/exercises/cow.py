"""Checker for the `copy_on_write` exercise: what an append into a possibly shared page does.

The oracle is a real `SequenceManager`: a prompt is admitted and forked, then the holders
append in turn; before each append the learner is asked what it will do, and the answer is
compared with what `append_slot` then did (its COW record, its block table). vLLM v0's block
manager made the same decision (`cow_block_if_not_appendable`); vLLM v1 never shares a
partial block, so it has no copy-on-write.

Leaves out: appends of several tokens at once (beam search appends one per step).
"""

from __future__ import annotations

from collections.abc import Callable

from pagedkv.core.config import CacheConfig
from pagedkv.core.plumbing.words import count
from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.exercises.guard import Failure, call, wrong

NAME = "copy_on_write"
ACTIONS = ("write", "copy", "new_page")
RULE = (
    "a token goes into the sequence's last page; a full last "
    "page means a new page (nothing to copy); a partial last page held by other block tables "
    "(ref_count > 1) is copied first and the write goes into the copy; a page this sequence "
    "alone holds is written in place"
)


def _scenarios() -> list[tuple[int, int, int]]:
    """(page_size, prompt length, forks), smallest first."""
    cases = [
        (size, length, forks) for size in (1, 2, 3) for length in range(1, 2 * size + 2) for forks in (1, 2)
    ]
    return sorted(cases, key=lambda c: (c[1] + c[2], c[0]))


def _did(seqs: SequenceManager, seq: str, table: list[int], num_copies: int) -> tuple[str, int | None]:
    if len(seqs.cow_log) > num_copies:
        return ("copy", seqs.cow_log[-1][0])
    if len(seqs.block_table(seq)) > len(table):
        return ("new_page", None)
    return ("write", table[-1])


def _hint(case: dict, got: tuple) -> str:
    table, refs, full = case["block_table"], case["ref_counts"], case["num_tokens"] % case["page_size"] == 0
    if got[0] == "copy" and full:
        return "the last page is full: the new token cannot go into it, copied or not"
    if got[0] == "copy" and got[1] not in table:
        return (
            f"page {got[1]} is not in the block table: return the id of the shared page that is "
            "copied (the one the token would go into), not the id of the copy, which the pool picks"
        )
    if got[0] == "copy" and got[1] != table[-1]:
        return "only the page being written into needs a private copy"
    if got[0] == "copy" and refs[table[-1]] == 1:
        return "no one else holds this page any more: the last holder may write in place"
    if got[0] == "write" and full:
        return "the last page has no free slot"
    if got[0] == "write" and refs[table[-1]] > 1:
        return "writing in place changes the page for every other block table that holds it"
    return ""


def _check_answer(case: dict, expected: tuple, got: object, story: str) -> None:
    if not isinstance(got, (tuple, list)) or len(got) != 2 or got[0] not in ACTIONS:
        raise Failure(
            f"✗ {NAME}: return a pair (action, page_id) with action one of {ACTIONS}, "
            f"e.g. ('new_page', None); got {got!r}\n  story:    {story}"
        )
    got = (got[0], None if got[1] is None else int(got[1]))
    if got != expected:
        failure = wrong(NAME, case, expected, got, RULE, _hint(case, got))
        raise Failure(f"{failure}\n  story:    {story}")


def check_copy_on_write(fn: Callable) -> str:
    """fn(block_table, num_tokens, page_size, ref_counts) -> (action, page id or None)."""
    checked = 0
    for page_size, length, forks in _scenarios():
        config = CacheConfig.bookkeeping(32, page_size, enable_prefix_caching=False)
        seqs = SequenceManager(KVCachePool(config))
        seqs.add("parent", list(range(length)))
        holders = ["parent"] + [f"child{i}" for i in range(1, forks + 1)]
        for child in holders[1:]:
            seqs.fork("parent", child)
        story = [
            f"'parent' has a prompt of {count(length, 'token')} (page_size {page_size}), "
            "forked into " + ", ".join(f"'{c}'" for c in holders[1:])
        ]
        for seq in holders[::-1] + holders[::-1]:  # the newest child writes first, twice around
            table = seqs.block_table(seq)
            case = dict(
                block_table=table,
                num_tokens=seqs.get(seq).num_tokens,
                page_size=page_size,
                ref_counts={p: seqs.pool.ref_count(p) for p in table},
            )
            story.append(f"'{seq}' appends a token")
            got = call(NAME, fn, case)
            copies = len(seqs.cow_log)
            seqs.append_slot(seq, 0)
            _check_answer(case, _did(seqs, seq, table, copies), got, "; ".join(story))
            checked += 1
    return (
        f"✓ {NAME}: all {checked} appends agree with what a real pool does, through forks of "
        "one and two children: every holder but the last copies, the last writes in place."
    )
