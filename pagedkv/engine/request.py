"""A request, its status, and the two waiting queues (first come, or by priority).

`Request` is what a caller (a workload generator, a benchmark) hands the scheduler;
`RequestState` is the scheduler's record of how far it got. vLLM v1 keeps the same things in
`vllm/v1/request.py` (`Request`, `RequestStatus`) and
`vllm/v1/core/sched/request_queue.py` (an FCFS deque and a priority heap). A request's status is one of
WAITING (never run), RUNNING, PREEMPTED (waiting again after a preemption) and FINISHED,
with the reason: "length" (it generated `max_new_tokens`) or "aborted".

The priority queue is a heap of (priority, arrival) keys, as vLLM's: lower value first,
ties by arrival. Admission and requeueing cost O(log n), so a simulation of 100,000
waiting requests does not pay for the length of its queue; iterating it (the dashboard,
the metrics, the tests) sorts a copy, so it still shows the order admission will take.

Leaves out: vLLM's other statuses (waiting for remote K/V, for a grammar, ...) and stop
strings or EOS tokens as finish reasons.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from enum import Enum


@dataclass(frozen=True)
class Request:
    """One generation request, as `Scheduler.add_requests` takes it."""

    req_id: str
    prompt_token_ids: list[int]
    max_new_tokens: int  # the output length: generation stops after this many tokens
    n: int = 1  # parallel samples of the output (vLLM's SamplingParams.n)
    seed: int = 0  # seed of this request's sampling (temperature > 0)

    @property
    def prompt_len(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def final_len(self) -> int:
        """Tokens the request holds when it finishes (the last one never gets a slot)."""
        return self.prompt_len + self.max_new_tokens - 1


class RequestStatus(str, Enum):
    """Where a request is; compares equal to its lower-case name ("waiting", ...)."""

    WAITING = "waiting"
    RUNNING = "running"
    PREEMPTED = "preempted"
    FINISHED = "finished"

    def __str__(self) -> str:
        return self.value


@dataclass(eq=False, slots=True)
class RequestState:
    """A request and how far it got (what `Scheduler.request(req_id)` returns)."""

    req_id: Hashable
    prompt_token_ids: list[int]
    max_new_tokens: int
    arrival: int  # order of add_request: the tie-break of both policies
    priority: int = 0  # lower runs first under policy="priority"
    seed: int = 0  # seeds the runner's sampling of this request
    output: list[int] = field(default_factory=list)  # generated tokens
    status: RequestStatus = RequestStatus.WAITING
    finish_reason: str | None = None  # "length" | "aborted" once FINISHED
    num_preemptions: int = 0
    num_computed_tokens: int = 0  # tokens with K/V in the pool by the end of the step
    prefill_end: int = 0  # tokens its prefill runs up to, set at each admission
    max_computed: int = 0  # most tokens it ever had computed (what a recompute repeats)
    swap_pages: list[int] | None = None  # swap-space pages holding its K/V while swapped out
    num_swapped_tokens: int = 0  # tokens those pages hold

    @property
    def token_ids(self) -> list[int]:
        """Prompt and generated tokens: what a resumed sequence is re-admitted with."""
        return self.prompt_token_ids + self.output

    @property
    def num_tokens(self) -> int:
        """len(token_ids), without building the list."""
        return len(self.prompt_token_ids) + len(self.output)

    @property
    def sort_key(self) -> tuple[int, int]:
        return (self.priority, self.arrival)


class FCFSQueue:
    """Waiting requests in arrival order; a preempted request goes back to the front."""

    def __init__(self) -> None:
        self._queue: deque[RequestState] = deque()

    def add(self, state: RequestState) -> None:
        self._queue.append(state)

    def prepend(self, state: RequestState) -> None:
        self._queue.appendleft(state)

    def pop(self) -> RequestState:
        return self._queue.popleft()

    def remove(self, state: RequestState) -> None:
        self._queue.remove(state)

    def __getitem__(self, i: int) -> RequestState:
        return self._queue[i]

    def __iter__(self) -> Iterator[RequestState]:
        return iter(self._queue)

    def __len__(self) -> int:
        return len(self._queue)


class PriorityQueue(FCFSQueue):
    """Waiting requests by (priority, arrival); a preempted request takes its place again."""

    def __init__(self) -> None:
        # (priority, arrival, request): arrivals are distinct, so requests are never compared
        self._heap: list[tuple[int, int, RequestState]] = []

    def add(self, state: RequestState) -> None:
        heapq.heappush(self._heap, (state.priority, state.arrival, state))

    prepend = add  # vLLM's priority queue re-adds a preempted request by its key, too

    def pop(self) -> RequestState:
        return heapq.heappop(self._heap)[2]

    def remove(self, state: RequestState) -> None:
        """O(n), as in vLLM: only an abort takes a request from the middle of the queue."""
        kept = [entry for entry in self._heap if entry[2] is not state]
        if len(kept) == len(self._heap):
            raise ValueError(f"request {state.req_id!r} is not in the queue")
        heapq.heapify(kept)
        self._heap = kept

    def __getitem__(self, i: int) -> RequestState:
        return self._heap[0][2] if i == 0 else self._sorted()[i]

    def __iter__(self) -> Iterator[RequestState]:
        return iter(self._sorted())

    def __len__(self) -> int:
        return len(self._heap)

    def _sorted(self) -> list[RequestState]:
        return [entry[2] for entry in sorted(self._heap)]


QUEUES = {"fcfs": FCFSQueue, "priority": PriorityQueue}


class UnknownRequestError(KeyError):
    """No request of this scheduler has this id."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0])
