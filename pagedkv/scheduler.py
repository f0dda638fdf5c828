"""Scheduler: continuous batching over the paged KV cache, with preemption.

Like vLLM's, it keeps a *waiting* queue (FCFS) and a *running* list (admission order), and
each `step()` builds one batch: every running sequence gets one decode token; when the pool
cannot give one the page it needs, the **most recently admitted** running sequence is
preempted (possibly the one asking) until it fits (vLLM v1's rule). Only if nothing was
preempted are waiting requests admitted, front first, while `max_num_seqs`, the token
budget `max_num_batched_tokens` and the pool allow; a whole prompt is prefilled in one
step. TinyLM then computes K/V of every scheduled token and samples each next token
(without a model, bookkeeping-only mode takes tokens from a seeded script: for large
simulations).

Preemption by **recompute** (vLLM v1's only mode) frees the sequence's pages (full ones stay
CACHED, so on resume its own prefix is a prefix hit unless evicted) and requeues it at the
*front*; on resume prompt + generated tokens are prefilled again. By **swap** (vLLM v0) the
K/V of all its pages are first copied to a `SwapSpace` of `swap_space_pages` pages. On
resume it is re-admitted through `add`, so pages still in the prefix cache are hits, and
only the K/V of the tokens the hits did not cover are copied back: a deliberate difference
from v0, which copied every swapped block back. v0 recomputed by default (cheaper) and
swapped only groups of several sequences (parallel sampling, beam search), for which it did
not support recompute; here `preemption_mode` applies to every sequence, so the two modes can
be compared. When the swap space cannot hold the victim, v0 raised "Aborted due to the lack
of CPU swap space" and stopped the engine; pagedkv preempts that victim by recompute
instead, which is what v0 did for a single sequence anyway and loses no request. Either
way a resumed sequence generates exactly the tokens of an uninterrupted run.

Leaves out: chunked prefill (a request that could outgrow the token budget is refused up
front), parallel-sampling and beam-search groups (`bench sharing` drives `fork` directly),
priorities, arrival times. Admission checks the budget against the whole prompt, a bound
that ignores prefix hits (vLLM v1 looks them up first and counts only the rest).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable
from collections.abc import Sequence as SequenceLike
from dataclasses import dataclass, field

import numpy as np

from .model import TinyLM
from .pool import Event, OutOfPagesError
from .scheduler_output import SchedulerStats, StepRecord
from .sequence import SequenceManager
from .swap import SwapSpace
from .validation import check_seq_id, check_tokens
from .workloads import Request

PREEMPTION_MODES = ("recompute", "swap")


@dataclass(eq=False)
class RequestState:
    """A request and how far it got."""

    req_id: Hashable
    prompt_token_ids: list[int]
    max_new_tokens: int
    output: list[int] = field(default_factory=list)  # generated tokens
    status: str = "waiting"  # waiting | running | finished
    num_preemptions: int = 0
    swap_pages: list[int] | None = None  # SwapSpace pages holding its K/V while swapped out
    rng: np.random.Generator | None = field(default=None, repr=False)  # sampling (model mode)
    script: list[int] | None = field(default=None, repr=False)  # tokens (bookkeeping mode)

    @property
    def token_ids(self) -> list[int]:
        """Prompt and generated tokens: what a resumed sequence is re-admitted with."""
        return self.prompt_token_ids + self.output


class Scheduler:
    """Continuous batching of requests over one SequenceManager (and optionally TinyLM)."""

    def __init__(
        self,
        seqs: SequenceManager,
        model: TinyLM | None = None,
        *,
        max_num_seqs: int = 64,
        max_num_batched_tokens: int = 2048,
        preemption_mode: str = "recompute",
        swap_space_pages: int = 0,
        temperature: float = 0.0,
    ) -> None:
        if not isinstance(seqs, SequenceManager):
            raise TypeError(f"seqs must be a SequenceManager, got {type(seqs).__name__}")
        if model is not None and not isinstance(model, TinyLM):
            raise TypeError(f"model must be a TinyLM or None, got {type(model).__name__}")
        for name, value, low in (
            ("max_num_seqs", max_num_seqs, 1),
            ("max_num_batched_tokens", max_num_batched_tokens, max_num_seqs),
            ("swap_space_pages", swap_space_pages, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= 1 << 24:
                raise ValueError(f"{name} must be an int in [{low}, {1 << 24}], got {value!r}")
        if preemption_mode not in PREEMPTION_MODES:
            raise ValueError(f"preemption_mode must be one of {PREEMPTION_MODES}, got {preemption_mode!r}")
        if not isinstance(temperature, (int, float)) or not 0 <= temperature < float("inf"):
            raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
        self.seqs, self.pool, self.model = seqs, seqs.pool, model
        self.max_num_seqs, self.max_num_batched_tokens = max_num_seqs, max_num_batched_tokens
        self.preemption_mode, self.temperature = preemption_mode, float(temperature)
        self.swap_space = SwapSpace(self.pool, swap_space_pages)
        self.requests: dict[Hashable, RequestState] = {}  # every request ever added, in order
        self.waiting: deque[RequestState] = deque()
        self.running: list[RequestState] = []  # admission order: the last is preempted first
        self.stats = SchedulerStats()
        self._listeners: list[Callable[[Event], None]] = []
        self._refused = ""  # why the last admission attempt failed (run() reports a stall)

    # ---- requests --------------------------------------------------------------------------

    def add_request(
        self,
        req_id: Hashable,
        prompt_token_ids: SequenceLike[int],
        max_new_tokens: int,
        *,
        seed: int = 0,
    ) -> None:
        """Queue a request (FCFS). `seed` seeds its sampling when temperature > 0."""
        check_seq_id("req_id", req_id)
        if req_id in self.requests:
            raise ValueError(f"req_id {req_id!r} was already added")
        if req_id in self.seqs:  # admission would fail: the id is taken in the SequenceManager
            raise ValueError(f"req_id {req_id!r} is a live sequence of the SequenceManager")
        tokens, _ = check_tokens("prompt_token_ids", prompt_token_ids)
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int):
            raise TypeError(f"max_new_tokens must be an int, got {max_new_tokens!r}")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be an int >= 1, got {max_new_tokens!r}")
        if self.model is not None and max(tokens) > 255:
            raise ValueError(f"prompt_token_ids must be TinyLM tokens (0..255), got {max(tokens)}")
        # A resumed sequence is prefilled with up to prompt + max_new_tokens - 1 tokens at once.
        longest = len(tokens) + max_new_tokens - 1
        if longest > self.max_num_batched_tokens:
            raise ValueError(
                f"prompt of {len(tokens)} tokens + max_new_tokens={max_new_tokens} - 1 exceeds "
                f"max_num_batched_tokens={self.max_num_batched_tokens} (no chunked prefill)"
            )
        if -(-longest // self.pool.page_size) > self.pool.num_pages:
            raise ValueError(
                f"the request grows to {longest} tokens, more than the pool's "
                f"{self.pool.num_pages} pages x {self.pool.page_size} slots can hold"
            )
        state = RequestState(req_id, tokens, max_new_tokens)
        if self.model is None:  # bookkeeping mode: the "generated" tokens are a seeded script
            state.script = np.random.default_rng(seed).integers(0, 32_000, max_new_tokens).tolist()
        else:
            state.rng = np.random.default_rng(seed)
        self.requests[req_id] = state
        self.waiting.append(state)

    def add_requests(self, requests: Iterable[Request]) -> None:
        """Queue workload requests (n = 1, no beam search) in order."""
        for r in requests:
            if r.n != 1 or r.beam_width != 1:
                raise ValueError(f"request {r.req_id!r}: the scheduler needs n = beam_width = 1")
            self.add_request(r.req_id, r.prompt_token_ids, r.max_new_tokens, seed=r.seed)

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
        """Call `callback(Event(clock, kind, -1, req_id, detail))` on "preempt" and "resume"
        (page_id is -1: the event concerns a sequence, not one page)."""
        if not callable(callback):
            raise TypeError(f"callback must be callable, got {type(callback).__name__}")
        self._listeners.append(callback)

    def remove_listener(self, callback: Callable[[Event], None]) -> None:
        self._listeners.remove(callback)

    def _emit(self, kind: str, req_id: Hashable, detail: str) -> None:
        for callback in self._listeners:
            callback(Event(self.pool.clock, kind, -1, req_id, detail))

    # ---- one step --------------------------------------------------------------------------

    def step(self) -> StepRecord:
        """Schedule, run and sample one batch; return what happened.

        Every token scheduled is computed before the step returns, and a sequence is freed
        only with all its tokens computed (the SequenceManager's contract: its full pages are
        already indexed for prefix hits)."""
        seqs, running, waiting = self.seqs, self.running, self.waiting
        lost = [s.req_id for s in running if s.req_id not in seqs]
        if lost:  # checked before anything changes: these cannot be decoded
            raise RuntimeError(f"running requests {lost} were freed outside the scheduler")
        evictions = self.pool.stats.evictions
        preempted, prefill = [], []  # (req id, mode), (req id, tokens to compute)
        out_bytes = in_bytes = recomputed = 0
        append_slot, i = seqs.append_slot, 0
        while i < len(running):
            state = running[i]
            try:
                append_slot(state.req_id, state.output[-1])
                i += 1
            except OutOfPagesError:
                # The victim comes from the tail, at or past i: it has appended nothing this
                # step, so every token of its pages was computed by an earlier step.
                victim = running.pop()
                mode, copied = self._preempt(victim)
                preempted.append((victim.req_id, mode))
                out_bytes += copied
        batch = list(running)  # every survivor decodes one token
        budget = self.max_num_batched_tokens - len(batch)
        while not preempted and waiting and len(running) < self.max_num_seqs:
            state = waiting[0]
            tokens = state.token_ids
            if (1 if state.swap_pages is not None else len(tokens)) > budget:
                break
            try:
                num_cached = seqs.add(state.req_id, tokens)
            except Exception as exc:  # noqa: BLE001 - add changes nothing when it raises
                # Out of pages, or an id another user of the SequenceManager took since
                # add_request: stop admitting, and run what this step already scheduled.
                self._refused = f"request {state.req_id!r} cannot be admitted: {exc}"
                break
            waiting.popleft()
            state.status = "running"
            running.append(state)
            if state.swap_pages is not None:  # the K/V of all but the last token come back
                in_bytes += self._swap_in(state, num_cached, len(tokens) - 1)
                num_cached = len(tokens) - 1
            elif state.output:  # recompute: everything before the last token ran before
                recomputed += len(tokens) - 1 - num_cached
            n = len(tokens) - num_cached
            if state.num_preemptions:
                self._emit("resume", state.req_id, f"{n} token{'s' * (n != 1)} to compute")
            prefill.append((state.req_id, n))
            batch.append(state)
            budget -= n
        sampled = self._run(batch)
        finished = []
        for state, token in zip(batch, sampled, strict=True):
            output = state.output
            output.append(token)
            if len(output) == state.max_new_tokens:
                seqs.free(state.req_id)  # computed just now; the new token never gets a slot
                running.remove(state)
                state.status = "finished"
                finished.append(state.req_id)
        num_decode = len(batch) - len(prefill)
        st = self.stats
        st.steps += 1
        st.decode_tokens += num_decode
        st.prefill_tokens += sum(n for _, n in prefill)
        st.preemptions += len(preempted)
        st.recomputed_tokens += recomputed
        st.swap_out_bytes += out_bytes
        st.swap_in_bytes += in_bytes
        st.finished += len(finished)
        return StepRecord(
            step=st.steps - 1,
            prefill=tuple(prefill),
            decode=tuple(s.req_id for s in batch[:num_decode]),
            preempted=tuple(preempted),
            finished=tuple(finished),
            sampled={s.req_id: t for s, t in zip(batch, sampled, strict=True)},
            num_batched_tokens=num_decode + sum(n for _, n in prefill),
            recomputed_tokens=recomputed,
            evicted_pages=self.pool.stats.evictions - evictions,
            swap_out_bytes=out_bytes,
            swap_in_bytes=in_bytes,
        )

    def run(self, max_steps: int | None = None, progress: bool = False) -> dict[Hashable, list]:
        """Step until every request finished (or max_steps); returns `outputs`. With
        `progress`, a tqdm bar counts finished requests. Raises RuntimeError when a step
        can do nothing (pages or an id held outside the scheduler block the next request)."""
        bar = None
        if progress:
            from tqdm.auto import tqdm  # imported only when asked for: it takes ~0.1 s

            bar = tqdm(total=len(self.requests), initial=self.stats.finished, unit="req")
        steps = 0
        while self.has_unfinished and (max_steps is None or steps < max_steps):
            record = self.step()
            if not (record.sampled or record.preempted):
                raise RuntimeError(f"no progress: nothing is running and {self._refused}")
            if bar is not None:
                bar.update(len(record.finished))
            steps += 1
        if bar is not None:
            bar.close()
        return self.outputs

    # ---- internals -------------------------------------------------------------------------

    def _run(self, batch: list[RequestState]) -> list[int]:
        """Compute the scheduled tokens and sample one new token per sequence."""
        if not batch:
            return []
        if self.model is None:
            return [s.script[len(s.output)] for s in batch]
        logits = self.model.forward(self.seqs, [s.req_id for s in batch])  # [B, vocab]
        return [TinyLM.sample(logits[b : b + 1], self.temperature, s.rng)[0] for b, s in enumerate(batch)]

    def _preempt(self, state: RequestState) -> tuple[str, int]:
        """Free a running sequence's pages (after copying them out in swap mode); requeue it
        at the front. Returns the mode used and the bytes copied to the swap space."""
        table = self.seqs.block_table(state.req_id)
        mode, copied = self.preemption_mode, 0
        if mode == "swap":
            state.swap_pages = self.swap_space.swap_out(table)
            if state.swap_pages is None:
                mode = "recompute"  # the swap space is full
            else:
                copied = len(table) * self.swap_space.page_bytes
        self.seqs.free(state.req_id)
        state.status = "waiting"
        state.num_preemptions += 1
        self.waiting.appendleft(state)
        self._emit("preempt", state.req_id, f"{mode}: {len(table)} pages released")
        return mode, copied

    def _swap_in(self, state: RequestState, start: int, end: int) -> int:
        """Copy K/V of positions start..end-1 back from the swap space; free its pages there."""
        self.swap_space.swap_in(state.swap_pages, start, self.seqs.slot_mapping(state.req_id, start, end))
        self.seqs.set_computed(state.req_id, end)
        state.swap_pages = None
        return (end - start) * self.pool.config.bytes_per_token
