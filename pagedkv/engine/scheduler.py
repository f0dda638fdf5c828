"""Scheduler: continuous batching over the paged KV cache — decide, run, update, as vLLM v1.

A step is three calls, as in vLLM v1 (and nano-vllm's `schedule` / `run` / `postprocess`):
`schedule()` decides and returns a `SchedulerOutput`; a runner (`ModelRunner` around the
model it was given, or `ScriptedRunner` for bookkeeping-only simulations) computes the
scheduled tokens and samples; `update_from_output(output, sampled)` appends the sampled tokens and finishes
requests. `step()` does all three; `run()` steps to the end.

What `schedule()` does, like vLLM v1's: there is no prefill or decode phase, only requests
whose computed tokens catch up with their tokens. Running requests first: each gets
min(tokens left, token budget) tokens; when the pool cannot give the pages, the last of
the running list is preempted until they fit, possibly the one asking. The running list
is in admission order under policy "fcfs" (the victim is the last admitted) and in
(priority, arrival) order under "priority" (lower value first: the victim is the least
urgent, latest arrival, as in vLLM). Only if nothing was preempted, waiting requests are
admitted in queue order while `max_num_seqs`, the budget and the pool allow. **Chunked
prefill** (on by default, as in v1): a prompt larger than the budget left is admitted with
its first chunk and prefilled over several steps; it samples only once all its tokens are
computed. The budget counts only tokens to compute after prefix hits. A sequence gets
pages for the tokens scheduled, not for the whole prompt (vLLM's `allocate_slots`), so a
page is hashed only in the step that computes its K/V.

Preemption by **recompute** (vLLM v1's only mode) frees the request's pages (full ones stay
CACHED, so on resume its own prefix is a hit unless evicted) and requeues it at the front
(by its priority under "priority"); on resume prompt + generated tokens are prefilled
again. By **swap** (vLLM v0) its pages are listed for the runner to copy to a `SwapSpace`
of `swap_space_pages` pages first; on resume pages still in the prefix cache are hits and
only the others are copied back (v0 copied every block). A full swap space falls back to
recompute (v0 stopped the engine). `abort(req_id)` ends a waiting, running or preempted
request and releases its pages exactly as a finish does (full pages stay CACHED). Through
all of it a request generates exactly the tokens of an uninterrupted run.

**Parallel sampling** (`n` > 1) fans a request out into n independent requests
"{req_id}.{k}" seeded seed + k, as vLLM v1 does (`ParentRequest`): the samples share the
prompt's full pages through the prefix cache, each computes the prompt's last page itself.
NOTE: vLLM v0 instead forked the sequence after prefill, sharing even the partial last
page (copy-on-write on the first write); it then had to preempt, swap and free a group as
one, which v1 dropped. `fork` stays in the SequenceManager (`bench sharing` and the
scenarios drive it directly).

Leaves out: beam search (vLLM v1 runs it outside the engine), stop strings and EOS,
wall-clock arrivals and timeouts, `long_prefill_token_threshold`, async scheduling, and
preempting running requests to admit a more urgent waiting one (vLLM v1 does not either).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from collections.abc import Sequence as SequenceLike

from pagedkv.core.plumbing.events import Event
from pagedkv.core.plumbing.validation import (
    check_bool,
    check_choice,
    check_instance,
    check_int,
    check_number,
    check_seq_id,
    check_tokens,
    check_vocab,
)
from pagedkv.core.sequence import SequenceManager
from pagedkv.engine.request import QUEUES, Request, RequestState, RequestStatus, UnknownRequestError
from pagedkv.engine.runner import Model, ModelRunner, ScriptedRunner
from pagedkv.engine.sampling import SamplingParams
from pagedkv.engine.scheduler_output import Refusal, SchedulerOutput, SchedulerStats, StepRecord
from pagedkv.engine.step_plan import StepPlan, schedule_running, schedule_waiting
from pagedkv.engine.swap import SwapSpace

PREEMPTION_MODES = ("recompute", "swap")
POLICIES = ("fcfs", "priority")
RUNNING, FINISHED = RequestStatus.RUNNING, RequestStatus.FINISHED


class Scheduler:
    """Continuous batching of requests over one SequenceManager. Given a `model` (any
    object with the runner's `Model` Protocol) it computes tokens with a `ModelRunner`;
    without one, a `ScriptedRunner` keeps the books only."""

    def __init__(
        self,
        manager: SequenceManager,
        model: Model | None = None,
        *,
        max_num_seqs: int = 64,
        max_num_batched_tokens: int = 2048,
        preemption_mode: str = "recompute",
        swap_space_pages: int = 0,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        policy: str = "fcfs",
        enable_chunked_prefill: bool = True,
        free_finished: bool = True,
    ) -> None:
        check_instance("manager", manager, SequenceManager)
        self.max_num_seqs = check_int("max_num_seqs", max_num_seqs, 1, 1 << 24)
        self.max_num_batched_tokens = check_int(
            "max_num_batched_tokens", max_num_batched_tokens, max_num_seqs, 1 << 24
        )
        self.preemption_mode = check_choice("preemption_mode", preemption_mode, PREEMPTION_MODES)
        self.policy = check_choice("policy", policy, POLICIES)
        self.enable_chunked_prefill = check_bool("enable_chunked_prefill", enable_chunked_prefill)
        self.temperature = check_number("temperature", temperature, 0)
        # False keeps a finished request's sequence live (TinyLM.generate(free=False)).
        self.free_finished = check_bool("free_finished", free_finished)
        self.manager, self.pool, self.model = manager, manager.pool, model
        self.swap_space = SwapSpace(self.pool, swap_space_pages)
        self.runner: ScriptedRunner | ModelRunner = ScriptedRunner()
        if model is not None:
            sampling = SamplingParams(self.temperature, top_k, top_p)
            self.runner = ModelRunner(model, manager, self.swap_space, sampling)
        self.requests: dict[Hashable, RequestState] = {}  # every request ever added, in order
        self.waiting = QUEUES[policy]()
        self.running: list[RequestState] = []  # admission order
        self.stats = SchedulerStats()
        self._listeners: list[Callable[[Event], None]] = []
        self._refused = ""  # why the last admission attempt failed (run() reports a stall)
        self.head_refused: Refusal | None = None  # the last step tried to admit the waiting
        # queue's head and could not: its req id, why, and the pool's counts
        self._in_flight: tuple[SchedulerOutput, StepPlan] | None = None  # scheduled, not yet updated
        self._finished_ids: list[Hashable] = []  # finished or aborted since the last output

    # ---- requests --------------------------------------------------------------------------

    def add_request(
        self,
        req_id: Hashable,
        prompt_token_ids: SequenceLike[int],
        max_new_tokens: int,
        *,
        seed: int = 0,
        priority: int = 0,
        n: int = 1,
    ) -> None:
        """Queue a request. `seed` seeds its sampling; `priority` orders it under "priority";
        n > 1 queues n samples "{req_id}.{k}" seeded seed + k instead (see the module)."""
        check_seq_id("req_id", req_id)
        check_int("n", n, 1, 1024)
        ids = [req_id] if n == 1 else [f"{req_id}.{k}" for k in range(n)]
        for i in ids:
            if i in self.requests:
                raise ValueError(f"req_id {i!r} was already added")
            if i in self.manager:  # admission would fail: the id is taken in the SequenceManager
                raise ValueError(f"req_id {i!r} is a live sequence of the SequenceManager")
        tokens, _ = check_tokens("prompt_token_ids", prompt_token_ids)
        check_int("max_new_tokens", max_new_tokens, 1, 1 << 24)
        check_int("seed", seed, 0, 2**63 - 1 - n)
        check_int("priority", priority, -(2**63), 2**63 - 1)
        if self.model is not None:
            check_vocab("prompt_token_ids", tokens, self.model.vocab_size)
        # A resumed sequence holds up to prompt + max_new_tokens - 1 tokens.
        longest = len(tokens) + max_new_tokens - 1
        if not self.enable_chunked_prefill and longest > self.max_num_batched_tokens:
            raise ValueError(
                f"prompt of {len(tokens)} tokens + max_new_tokens={max_new_tokens} - 1 exceeds "
                f"max_num_batched_tokens={self.max_num_batched_tokens} (chunked prefill is off)"
            )
        if -(-longest // self.pool.page_size) > self.pool.num_pages:
            raise ValueError(
                f"the request grows to {longest} tokens, more than the pool's "
                f"{self.pool.num_pages} pages x {self.pool.page_size} slots can hold"
            )
        for k, i in enumerate(ids):
            state = RequestState(i, tokens, max_new_tokens, len(self.requests), priority, seed + k)
            self.requests[i] = state
            self.waiting.add(state)

    def add_requests(self, requests: Iterable[Request]) -> None:
        """Queue workload requests in order (one with n > 1 as its n samples)."""
        for r in requests:
            self.add_request(r.req_id, r.prompt_token_ids, r.max_new_tokens, seed=r.seed, n=r.n)

    def request(self, req_id: Hashable) -> RequestState:
        """A request's status, finish reason, prompt, output and `token_ids` (do not mutate)."""
        try:
            return self.requests[req_id]
        except (KeyError, TypeError):
            raise UnknownRequestError(f"req_id {req_id!r} was never added") from None

    def abort(self, req_id: Hashable) -> bool:
        """End a waiting, running or preempted request: its pages are released as a finish
        releases them (full pages stay CACHED). Returns False if it had already finished."""
        state = self.request(req_id)
        if self._in_flight is not None:
            raise RuntimeError("abort between steps: call update_from_output() first")
        if state.status is FINISHED:
            return False
        if state.status is RUNNING:
            self.running.remove(state)
            self.manager.free(req_id)  # every token with a slot was computed by an earlier step
        else:
            self.waiting.remove(state)
            if state.swap_pages is not None:
                self.swap_space.free(state.swap_pages)
                state.swap_pages = None
        self._finish(state, "aborted")
        self.stats.aborted += 1
        self._emit("abort", req_id, f"aborted after {len(state.output)} generated tokens")
        return True

    @property
    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    @property
    def outputs(self) -> dict[Hashable, list[int]]:
        """Generated tokens of every request so far (req id -> tokens), in order of arrival."""
        return {r.req_id: list(r.output) for r in self.requests.values()}

    @property
    def num_free_swap_pages(self) -> int:
        return self.swap_space.num_free_pages

    def add_listener(self, callback: Callable[[Event], None]) -> None:
        """Call `callback(Event(clock, kind, -1, req_id, detail))` on "preempt", "resume" and
        "abort" (page_id is -1: the event concerns a request, not one page)."""
        if not callable(callback):
            raise TypeError(f"callback must be callable, got {type(callback).__name__}")
        self._listeners.append(callback)

    def remove_listener(self, callback: Callable[[Event], None]) -> None:
        self._listeners.remove(callback)

    def _emit(self, kind: str, req_id: Hashable, detail: str) -> None:
        for callback in self._listeners:
            callback(Event(self.pool.clock, kind, -1, req_id, detail))

    def _finish(self, state: RequestState, reason: str) -> None:
        state.status, state.finish_reason = FINISHED, reason
        self._finished_ids.append(state.req_id)

    # ---- one step: schedule, run, update ---------------------------------------------------

    def schedule(self) -> SchedulerOutput:
        """Decide the next step (see the module docstring); the runner computes it."""
        if self._in_flight is not None:
            raise RuntimeError(f"step {self._in_flight[0].step} was scheduled and not yet updated")
        live = self.manager.sequences
        if not live.keys() >= {s.req_id for s in self.running}:  # before anything changes
            lost = [s.req_id for s in self.running if s.req_id not in live]
            raise RuntimeError(f"running requests {lost} were freed outside the scheduler")
        plan = StepPlan(self._emit, self.pool.stats.evictions, len(self.manager.cow_log))
        budget = schedule_running(self, plan, self.max_num_batched_tokens)
        self.head_refused = None
        if not plan.preempted:
            schedule_waiting(self, plan, budget)
            self._refused, self.head_refused = plan.refused or self._refused, plan.refused_request
        output = SchedulerOutput(
            step=self.stats.steps + 1,  # steps count from 1: the k-th step is step k
            num_scheduled_tokens=plan.num_scheduled_tokens,
            sampling=tuple(state.req_id for state in plan.sampling),
            scheduled_new_reqs=tuple(plan.new),
            preempted=tuple(plan.preempted),
            swap_out=tuple(plan.swap_out),
            swap_in=tuple(plan.swap_in),
            copy_on_write=tuple(self.manager.cow_log[plan.cow :]),
            finished_req_ids=tuple(self._finished_ids),
        )
        self._finished_ids = []
        self._in_flight = (output, plan)
        return output

    def update_from_output(self, output: SchedulerOutput, sampled: dict[Hashable, int]) -> StepRecord:
        """Append each sampled token (one per request in `output.sampling`); finish the
        requests that reached max_new_tokens (their pages released tail first)."""
        if self._in_flight is None or self._in_flight[0] is not output:
            raise ValueError("output must be the SchedulerOutput of the last schedule()")
        if not isinstance(sampled, dict) or sampled.keys() != set(output.sampling):
            raise ValueError(
                f"sampled must map exactly the requests of output.sampling {list(output.sampling)}"
            )
        plan = self._in_flight[1]
        self._in_flight = None
        finished = []
        for state, token in zip(plan.sampling, map(sampled.__getitem__, output.sampling)):
            state.output.append(token)
            if len(state.output) == state.max_new_tokens:
                finished.append(state.req_id)
        for req_id in finished:
            state = self.requests[req_id]
            if self.free_finished:
                self.manager.free(req_id)  # computed just now; the new token gets no slot
            self.running.remove(state)
            self._finish(state, "length")
        return self._record(output, plan, finished, sampled)

    def _record(self, output: SchedulerOutput, plan: StepPlan, finished: list, sampled: dict) -> StepRecord:
        """Add the step to the stats; the StepRecord of it."""
        page_bytes = self.swap_space.page_bytes
        st = self.stats
        st.steps += 1
        st.decode_tokens += len(plan.decode)
        st.prefill_tokens += sum(n for _, n in plan.prefill)
        st.preemptions += len(output.preempted)
        st.recomputed_tokens += plan.recomputed
        st.swap_out_bytes += len(output.swap_out) * page_bytes
        st.swap_in_bytes += len(output.swap_in) * page_bytes
        st.finished += len(finished)
        return StepRecord(
            step=output.step,
            prefill=tuple(plan.prefill),
            decode=tuple(plan.decode),
            preempted=output.preempted,
            finished=tuple(finished),
            sampled=sampled,
            num_batched_tokens=output.total_num_scheduled_tokens,
            recomputed_tokens=plan.recomputed,
            evicted_pages=self.pool.stats.evictions - plan.evictions,
            swap_out_bytes=len(output.swap_out) * page_bytes,
            swap_in_bytes=len(output.swap_in) * page_bytes,
            prompt_left=plan.prompt_left,
            short_of_pages=tuple(plan.short_of_pages),
        )

    def step(self) -> StepRecord:
        """Schedule, run and update one step; return what happened."""
        output = self.schedule()
        return self.update_from_output(output, self.runner.execute(output))

    def run(
        self,
        max_steps: int | None = None,
        progress: bool = False,
        on_step: Callable[[StepRecord], object] | None = None,
    ) -> dict[Hashable, list]:
        """Step until every request finished (or max_steps); returns `outputs`. With
        `progress`, a tqdm bar counts finished requests; `on_step` is called with each step's
        record. Raises RuntimeError when a step can do nothing (pages or an id held outside
        the scheduler block the next request)."""
        bar = None
        if progress:
            from tqdm.auto import tqdm  # imported only when asked for: it takes ~0.1 s

            bar = tqdm(total=len(self.requests), initial=self.stats.finished, unit="req")
        steps = 0
        while self.has_unfinished and (max_steps is None or steps < max_steps):
            record = self.step()
            if not (record.num_batched_tokens or record.preempted):
                raise RuntimeError(f"no progress: nothing is running and {self._refused}")
            if on_step is not None:
                on_step(record)
            if bar is not None:
                bar.update(len(record.finished))
            steps += 1
        if bar is not None:
            bar.close()
        return self.outputs
