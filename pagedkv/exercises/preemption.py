"""Checker for the `preemption` exercise: whom the scheduler preempts, and what it costs.

The oracle is a real `Scheduler` (bookkeeping mode, prefix caching off): the running
requests are admitted with the given lengths into a pool with exactly `num_free_pages`
pages to spare, one decode step runs (its `StepRecord.preempted` names the victims), and the
run finishes, which resumes every victim and counts its recomputed tokens. vLLM v1's
scheduler follows the same rule: FCFS, so the most recently admitted request goes first.

Leaves out: swap preemption and prefix hits on resume (with caching on, the victim's full
pages may still be CACHED and cost nothing to recompute).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from pagedkv.core.config import CacheConfig
from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.engine.scheduler import Scheduler
from pagedkv.exercises.guard import Failure, call, wrong

NAME = "preemption"
RULE = (
    "the scheduler (notebook 05, vLLM v1): each running request in admission order appends one token; "
    "when one needs a page and none is FREE, the most recently admitted running request is "
    "preempted (it may be the one asking) and its pages are freed, until the append fits. "
    "Recompute redoes the K/V of every token the victim had in the cache"
)


def _oracle(running: list[tuple[str, int]], page_size: int, num_free_pages: int) -> tuple[list, int]:
    held = sum(-(-n // page_size) for _, n in running)
    config = CacheConfig.bookkeeping(held + num_free_pages, page_size, enable_prefix_caching=False)
    scheduler = Scheduler(SequenceManager(KVCachePool(config)), preemption_mode="recompute")
    for req_id, num_tokens in running:
        scheduler.add_request(req_id, [1] * num_tokens, max_new_tokens=2)
    first = scheduler.step()
    assert len(first.prefill) == len(running)  # all admitted: the pool was sized for it
    victims = [req_id for req_id, _ in scheduler.step().preempted]
    scheduler.run()
    return victims, scheduler.stats.recomputed_tokens


def _cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    for page_size in (1, 2, 3):
        for count in (1, 2, 3):
            names = ["req1", "req2", "req3"][:count]
            for lengths in itertools.product(range(1, 2 * page_size + 1), repeat=count):
                for free in (0, 1):
                    num_pages = sum(-(-n // page_size) for n in lengths) + free
                    if any(-(-(n + 1) // page_size) > num_pages for n in lengths):
                        continue  # the scheduler refuses a request that can never grow
                    cases.append(
                        dict(running=list(zip(names, lengths)), page_size=page_size, num_free_pages=free)
                    )
    cases.sort(
        key=lambda c: (
            len(c["running"]),
            sum(n for _, n in c["running"]),
            c["num_free_pages"],
            c["page_size"],
        )
    )
    return cases[::3]  # every third: enough variety, a check stays under a second


# req1 has room, req2 asks for a page, req3 is the newest: the oldest, the asker and the
# right victim are three different requests, so the learner's answer here names their rule.
PROBE = dict(running=[("req1", 1), ("req2", 2), ("req3", 1)], page_size=2, num_free_pages=0)


def _asker(running: list, page_size: int, num_free_pages: int) -> str | None:
    """The first request whose append needs a page when none is FREE."""
    free = num_free_pages
    for req_id, num_tokens in running:
        if num_tokens % page_size == 0:
            if not free:
                return req_id
            free -= 1
    return None


def _victim_rule(case: dict, victim: str, fn: Callable) -> str:
    """'oldest', 'asker' or '': the rule the learner's first victim follows."""
    oldest, asker = case["running"][0][0], _asker(case["running"], case["page_size"], case["num_free_pages"])
    if victim == oldest == asker:  # this case cannot tell: ask the learner's code the probe
        try:
            probe = call(NAME, fn, PROBE)[0][:1]
        except (Failure, TypeError, IndexError, KeyError):
            return ""
        return {"req1": "oldest", "req2": "asker"}.get(probe[0] if probe else "", "")
    return "oldest" if victim == oldest else "asker" if victim == asker else ""


def _hint(case: dict, expected: tuple, got: tuple, fn: Callable) -> str:
    running, size = case["running"], case["page_size"]
    victims, cost = got
    if victims and expected[0] and victims[0] != expected[0][0]:
        rule = _victim_rule(case, victims[0], fn)
        if rule == "oldest":
            return (
                "your code preempts the oldest running request; FCFS protects the earliest "
                "arrivals and preempts the most recently admitted one"
            )
        if rule == "asker":
            return (
                "your code preempts the request that asks for the page; the victim is the most "
                "recently admitted running request, which is the asker only when it is the newest"
            )
        return "the victim is the most recently admitted running request"
    if victims == expected[0] and cost == sum(-(-n // size) for r, n in running if r in victims):
        return "the cost is counted in tokens, not pages"
    if victims == expected[0]:
        return "the right victims, the wrong cost: which tokens had their K/V in the cache?"
    return ""


def check_preemption(fn: Callable) -> str:
    """fn(running, page_size, num_free_pages) -> (victims in preemption order, tokens recomputed)."""
    cases = _cases()
    for case in cases:
        expected = _oracle(case["running"], case["page_size"], case["num_free_pages"])
        got = call(NAME, fn, case)
        ok_type = isinstance(got, (tuple, list)) and len(got) == 2 and isinstance(got[0], (list, tuple))
        if not ok_type or isinstance(got[1], bool) or not isinstance(got[1], int):
            raise Failure(
                f"✗ {NAME}: return a pair (list of preempted req ids, number of tokens), e.g. "
                f"(['req2'], 3); got {got!r}\n  inputs:   running={case['running']}, "
                f"page_size={case['page_size']}, num_free_pages={case['num_free_pages']}"
            )
        got = (list(got[0]), got[1])
        if got != expected:
            raise wrong(NAME, case, expected, got, RULE, _hint(case, expected, got, fn))
    return f"✓ {NAME}: all {len(cases)} cases agree with a real scheduler's decode step (FCFS, recompute)."
