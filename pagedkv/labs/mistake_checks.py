"""Notebook 08's "Try it": four checks run against one of `NaiveKVCache`'s mistake flags,
each next to what pagedkv gives on the same check.

- recount: `lost_pages` after one request is admitted and freed (section 2);
- long run: refusals over the given requests on a 32-page pool (sections 2 and 3);
- forced eviction: section 4's `lru_steps` test on a 12-page pool, request_B's prefix hits;
- heap bound: the eviction structure's largest size over 20 requests of one prompt,
  against twice the pool (section 5).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from pagedkv.core.pool import OutOfPagesError
from pagedkv.labs.naive import (
    MISTAKE_FLAGS,
    NaiveKVCache,
    lost_pages,
    lru_steps,
    pagedkv_cache,
    serve_one_at_a_time,
)

PROMPT_A = list(b"The KV cache holds")
OTHER = list(b"an unrelated request of forty tokens....")
POOL_PAGES = 32  # the long run's and the heap check's pool
HEAP_BOUND = 2 * POOL_PAGES  # a lazy heap compacts past this many entries
POPULAR = list(b"System: answer in one sentence. Hi!")


def _forced_eviction_hits(cache: object) -> int | None:
    """request_B's prefix-hit tokens in section 4's test, or None if the test's requests are
    refused."""
    try:
        hits = lru_steps(cache, PROMPT_A, OTHER, PROMPT_A + list(b" pages."))["hits"]
    except OutOfPagesError:
        return None
    assert isinstance(hits, int)
    return hits


def _cache(mistake: str | None, num_pages: int) -> object:
    """A pool of `num_pages` pages of 4 tokens: the naive cache with `mistake` on (None: pagedkv)."""
    if mistake is None:
        return pagedkv_cache(num_pages, 4)
    ticks = itertools.count(1000.0)  # a clock that moves 1 s per read, the same on every machine
    return NaiveKVCache(num_pages, 4, mistakes={mistake}, clock=lambda: next(ticks))


def forced_eviction_refusal(mistake: str | None) -> str:
    """Which request of section 4's test the 12-page pool refuses with `mistake` on, and its
    length ("" if none is refused)."""
    pool = _cache(mistake, 12)
    for name, tokens in (("request_A", PROMPT_A), ("other", OTHER)):
        try:
            pool.add(name, tokens)  # type: ignore[attr-defined]
        except OutOfPagesError:
            return f"{name} ({len(tokens)} tokens)"
        pool.free(name)  # type: ignore[attr-defined]
    return "" if _forced_eviction_hits(_cache(mistake, 12)) is not None else "request_B"


def check_results(mistake: str | None, requests: Sequence[list[int]]) -> dict[str, int | None]:
    """The four checks' numbers for the naive cache with `mistake` on (None: pagedkv)."""

    def cache(num_pages: int) -> object:
        return _cache(mistake, num_pages)

    probe = cache(POOL_PAGES)
    lost = 0
    if isinstance(probe, NaiveKVCache):
        try:
            probe.add("r1", list(requests[0]))
            probe.free("r1")
            lost = len(lost_pages(probe))
        except OutOfPagesError:
            lost = 0
    run = serve_one_at_a_time(cache(POOL_PAGES), requests)
    heap = serve_one_at_a_time(cache(POOL_PAGES), [POPULAR] * 20)
    return {
        "lost": lost,
        "refused": sum(run["refused"]),
        "hits": _forced_eviction_hits(cache(12)),
        "largest_heap": max(heap["eviction_entries"]),
    }


# Each check's rule: a number that breaks it FAILs. None (the forced eviction's requests were
# refused) cannot be judged: the pool could not run the test.
RULES = {
    "lost": ("lost > 0", lambda n: n > 0),
    "refused": ("refused > 0", lambda n: n > 0),
    "hits": ("hits < 8 tokens", lambda n: n < 8),
    "largest_heap": (f"heap > {HEAP_BOUND}", lambda n: n > HEAP_BOUND),
}


def verdicts(numbers: dict[str, int | None]) -> dict[str, str]:
    """ "PASS", "FAIL" or "n/a" for each check's number, by `RULES`."""
    return {
        key: "n/a" if numbers[key] is None else ("FAIL" if fails(numbers[key]) else "PASS")
        for key, (_, fails) in RULES.items()
    }


def failing_checks(mistake: str | None, requests: Sequence[list[int]]) -> list[str]:
    """The keys of the checks that FAIL for `mistake` (None: pagedkv)."""
    return [key for key, verdict in verdicts(check_results(mistake, requests)).items() if verdict == "FAIL"]


FLAGS = MISTAKE_FLAGS
# pagedkv's eviction order is an insertion-ordered map, not a heap: its size is shown as "n (map)"
MAP_NOTE = "(map): pagedkv has no heap; its eviction order is a map, one entry per CACHED page."
CHECK_NAMES = {  # each check's name, as the notebook and the quiz say it
    "lost": "the recount",
    "refused": "the run",
    "hits": "the forced eviction",
    "largest_heap": "the heap size",
}


def check_report(mistake: str, requests: Sequence[list[int]]) -> str:
    """The four checks for `mistake`, one line each: the naive number, pagedkv's, the check's
    rule and the naive number's verdict by it."""
    naive, good = check_results(mistake, requests), check_results(None, requests)
    verdict = verdicts(naive)

    def shown(key: str, n: int | None, cache: str = "naive") -> str:
        if key == "largest_heap" and cache == "pagedkv":
            return f"{n} (map)"
        if key != "hits":
            return str(n)
        return "refused" if n is None else f"{n} tokens"

    what = {
        "lost": "pages lost after 1 request",
        "refused": f"refused of {len(requests)}, {POOL_PAGES} pages",
        "hits": "request_B's hits",
        "largest_heap": "largest, 20 requests",
    }
    names = {key: f"{CHECK_NAMES[key]}: {text}" for key, text in what.items()}
    lines = [f"{mistake + ':':41} {'naive':>9} {'pagedkv':>9}   {'FAIL if':18}verdict"]
    for key, name in names.items():
        lines.append(
            f"  {name:39} {shown(key, naive[key]):>9} {shown(key, good[key], 'pagedkv'):>9}   "
            f"{RULES[key][0]:18}{verdict[key]}"
        )
    if "n/a" in verdict.values():
        refused = forced_eviction_refusal(mistake)
        lines.append(f"n/a: the 12-page pool refuses {refused}, so section 4's test cannot run")
        if verdict["refused"] == "FAIL":  # n/a is no all-clear: a learner asked if it hid a FAIL
            lines.append("     pagedkv serves it: that refusal is the symptom, and the run check FAILs on it")
    if good["largest_heap"] != naive["largest_heap"] == HEAP_BOUND:
        lines.append(
            f"heap {HEAP_BOUND}: without stale_heap the naive heap is a correct lazy heap; it drops"
            " its stale\n"
            f"entries once it passes {HEAP_BOUND}, so it PASSes. pagedkv's map holds only its CACHED pages."
        )
    return "\n".join([*lines, MAP_NOTE])


def flags_table(requests: Sequence[list[int]]) -> str:
    """One row per mistake flag, then pagedkv's: the four checks' numbers and the checks that
    FAIL by `RULES` ("none" if all pass)."""
    lines = [f"{'flag':22} {'lost':>4} {'refused':>7} {'hits':>9} {'heap':>9}   checks that FAIL"]
    for mistake in (*FLAGS, None):
        numbers = check_results(mistake, requests)
        hits = "n/a" if numbers["hits"] is None else f"{numbers['hits']} tok"
        fails = [CHECK_NAMES[key] for key, v in verdicts(numbers).items() if v == "FAIL"]
        heap = f"{numbers['largest_heap']} (map)" if mistake is None else numbers["largest_heap"]
        lines.append(
            f"{mistake or 'pagedkv':22} {numbers['lost']:4} {numbers['refused']:7} {hits:>9} "
            f"{heap:>9}   {', '.join(fails) or 'none'}"
        )
    lines += [
        "n/a: the pool refused the forced eviction's requests, so that test could not run.",
        f"heap {HEAP_BOUND}: a correct lazy heap compacts once it passes {HEAP_BOUND} (twice the pool),",
        f"so {HEAP_BOUND} passes and only more FAILs.",
        MAP_NOTE,
    ]
    return "\n".join(lines)
