"""The paged Scheduler's decisions in the serving run, counted in integers.

`serving.serve(..., "paged")` needs, per step, what `Scheduler.step` decides for a
bookkeeping-only pool with prefix caching off: which running requests decode, which waiting
ones are admitted (and with how many tokens), which are preempted, which finish, and how many
pages are in use. Driving the real `Scheduler` with 8,000 requests spends most of its time
storing token ids, checking them and filling block tables that this run never reads. This
class keeps, per request, only the counts those decisions depend on and applies the
Scheduler's rules (`pagedkv.engine.step_plan`) in the same order:

- running requests first, in admission order: each decoding request takes one slot (a new
  page when its last is full); the first that finds no page makes the last admitted request
  give up its pages (preemption by recompute: back to the front of the queue) and asks again,
  or stops the step if it was the victim itself; a request mid-prompt takes its next chunk;
- then, if nobody was preempted, waiting requests in queue order while the token budget,
  `max_num_seqs` and the pages allow (a prompt larger than the budget left is chunked);
- every request whose last computed token ends its sequence samples one token; one that
  reaches `max_new_tokens` finishes and frees its pages.

`tests/test_serving.py` runs both on the same traces and requires the same record at every
step, so this is the Scheduler's run, only cheaper to count.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import islice

from pagedkv.labs.workloads import Request


@dataclass
class PagedStep:
    """One step as `StepRecord` gives it, in request indices."""

    num_batched_tokens: int = 0
    prefill: list[int] = field(default_factory=list)  # tokens of each prompt (chunk) computed
    sampled: list[int] = field(default_factory=list)  # requests that sampled a token
    finished: list[int] = field(default_factory=list)  # of those, the ones that finished


class PagedCounts:
    """A paged pool of `num_slots // page_size` pages serving `requests` as the Scheduler
    does (FCFS, recompute preemption, chunked prefill, no prefix caching)."""

    def __init__(
        self, requests: Sequence[Request], num_slots: int, page_size: int, max_num_seqs: int, budget: int
    ) -> None:
        self.page_size, self.num_pages = page_size, num_slots // page_size
        self.free_pages, self.max_num_seqs, self.budget = self.num_pages, max_num_seqs, budget
        self.prompt = [r.prompt_len for r in requests]
        self.max_new = [r.max_new_tokens for r in requests]
        count = len(requests)
        self.held = [0] * count  # tokens holding a slot
        self.out = [0] * count  # tokens generated
        self.computed = [0] * count  # tokens computed (as vLLM: counted when scheduled)
        self.prefill_end = [0] * count
        self.running: list[int] = []
        self.waiting: deque[int] = deque()
        self.tokens = 0  # slots holding a token, over all requests
        self.preemptions = 0

    @property
    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def add(self, index: int) -> None:
        self.waiting.append(index)

    def _pages(self, tokens: int) -> int:
        return -(-tokens // self.page_size)

    def _release(self, r: int) -> None:
        self.free_pages += self._pages(self.held[r])
        self.tokens -= self.held[r]
        self.held[r] = 0

    def _preempt(self) -> int:
        victim = self.running.pop()
        self._release(victim)
        self.computed[victim] = 0
        self.waiting.appendleft(victim)
        self.preemptions += 1
        return victim

    def _schedule(self, step: PagedStep, r: int, start: int, k: int) -> None:
        """Tokens start..start+k-1 of request r are computed this step (`StepPlan.add`)."""
        self.computed[r] = start + k
        step.num_batched_tokens += k
        if start + k == self.prompt[r] + self.out[r]:
            step.sampled.append(r)
        step.prefill.append(k)

    def _decode(self, step: PagedStep, first: int, budget: int) -> int:
        """One slot each for running[first], ... (`step_plan._decode`); how many got one."""
        done, size, computed, held = 0, self.page_size, self.computed, self.held
        for r in islice(self.running, first, first + budget):
            if computed[r] < self.prefill_end[r]:
                break
            if held[r] % size == 0:
                if not self.free_pages:
                    break
                self.free_pages -= 1
            held[r] += 1
            computed[r] += 1
            step.sampled.append(r)
            done += 1
        self.tokens += done
        step.num_batched_tokens += done
        return done

    def _schedule_running(self, step: PagedStep) -> tuple[int, bool]:
        """`step_plan.schedule_running`: the budget left, and whether anyone was preempted."""
        running, budget, preempted, i = self.running, self.budget, False, 0
        while i < len(running) and budget > 0:
            r = running[i]
            start = self.computed[r]
            if start >= self.prefill_end[r]:
                n = self._decode(step, i, budget)
                i, budget = i + n, budget - n
                if not n:
                    preempted = True
                    if self._preempt() == r:
                        break
                continue
            k = min(self.prompt[r] + self.out[r] - start, budget)
            need = self._pages(start + k) - self._pages(start)
            while need > self.free_pages and running[-1] != r:
                self._preempt()
                preempted = True
            if need > self.free_pages:
                self._preempt()
                preempted = True
                break
            self.free_pages -= need
            self.held[r] += k
            self.tokens += k
            self._schedule(step, r, start, k)
            budget -= k
            i += 1
        return budget, preempted

    def _schedule_waiting(self, step: PagedStep, budget: int) -> None:
        """`step_plan.schedule_waiting` and `_admit` (no prefix hits, no swap)."""
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            r = self.waiting[0]
            total = self.prompt[r] + self.out[r]
            end = min(total, budget)
            if self._pages(end) > self.free_pages:
                break
            self.free_pages -= self._pages(end)
            self.held[r] = end
            self.tokens += end
            self.prefill_end[r] = total
            self._schedule(step, r, 0, end)
            self.waiting.popleft()
            self.running.append(r)
            budget -= end

    def step(self) -> PagedStep:
        """Schedule one step and apply its sampled tokens (`Scheduler.step`)."""
        step = PagedStep()
        budget, preempted = self._schedule_running(step)
        if not preempted:
            self._schedule_waiting(step, budget)
        for r in step.sampled:
            self.out[r] += 1
            if self.out[r] == self.max_new[r]:
                step.finished.append(r)
        for r in step.finished:
            self._release(r)
            self.running.remove(r)
        return step
