"""What the Scheduler hands out: a `SchedulerOutput` per step, a `StepRecord` once it ran,
and running `SchedulerStats`.

`SchedulerOutput` is vLLM v1's object of the same name: which requests run and how many
tokens each computes (`num_scheduled_tokens`), which were preempted and how, and, from
vLLM v0's `SchedulerOutputs`, the page copies a runner performs before computing
(`swap_out`, `swap_in`) or that the pool already performed (`copy_on_write`). A model
runner reads it; `Scheduler.update_from_output` then turns the sampled tokens into a
`StepRecord` (what was prefilled, decoded, sampled, finished). `SchedulerStats` is the
scheduler's share of vLLM's metrics (`num_preemptions`, token totals).

Leaves out: vLLM's per-request timing (queue time, time to first token) — pagedkv counts
steps, never wall time — and its speculative-decoding and encoder fields.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import asdict, dataclass
from typing import NamedTuple

from pagedkv.core.plumbing.words import count

# NOTE: the two records of a step are NamedTuples, immutable as a frozen dataclass would be
# but built several times faster (a frozen dataclass sets each field through
# `object.__setattr__`); a simulation builds two per step, hundreds of thousands per run.


class NewRequestData(NamedTuple):
    """A request scheduled for the first time: what a runner needs to set up its sampling."""

    req_id: Hashable
    prompt_token_ids: list[int]
    max_new_tokens: int
    seed: int


class SchedulerOutput(NamedTuple):
    """What one `schedule()` decided; a runner computes it, `update_from_output` applies it."""

    step: int  # from 1: the k-th schedule() plans step k
    num_scheduled_tokens: dict[Hashable, int]  # req id -> tokens to compute, batch order
    sampling: tuple[Hashable, ...]  # of those, the requests whose every token is computed
    # after this step: each samples one token (a request mid-prompt does not)
    scheduled_new_reqs: tuple[NewRequestData, ...]  # scheduled for the first time
    preempted: tuple[tuple[Hashable, str], ...]  # (req id, "recompute" | "swap")
    swap_out: tuple[tuple[int, int], ...]  # (page, swap slot): copy before computing
    swap_in: tuple[tuple[int, int], ...]  # (swap slot, page): copy before computing
    copy_on_write: tuple[tuple[int, int], ...]  # (src page, dst page), already copied by the pool
    finished_req_ids: tuple[Hashable, ...]  # finished or aborted since the last output

    @property
    def total_num_scheduled_tokens(self) -> int:
        return sum(self.num_scheduled_tokens.values())


class PageShortfall(NamedTuple):
    """A running request the pool could not give the pages its tokens of the step need, so
    the scheduler preempted (vLLM v1: `allocate_slots` returned None for it)."""

    req_id: Hashable
    first_token: int  # its tokens of the step, counted from 1
    last_token: int
    pages_needed: int  # new pages those tokens need


class StepRecord(NamedTuple):
    """What one step did, once its tokens were computed and sampled."""

    step: int  # from 1, as in the SchedulerOutput it ran
    prefill: tuple[tuple[Hashable, int], ...]  # (req id, tokens computed) of prompt chunks
    decode: tuple[Hashable, ...]  # running sequences that got one token
    preempted: tuple[tuple[Hashable, str], ...]  # (req id, "recompute" | "swap")
    finished: tuple[Hashable, ...]
    sampled: dict[Hashable, int]  # req id -> token sampled this step
    num_batched_tokens: int  # tokens whose K/V were computed
    recomputed_tokens: int  # of those, tokens computed before a recompute preemption
    evicted_pages: int  # CACHED pages reclaimed by the pool during the step
    swap_out_bytes: int  # K/V copied pool -> swap space (whole pages)
    swap_in_bytes: int  # K/V copied swap space -> pool (pages the prefix cache did not cover)
    prompt_left: dict[Hashable, int]  # req id -> prompt tokens still to prefill (chunked)
    short_of_pages: tuple[PageShortfall, ...] = ()  # one per preemption, in `preempted`'s order:
    # the request the pool could not serve, which caused it (the victim itself, or another)

    @property
    def decision(self) -> str:
        """What ran, what was preempted and what finished, without a step number: the
        words after `summary()`'s "step N: " (e.g. "decode A; preempt B (recompute)")."""
        parts = []
        if self.prefill:
            parts.append("prefill " + ", ".join(self._chunk(r, n) for r, n in self.prefill))
        if self.decode:
            parts.append("decode " + " ".join(map(str, self.decode)))
        if self.preempted:
            parts.append("preempt " + ", ".join(f"{r} ({m})" for r, m in self.preempted))
        if self.finished:
            parts.append("finished " + " ".join(map(str, self.finished)))
        return "; ".join(parts) or "idle"

    def summary(self) -> str:
        """One line: the step's number (from 1, as `stats.steps` after it), then its `decision`."""
        return f"step {self.step}: {self.decision}"

    def _chunk(self, req_id: Hashable, n: int) -> str:
        left = self.prompt_left.get(req_id, 0)
        if left:
            return f"{req_id} ({count(n, 'token')}, {left} left)"
        return f"{req_id} ({count(n, 'token')})"


@dataclass(frozen=True)
class Refusal:
    """Why a step could not admit the waiting queue's head: its req id, the reason in words,
    and, when the pool was short of pages, the counts of the pool's `OutOfPagesError` (else
    None): the tokens it was to be added with, the new pages they need, FREE pages,
    evictable CACHED pages and CACHED pages that are its own prefix hits."""

    req_id: Hashable
    reason: str
    tokens: int | None = None
    pages_needed: int | None = None
    free: int | None = None
    evictable: int | None = None
    own_hits: int | None = None


@dataclass(slots=True)
class SchedulerStats:
    """Totals since the scheduler was created."""

    steps: int = 0
    prefill_tokens: int = 0
    decode_tokens: int = 0
    preemptions: int = 0  # vLLM: num_preemptions
    recomputed_tokens: int = 0
    swap_out_bytes: int = 0
    swap_in_bytes: int = 0
    finished: int = 0  # by length
    aborted: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)
