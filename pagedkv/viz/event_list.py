"""A scheduler run's page events as a short list: one event a line, led by its step.

The dashboard's log says everything a step did, token by token. `event_list` keeps only what
moves pages, one line per request and step: a request queues, is admitted, takes a page,
is preempted, resumes, finishes or is aborted. "(evicted)" marks a page taken from CACHED
(the LRU victim). Steps that only decode into pages with room are left out. Example lines
(the `preempt` scenario):

    step  4 (scheduler step 1) | req1 admitted: pages [0, 1, 2, 3], room for its tokens 1-16
    step 11 (scheduler step 8) | req2 preempted (recompute): pages [10, 8, 7, 6, 5, 4] turn CACHED
    step 13 (scheduler step 10) | req1 takes page 10 (evicted), room for its tokens 25-28
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from pagedkv.core.plumbing.words import count
from pagedkv.scenarios.text import step_role_at

QUEUED = "waits in the scheduler's queue"


def event_list(run: Any, first: int = 1, last: int | None = None) -> list[str]:
    """Lines `step  N | event` for the scenario steps `first` to `last` (default: to the
    run's end) of a `ScenarioRun`; the step number is right-aligned in two columns. With a
    scheduler the step also says what it did, as the dashboard's header does:
    "step 11 (scheduler step 8) | ...", "step  2 (queues req2) | ..."."""
    last = run.records[-1].step if last is None else last
    lines: list[str] = []
    for index, record in enumerate(run.records):
        if not first <= record.step <= last or record.own:
            continue
        before = run.snapshots[index].block_tables
        after = run.snapshots[index + 1].block_tables
        role = step_role_at(run.steps, record.step) if run.scheduler is not None else ""
        label = f"step {record.step:2}" + (f" ({role})" if role else "")
        lines += [f"{label} | {text}" for text in _step_events(record, before, after)]
    return lines


def _step_events(record: Any, before: dict, after: dict) -> list[str]:
    """What one step did to pages, one string per request, in the order the events came."""
    if QUEUED in record.note:
        return [record.note.replace(QUEUED, "queues")]
    by_seq: dict[Hashable, dict[str, list]] = {}
    for e in record.events:
        by_seq.setdefault(e.seq_id, {}).setdefault(e.kind, []).append(e)
    out = []
    for seq_id, kinds in by_seq.items():
        pages = {kind: [e.page_id for e in events] for kind, events in kinds.items()}
        if "preempt" in kinds:
            mode = kinds["preempt"][0].detail.split(":")[0]
            out.append(f"{seq_id} preempted ({mode}): {_released(pages, ids=True)}")
        elif "abort" in kinds:
            out.append(f"{seq_id} aborted: {_released(pages, ids=False)}")
        else:
            out += _takes(record, seq_id, kinds, pages, seq_id not in before)
            if seq_id in before and seq_id not in after:
                out.append(f"{seq_id} finishes: {_released(pages, ids=False)}")
    return out


def _takes(record: Any, seq_id: Hashable, kinds: dict, pages: dict, new: bool) -> list[str]:
    """A request's admission or resume (with its prefix hits), then the pages it takes."""
    taken = pages.get("allocate", [])
    hits = pages.get("prefix_hit", [])
    evicted = [p for p in taken if p in pages.get("evict", [])]
    out = []
    if "resume" in kinds or (new and hits):
        verb = "resumes" if "resume" in kinds else "admitted"
        out.append(f"{seq_id} {verb}: prefix hits on {_ids(hits)}" if hits else f"{seq_id} {verb}")
    if taken:
        text = _ids(taken)
        if evicted == taken:  # one page or several, all taken from CACHED
            text += " (evicted)" if len(taken) == 1 else " (all evicted)"
        elif evicted:  # several pages, some evicted: name them
            text += f" ({', '.join(map(str, evicted))} evicted)"
        spans = [record.spans[p] for p in taken if p in record.spans]
        if len(spans) == len(taken):  # a page released in the same step has no span
            text += f", room for its tokens {spans[0][0]}-{spans[-1][1]}"
        elif not spans:  # e.g. a last token written into a page the finish releases at once
            text += ", released in the same step"
        out.append(f"{seq_id} {'admitted: ' if new and not out else 'takes '}{text}")
    return out


def _released(pages: dict, ids: bool) -> str:
    """Where a request's released pages went: CACHED (full, hashed) or FREE."""
    said = []
    for kind, state in (("cache", "CACHED"), ("free", "FREE")):
        got = pages.get(kind, [])
        if got:
            verb = "turns" if len(got) == 1 else "turn"
            said.append(f"{_ids(got) if ids else _count(got)} {verb} {state}")
    return ", ".join(said) or "no page held"


def _ids(pages: Sequence[int]) -> str:
    return f"page {pages[0]}" if len(pages) == 1 else f"pages {list(pages)}"


def _count(pages: Sequence[int]) -> str:
    return count(len(pages), "page")
