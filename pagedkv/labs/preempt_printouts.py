"""Printouts for notebook 05's preemption runs: one pool size, and a cap on concurrency.

`pool_run` serves requests in a pool of a given size with recompute preemption and says, for
each preemption, when the victim came back, how many of its full pages were still CACHED
then (prefix hits) and so how many tokens it computed again. A victim that waits longer can
recompute more: while it waits, LRU evicts its CACHED pages for the running requests.

`step_lines` steps a scheduler to the end and keeps one line per step that admits, resumes,
finishes or preempts a request, so a reader can check each step the text names.

`cap_rows` compares two runs of `bench preempt` with a third that caps `max_num_seqs`
instead, one table row each: the run's name, pool pages, the cap, steps, preemptions, tokens
computed and mean running requests per step. `last_request_line` says in one line when a
run preempted one request and when it came back.
"""

from __future__ import annotations

from collections.abc import Sequence

from pagedkv.core.plumbing.words import count
from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.engine.scheduler import Scheduler
from pagedkv.labs.workloads import Request, token_budget
from pagedkv.model.tinylm import TinyLM

CAP_COLUMNS = [
    "run",
    "pages",
    "max_num_seqs",
    "steps",
    "preemptions",
    "tokens computed",
    "recomputed",
    "requests/step",
]


def _scheduler(model: TinyLM, num_pages: int, page_size: int, max_num_seqs: int, budget: int) -> Scheduler:
    pool = KVCachePool(model.cache_config(num_pages=num_pages, page_size=page_size))
    return Scheduler(SequenceManager(pool), model, max_num_seqs=max_num_seqs, max_num_batched_tokens=budget)


def pool_run(
    model: TinyLM,
    requests: Sequence[Request],
    num_pages: int,
    *,
    page_size: int,
    max_num_seqs: int,
    max_num_batched_tokens: int,
) -> list[str]:
    """Serve `requests` to the end with recompute preemption. The first line: steps,
    preemptions, tokens recomputed and the most requests in one step; then one line per
    preemption (two lines), in the order of the preemptions: its step, the tokens in the
    victim's pages then, its resume step, its full pages still CACHED at the resume and the
    tokens it computed again."""
    sched = _scheduler(model, num_pages, page_size, max_num_seqs, max_num_batched_tokens)
    sched.add_requests(requests)
    hits: list[object] = []  # the seq id of each page hit in the prefix cache
    sched.pool.add_listener(lambda e: hits.append(e.seq_id) if e.kind == "prefix_hit" else None)
    out: dict[object, tuple[int, int]] = {}  # victim -> (step, tokens in its pages)
    lines: list[tuple[int, str, str]] = []  # (preemption step, its two lines)
    held: dict[object, int] = {}  # running request -> tokens in its pages, before the step
    most = 0

    def read(record) -> None:
        nonlocal most
        most = max(most, len({*record.decode, *(r for r, _ in record.prefill)}))
        for req_id, _mode in record.preempted:
            out[req_id] = (sched.stats.steps, held[req_id])
        for req_id, _ in record.prefill:
            if req_id in out:
                step, tokens = out.pop(req_id)
                full, kept = tokens // page_size, hits.count(req_id)
                lines.append((
                    step,
                    f"{req_id}: preempted at step {step} with {tokens} tokens in its pages, back at "
                    f"step {sched.stats.steps}:",
                    f"  {kept} of its {full} full pages still CACHED, {full - kept} evicted before it "
                    f"was back: {count(tokens - kept * page_size, 'token')} recomputed",
                ))  # fmt: skip
        held.clear()  # for the next step: what each running request holds now
        held.update({s.req_id: sched.manager.get(s.req_id).num_tokens for s in sched.running})
        hits.clear()

    sched.run(on_step=read)
    stats = sched.stats
    head = (
        f"{num_pages} pages: {stats.steps} steps, {count(stats.preemptions, 'preemption')}, "
        f"{stats.recomputed_tokens} tokens recomputed, at most {most} requests in one step"
    )
    lines.sort(key=lambda entry: entry[0])  # stable: a resume order within one step stays
    return [head, *(line for _, *pair in lines for line in pair)]


def step_lines(sched: Scheduler, until_preempt: bool = False) -> list[str]:
    """Step `sched` until every request finished (or, with `until_preempt`, through the next
    step that preempts) and return one line per step that admits, resumes, finishes or
    preempts: its number and decision; a preempting step also names the running requests whose
    next token needed a new page before it."""
    lines: list[str] = []
    while sched.has_unfinished:
        short = [s.req_id for s in sched.running if sched.manager.pages_needed_to_append(s.req_id)]
        record = sched.step()
        line = f"step {sched.stats.steps}: {record.decision}"
        if record.preempted:
            lines.append(f"{line}; short of a page: {short}")
            if until_preempt:
                break
        elif record.prefill or record.finished:
            lines.append(line)
    return lines


def cap_rows(
    data: dict[str, dict],
    model: TinyLM,
    requests: Sequence[Request],
    *,
    max_num_seqs: int,
    cap: int,
    page_size: int = 16,
) -> list[list[object]]:
    """Rows for CAP_COLUMNS, each led by its run's name: `bench preempt`'s "no pressure" and
    "recompute" runs (`data`, run with `max_num_seqs`), then "cap N", a recompute run in the
    small pool with `max_num_seqs=cap`, the same page size and the bench's token budget.
    requests/step: the mean number of requests in a step."""
    num_pages = data["recompute"]["num_pages"]
    budget = token_budget(requests)  # as the bench sets it
    sched = _scheduler(model, num_pages, page_size, cap, budget)
    sched.add_requests(requests)
    batches: list[int] = []
    sched.run(on_step=lambda record: batches.append(len({*record.decode, *(r for r, _ in record.prefill)})))
    capped = {
        "num_pages": num_pages,
        "steps": sched.stats.steps,
        "preemptions": sched.stats.preemptions,
        "prefill_tokens": sched.stats.prefill_tokens,
        "decode_tokens": sched.stats.decode_tokens,
        "recomputed_tokens": sched.stats.recomputed_tokens,
        "mean_running": sum(batches) / len(batches),
    }
    runs = (
        ("no pressure", data["no pressure"], max_num_seqs),
        ("recompute", data["recompute"], max_num_seqs),
        (f"cap {cap}", capped, cap),
    )
    return [
        [
            name,
            r["num_pages"],
            seqs,
            r["steps"],
            r["preemptions"],
            r["prefill_tokens"] + r["decode_tokens"],
            r["recomputed_tokens"],
            f"{r['mean_running']:.1f}",
        ]
        for name, r, seqs in runs
    ]


def last_request_line(
    model: TinyLM,
    requests: Sequence[Request],
    seq_id: str,
    *,
    num_pages: int,
    max_num_seqs: int,
    page_size: int = 16,
) -> str:
    """One line for a recompute run of `requests` in `num_pages` pages with `max_num_seqs`:
    its steps, its request-steps (each step seats each running request once, so they equal
    the tokens sampled), and when `seq_id` was preempted, with how many sampled tokens, and
    when it came back last (or, never preempted, when it was admitted). A run whose cap
    binds is named "cap N", one whose cap does not "recompute", as the bench names it."""
    budget = token_budget(requests)  # as the bench sets it
    sched = _scheduler(model, num_pages, page_size, max_num_seqs, budget)
    sched.add_requests(requests)
    seats, out, back = 0, [], 0
    while sched.has_unfinished:
        record = sched.step()
        seats += len({*record.decode, *(r for r, _ in record.prefill)})
        if any(victim == seq_id for victim, _ in record.preempted):
            sampled = count(len(sched.requests[seq_id].output), "sampled token")
            out.append(f"step {record.step} ({sampled})")
        if seq_id in dict(record.prefill):
            back = record.step
    where = f"preempted at {', '.join(out)}, back at step {back}" if out else f"admitted at step {back}"
    name = f"cap {max_num_seqs}" if max_num_seqs < len(requests) else "recompute"  # no cap binds
    return f"{name}: {seats} request-steps in {sched.stats.steps} steps; {seq_id} {where}"
