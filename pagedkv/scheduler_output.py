"""What the Scheduler reports: one `StepRecord` per step and running `SchedulerStats`.

`StepRecord` is vLLM v1's `SchedulerOutput` (which requests were prefilled, decoded or
preempted, and how many tokens were scheduled) together with what the step produced (the
sampled tokens, the finished requests, the K/V copied to and from the swap space).
`SchedulerStats` is the scheduler's share of vLLM's metrics: its `num_preemptions` counter
and token totals.

Leaves out: vLLM's per-request timing (queue time, time to first token) — pagedkv counts
steps, never wall time, in anything it records.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class StepRecord:
    """What one `step()` did."""

    step: int
    prefill: tuple[tuple[Hashable, int], ...]  # (req id, tokens computed) admitted this step
    decode: tuple[Hashable, ...]  # running sequences that got one token
    preempted: tuple[tuple[Hashable, str], ...]  # (req id, "recompute" | "swap")
    finished: tuple[Hashable, ...]
    sampled: dict[Hashable, int]  # req id -> token sampled this step
    num_batched_tokens: int  # tokens whose K/V were computed
    recomputed_tokens: int  # of those, tokens computed before a recompute preemption
    evicted_pages: int  # CACHED pages reclaimed by the pool during the step
    swap_out_bytes: int  # K/V copied pool -> swap space (whole pages)
    swap_in_bytes: int  # K/V copied swap space -> pool (only tokens not hit in the prefix cache)

    def summary(self) -> str:
        """One line: what ran, what was preempted and what finished."""
        parts = []
        if self.prefill:
            parts.append("prefill " + ", ".join(f"{r} ({n} token{'s' * (n != 1)})" for r, n in self.prefill))
        if self.decode:
            parts.append("decode " + " ".join(map(str, self.decode)))
        if self.preempted:
            parts.append("preempt " + ", ".join(f"{r} ({m})" for r, m in self.preempted))
        if self.finished:
            parts.append("finished " + " ".join(map(str, self.finished)))
        return f"step {self.step}: " + ("; ".join(parts) or "idle")


@dataclass
class SchedulerStats:
    """Totals since the scheduler was created."""

    steps: int = 0
    prefill_tokens: int = 0
    decode_tokens: int = 0
    preemptions: int = 0  # vLLM: num_preemptions
    recomputed_tokens: int = 0
    swap_out_bytes: int = 0
    swap_in_bytes: int = 0
    finished: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)
