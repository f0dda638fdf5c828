"""How `Scheduler.schedule()` fills one step: running requests first, then waiting ones.

The two loops of vLLM v1's `Scheduler.schedule()`, over pagedkv's SequenceManager:

- `schedule_running`: each running request gets min(tokens left, budget) tokens and their
  slots; when the pool falls short, the last request of the running list is preempted
  (possibly the one asking) until they fit. Under "fcfs" the running list is in admission
  order; under "priority" it is kept in (priority, arrival) order, so its last request is
  the least urgent, latest arrival, vLLM's victim. NOTE: vLLM keeps admission order under
  both policies and may pick a victim it already scheduled this step, then takes back its
  tokens; keeping the list sorted means the victim is never one already given slots
  (whose tokens would have no K/V), and the more urgent requests get the budget first.
- `schedule_waiting` (only when nothing was preempted): admit the queue's front while the
  budget, `max_num_seqs` and the pool allow. The budget counts tokens after prefix hits;
  with chunked prefill a long prompt is admitted with the chunk that fits (vLLM's
  `allocate_slots` takes pages for the scheduled tokens only), the rest follows in later
  steps through `schedule_running`.

Leaves out: vLLM's encoder, LoRA and KV-connector checks, which skip requests in the queue.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from itertools import islice
from typing import Protocol

from pagedkv.core.plumbing.words import count
from pagedkv.core.pool import KVCachePool, OutOfPagesError
from pagedkv.core.sequence import SequenceManager
from pagedkv.engine.request import FCFSQueue, RequestState, RequestStatus
from pagedkv.engine.scheduler_output import NewRequestData, PageShortfall, Refusal
from pagedkv.engine.swap import SwapSpace


class SchedulerState(Protocol):
    """What these loops read and change of `pagedkv.engine.scheduler.Scheduler` (a Protocol,
    so this module does not import the one that imports it)."""

    manager: SequenceManager
    pool: KVCachePool
    swap_space: SwapSpace
    running: list[RequestState]
    waiting: FCFSQueue
    max_num_seqs: int
    policy: str
    preemption_mode: str
    enable_chunked_prefill: bool


@dataclass(slots=True)  # slots: built once per step, its fields read and extended often
class StepPlan:
    """What `schedule()` decides: the makings of its `SchedulerOutput` and `StepRecord`."""

    emit: Callable[[str, Hashable, str], None]  # the scheduler's events: (kind, req id, detail)
    evictions: int = 0  # pool counter when the step began
    cow: int = 0  # length of the copy-on-write log when the step began
    num_scheduled_tokens: dict[Hashable, int] = field(default_factory=dict)  # batch order
    sampling: list[RequestState] = field(default_factory=list)  # their last token is computed
    decode: list[Hashable] = field(default_factory=list)
    prefill: list[tuple[Hashable, int]] = field(default_factory=list)  # (req id, prompt tokens)
    prompt_left: dict[Hashable, int] = field(default_factory=dict)  # req id -> still to prefill
    recomputed: int = 0  # tokens computed before, by requests preempted by recompute
    preempted: list[tuple[Hashable, str]] = field(default_factory=list)  # (req id, mode)
    short_of_pages: list[PageShortfall] = field(default_factory=list)  # why each was preempted
    swap_out: list[tuple[int, int]] = field(default_factory=list)  # (page, swap slot)
    swap_in: list[tuple[int, int]] = field(default_factory=list)  # (swap slot, page)
    new: list[NewRequestData] = field(default_factory=list)
    refused: str = ""  # why the last admission failed
    refused_request: Refusal | None = None  # its req id, the pool's reason and counts

    def add_decodes(self, states: list[RequestState], req_ids: list[Hashable]) -> None:
        """Record one token scheduled for each of these requests, whose ids are req_ids
        (their slots are taken and their num_computed_tokens counted)."""
        self.num_scheduled_tokens.update(dict.fromkeys(req_ids, 1))
        self.sampling += states
        self.decode += req_ids

    def add(self, state: RequestState, start: int, k: int) -> None:
        """Schedule tokens start..start+k-1 of a request (their slots are taken)."""
        self.num_scheduled_tokens[state.req_id] = k
        state.num_computed_tokens = start + k  # as vLLM: computed by the end of the step
        if start + k == state.num_tokens:
            self.sampling.append(state)
        if start >= state.prefill_end:
            self.decode.append(state.req_id)
            return
        self.prefill.append((state.req_id, k))
        if start + k < state.prefill_end:
            self.prompt_left[state.req_id] = state.prefill_end - start - k
        if start < state.max_computed:  # only after a preemption by recompute
            self.recomputed += min(start + k, state.max_computed) - start


def schedule_running(sched: SchedulerState, plan: StepPlan, budget: int) -> int:
    """Schedule the running requests (preempting when short); returns the budget left."""
    running, pool, size = sched.running, sched.pool, sched.pool.page_size
    i = 0
    while i < len(running) and budget > 0:
        state = running[i]
        start = state.num_computed_tokens
        if start >= state.prefill_end:  # decodes (their prompts are done): the fast path
            n = _decode(sched, plan, i, budget)
            i, budget = i + n, budget - n
            if not n:  # running[i] needs a page for its next token, none is left
                short = PageShortfall(state.req_id, start + 1, start + 1, 1)
                if preempt(sched, plan, running.pop(), short) is state:
                    break  # nothing behind it runs either
            continue  # with the next request, or retry with the pages the victim left
        # the next chunk of a prompt (at most the budget)
        k = min(state.num_tokens - start, budget)
        # Pages the chunk fills past the last one (page_size 4: 6 + 7 tokens -> 2).
        need = (start + k + size - 1) // size - (start + size - 1) // size
        short = PageShortfall(state.req_id, start + 1, start + k, need)
        while need > pool.num_available_pages and running[-1] is not state:
            preempt(sched, plan, running.pop(), short)
        if need > pool.num_available_pages:
            preempt(sched, plan, running.pop(), short)
            break
        for token in _tokens(state, start, start + k):
            sched.manager.append_slot(state.req_id, token)
        plan.add(state, start, k)
        budget -= k
        i += 1
    return budget


def _decode(sched: SchedulerState, plan: StepPlan, first: int, budget: int) -> int:
    """One token each for running[first], running[first + 1], ... until a request mid-prompt,
    the end of the budget or a request the pool has no page for; returns how many got it.

    NOTE: this runs once per step for every decoding request of a simulation, so the whole
    run goes to the manager at once (`append_tokens`, one operation per token as
    `append_slot`) and `plan.add_decodes` records it in bulk. A request the pool has no
    page for is left unchanged, so the caller may preempt and ask again."""
    states = []
    for state in islice(sched.running, first, first + budget):
        if state.num_computed_tokens < state.prefill_end:
            break
        states.append(state)
    req_ids = [state.req_id for state in states]
    done = sched.manager.append_tokens(req_ids, [s.output[-1] for s in states])
    decoded = states[:done]
    for state in decoded:
        state.num_computed_tokens += 1  # as vLLM: computed by the end of the step
    plan.add_decodes(decoded, req_ids[:done])
    return done


def schedule_waiting(sched: SchedulerState, plan: StepPlan, budget: int) -> None:
    """Admit waiting requests in queue order while budget, max_num_seqs and pages allow."""
    waiting, running = sched.waiting, sched.running
    while len(waiting) and budget > 0 and len(running) < sched.max_num_seqs:
        state = waiting[0]
        k = _admit(sched, plan, state, budget)
        if not k:
            break
        waiting.pop()
        if state.status is RequestStatus.WAITING:
            plan.new.append(
                NewRequestData(state.req_id, state.prompt_token_ids, state.max_new_tokens, state.seed)
            )
        else:
            plan.emit("resume", state.req_id, f"{count(k, 'token')} to compute")
        state.status = RequestStatus.RUNNING
        if sched.policy == "priority":  # the running list stays in (priority, arrival) order
            bisect.insort(running, state, key=lambda s: s.sort_key)
        else:
            running.append(state)
        budget -= k


def _resumed_reason(state: RequestState, why: str, n: int) -> str:
    """The pool's reason, with a resumed request's tokens split into prompt and generated
    ones: the pool calls all n tokens a sequence is admitted with its prompt."""
    prompt = len(state.prompt_token_ids)
    if n <= prompt:
        return why
    return why.replace(f"prompt of {n} tokens", f"{n} tokens ({prompt} prompt + {n - prompt} generated)", 1)


def _admit(sched: SchedulerState, plan: StepPlan, state: RequestState, budget: int) -> int:
    """Add the request's sequence with the tokens this step computes (plus its prefix hits
    and, after a swap, its swapped tokens); returns the tokens to compute, 0 if refused."""
    manager, req_id, total = sched.manager, state.req_id, state.num_tokens
    swapped = state.num_swapped_tokens if state.swap_pages is not None else 0
    end = total  # the tokens the sequence is added with
    try:
        if swapped or total <= budget:
            end = min(total, swapped + budget)
        else:
            hits = manager.plan_add(req_id, state.token_ids).num_cached_tokens
            if total - hits > budget and not sched.enable_chunked_prefill:
                return 0
            end = min(total, hits + budget)
        hits = manager.add(req_id, state.token_ids[:end])
    except Exception as exc:  # noqa: BLE001 - plan_add and add change nothing when they raise
        # Out of pages, or an id another user of the SequenceManager took since add_request.
        why = _resumed_reason(state, str(exc), end)
        plan.refused = f"request {req_id!r} cannot be admitted: {why}"
        if isinstance(exc, OutOfPagesError):
            counts = (exc.tokens, exc.pages_needed, exc.free, exc.evictable, exc.own_hits)
        else:
            counts = (None,) * 5
        plan.refused_request = Refusal(req_id, why, *counts)
        return 0
    start = hits
    if state.swap_pages is not None:
        if hits < swapped:  # the pages the prefix cache did not cover come back from swap
            size, table = sched.pool.page_size, manager.block_table(req_id)
            blocks = range(hits // size, -(-swapped // size))
            plan.swap_in += [(state.swap_pages[b], table[b]) for b in blocks]
            manager.set_computed(req_id, swapped)
            start = swapped
        sched.swap_space.free(state.swap_pages)
        state.swap_pages = None
    state.prefill_end = total
    plan.add(state, start, end - start)
    return end - start


def preempt(sched: SchedulerState, plan: StepPlan, state: RequestState, short: PageShortfall) -> RequestState:
    """Free a running request's pages (listing them for a swap-out first in swap mode) and
    requeue it: at the front under "fcfs", by its priority under "priority"; `short` is the
    request whose pages fell short, recorded beside it. Returns it."""
    table = sched.manager.block_table(state.req_id)
    mode = sched.preemption_mode
    if mode == "swap":
        slots = sched.swap_space.allocate(len(table))
        if slots is None:
            mode = "recompute"  # the swap space is full
        else:
            plan.swap_out += zip(table, slots)
            state.swap_pages, state.num_swapped_tokens = slots, state.num_computed_tokens
    sched.manager.free(state.req_id)  # every token it holds was computed by an earlier step
    state.status = RequestStatus.PREEMPTED
    state.num_preemptions += 1
    sched.waiting.prepend(state)
    plan.preempted.append((state.req_id, mode))
    plan.short_of_pages.append(short)
    state.max_computed = max(state.max_computed, state.num_computed_tokens)
    state.num_computed_tokens = 0
    plan.emit("preempt", state.req_id, f"{mode}: {len(table)} pages released")
    return state


def _tokens(state: RequestState, start: int, end: int) -> list[int]:
    """state.token_ids[start:end] without building the whole list."""
    prompt, output = state.prompt_token_ids, state.output
    p = len(prompt)
    if end <= p:
        return prompt[start:end]
    if start >= p:
        return output[start - p : end - p]
    return prompt[start:] + output[: end - p]
