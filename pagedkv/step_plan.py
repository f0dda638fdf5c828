"""How `Scheduler.schedule()` fills one step: running requests first, then waiting ones.

The two loops of vLLM v1's `Scheduler.schedule()`, over pagedkv's SequenceManager:

- `schedule_running`: each running request, in admission order, gets min(tokens left,
  budget) tokens; the pages that takes are counted, not yet taken, so when the pool falls
  short the victim (the last admitted, or under "priority" the least urgent, latest
  arrival) can be preempted even if it was already scheduled this step: its tokens and
  pages go back to the budget, as vLLM does. Only then are the tokens appended.
- `schedule_waiting` (only when nothing was preempted): admit the queue's front while the
  budget, `max_num_seqs` and the pool allow. The budget counts tokens after prefix hits;
  with chunked prefill a long prompt is admitted with the chunk that fits (vLLM's
  `allocate_slots` takes pages for the scheduled tokens only), the rest follows in later
  steps through `schedule_running`.

Leaves out: vLLM's encoder, LoRA and KV-connector checks, which skip requests in the queue.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .request import RequestState, RequestStatus
from .scheduler_output import NewRequestData

if TYPE_CHECKING:
    from .scheduler import Scheduler


@dataclass
class StepPlan:
    """What `schedule()` decides, before it becomes a `SchedulerOutput`."""

    emit: Callable[[str, Hashable, str], None]  # the scheduler's events: (kind, req id, detail)
    evictions: int = 0  # pool counter when the step began
    cow: int = 0  # length of the copy-on-write log when the step began
    scheduled: dict[RequestState, tuple[int, int]] = field(default_factory=dict)  # -> (start, k)
    pages: dict[RequestState, int] = field(default_factory=dict)  # running request -> pages it takes
    preempted: list[tuple[Hashable, str]] = field(default_factory=list)  # (req id, mode)
    swap_out: list[tuple[int, int]] = field(default_factory=list)  # (page, swap slot)
    swap_in: list[tuple[int, int]] = field(default_factory=list)  # (swap slot, page)
    new: list[NewRequestData] = field(default_factory=list)
    refused: str = ""  # why the last admission failed


def schedule_running(sched: Scheduler, plan: StepPlan, budget: int) -> int:
    """Schedule the running requests (preempting when short); returns the budget left."""
    running, pool, get = sched.running, sched.pool, sched.seqs.get
    reserved, i = 0, 0
    while i < len(running) and budget > 0:
        state = running[i]
        seq = get(state.req_id)
        start = seq.num_tokens
        k = min(_num_tokens(state) - start, budget)
        need = _pages_to_grow(sched, seq, k)
        while need > pool.num_available_pages - reserved:
            victim = _victim(sched)
            running.remove(victim)
            if victim in plan.scheduled:  # priority only: undo its share of this step
                budget += plan.scheduled.pop(victim)[1]
                reserved -= plan.pages.pop(victim)
                i -= 1
            preempt(sched, plan, victim)
            if victim is state:
                break
        else:
            plan.scheduled[state] = (start, k)
            plan.pages[state] = need
            reserved += need
            budget -= k
            i += 1
            continue
        break  # the request itself was preempted: nothing behind it runs either
    append_slot = sched.seqs.append_slot
    for state, (start, k) in plan.scheduled.items():
        for token in _tokens(state, start, start + k):
            append_slot(state.req_id, token)
    return budget


def schedule_waiting(sched: Scheduler, plan: StepPlan, budget: int) -> None:
    """Admit waiting requests in queue order while budget, max_num_seqs and pages allow."""
    waiting, running = sched.waiting, sched.running
    while len(waiting) and budget > 0 and len(running) < sched.max_num_seqs:
        state = waiting[0]
        k = _admit(sched, plan, state, budget)
        if not k:
            break
        waiting.pop()
        if state.status is RequestStatus.WAITING:
            plan.new.append(NewRequestData(state.req_id, state.prompt_token_ids, state.seed))
        else:
            plan.emit("resume", state.req_id, f"{k} token{'s' * (k != 1)} to compute")
        state.status = RequestStatus.RUNNING
        running.append(state)
        budget -= k


def _admit(sched: Scheduler, plan: StepPlan, state: RequestState, budget: int) -> int:
    """Add the request's sequence with the tokens this step computes (plus its prefix hits
    and, after a swap, its swapped tokens); returns the tokens to compute, 0 if refused."""
    seqs, req_id, total = sched.seqs, state.req_id, _num_tokens(state)
    swapped = state.num_swapped_tokens if state.swap_pages is not None else 0
    try:
        if swapped or total <= budget:
            end = min(total, swapped + budget)
        else:
            hits = seqs.plan_add(req_id, state.token_ids).num_cached_tokens
            if total - hits > budget and not sched.enable_chunked_prefill:
                return 0
            end = min(total, hits + budget)
        hits = seqs.add(req_id, state.token_ids[:end])
    except Exception as exc:  # noqa: BLE001 - plan_add and add change nothing when they raise
        # Out of pages, or an id another user of the SequenceManager took since add_request.
        plan.refused = f"request {req_id!r} cannot be admitted: {exc}"
        return 0
    start = hits
    if state.swap_pages is not None:
        if hits < swapped:  # the pages the prefix cache did not cover come back from swap
            size, table = sched.pool.page_size, seqs.block_table(req_id)
            blocks = range(hits // size, -(-swapped // size))
            plan.swap_in += [(state.swap_pages[b], table[b]) for b in blocks]
            seqs.set_computed(req_id, swapped)
            start = swapped
        sched.swap_space.free(state.swap_pages)
        state.swap_pages = None
    state.prefill_end = total
    plan.scheduled[state] = (start, end - start)
    return end - start


def preempt(sched: Scheduler, plan: StepPlan, state: RequestState) -> None:
    """Free a running request's pages (listing them for a swap-out first in swap mode) and
    requeue it: at the front under "fcfs", by its priority under "priority"."""
    table = sched.seqs.block_table(state.req_id)
    mode = sched.preemption_mode
    if mode == "swap":
        slots = sched.swap_space.allocate(len(table))
        if slots is None:
            mode = "recompute"  # the swap space is full
        else:
            plan.swap_out += zip(table, slots)
            state.swap_pages, state.num_swapped_tokens = slots, sched.seqs.get(state.req_id).num_tokens
    sched.seqs.free(state.req_id)  # every token it holds was computed by an earlier step
    state.status = RequestStatus.PREEMPTED
    state.num_preemptions += 1
    sched.waiting.prepend(state)
    plan.preempted.append((state.req_id, mode))
    plan.emit("preempt", state.req_id, f"{mode}: {len(table)} pages released")


def _victim(sched: Scheduler) -> RequestState:
    if sched.policy == "priority":
        return max(sched.running, key=lambda s: s.sort_key)
    return sched.running[-1]


def _pages_to_grow(sched: Scheduler, seq, k: int) -> int:  # noqa: ANN001 - a Sequence
    """New pages that appending k tokens to `seq` takes: those it fills past its last page,
    plus one copy if its partial last page is shared (copy-on-write)."""
    size, n = sched.pool.page_size, seq.num_tokens
    need = -(-(n + k) // size) - -(-n // size)
    if n % size and sched.pool.ref_count(seq.block_table[-1]) > 1:
        need += 1
    return need


def _tokens(state: RequestState, start: int, end: int) -> list[int]:
    """state.token_ids[start:end] without building the whole list."""
    prompt, output = state.prompt_token_ids, state.output
    p = len(prompt)
    if end <= p:
        return prompt[start:end]
    if start >= p:
        return output[start - p : end - p]
    return prompt[start:] + output[: end - p]


def _num_tokens(state: RequestState) -> int:
    """len(state.token_ids), without building the list."""
    return len(state.prompt_token_ids) + len(state.output)
