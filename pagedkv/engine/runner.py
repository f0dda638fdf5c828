"""Model runners: what computes the tokens a `SchedulerOutput` schedules.

The scheduler only decides; a runner does the work, as vLLM v1's `GPUModelRunner` executes
each `SchedulerOutput` and nano-vllm's `ModelRunner.run(seqs, is_prefill)` does:

- `TinyLMRunner` copies the swap-out then the swap-in pages, runs `TinyLM.forward` over
  every scheduled request (K/V of all of them are written before any attends, so one may
  hit pages another fills in the same step) and samples one token for each request in
  `output.sampling`, with a generator per request seeded by the request's seed.
- `ScriptedRunner` is for bookkeeping-only simulations (benchmarks with thousands of
  requests): it computes nothing (nothing reads K/V there, and `num_computed_tokens`
  stays as admission left it) and "samples" from a seeded script per request, so a
  request's tokens depend on its seed alone.

Both return `{req_id: token}` for `Scheduler.update_from_output`. Like vLLM's runner they
keep per-request state (here the sampling generator) from `scheduled_new_reqs` until the
request appears in `finished_req_ids`.

Leaves out: CUDA graphs, input batch persistence, speculative decoding, logprobs.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator

import numpy as np

from pagedkv.core.sequence import SequenceManager
from pagedkv.engine.scheduler_output import SchedulerOutput
from pagedkv.engine.swap import SwapSpace
from pagedkv.model.tinylm import TinyLM

SCRIPT_VOCAB = 32_000  # token ids a scripted request draws from (a typical vocabulary size)


class ScriptedRunner:
    """Bookkeeping only: nothing is computed; tokens come from a script."""

    def __init__(self) -> None:
        self.scripts: dict[Hashable, Iterator[int]] = {}  # req id -> its remaining tokens

    def execute(self, output: SchedulerOutput) -> dict[Hashable, int]:
        for req_id in output.finished_req_ids:
            self.scripts.pop(req_id, None)
        for new in output.scheduled_new_reqs:  # drawn at once: one generator call per request
            script = np.random.default_rng(new.seed).integers(0, SCRIPT_VOCAB, new.max_new_tokens)
            self.scripts[new.req_id] = iter(script.tolist())
        # {r: next(self.scripts[r]) for r in output.sampling}, in C: once per generated token
        scripts = map(self.scripts.__getitem__, output.sampling)
        return dict(zip(output.sampling, map(next, scripts)))


class TinyLMRunner:
    """Computes the scheduled tokens with TinyLM through the paged cache and samples."""

    def __init__(
        self, model: TinyLM, seqs: SequenceManager, swap_space: SwapSpace, temperature: float = 0.0
    ) -> None:
        self.model, self.seqs, self.swap_space = model, seqs, swap_space
        self.temperature = temperature
        self.rngs: dict[Hashable, np.random.Generator] = {}  # req id -> its sampling generator

    def execute(self, output: SchedulerOutput) -> dict[Hashable, int]:
        _track(self.rngs, output)
        if output.swap_out:  # first: these pages may be handed to others from now on
            self.swap_space.copy_out(output.swap_out)
        if output.swap_in:
            self.swap_space.copy_in(output.swap_in)
        req_ids = list(output.num_scheduled_tokens)
        if not req_ids:
            return {}
        logits = self.model.forward(self.seqs, req_ids)  # [B, vocab] at each last position
        row = {r: b for b, r in enumerate(req_ids)}
        return {
            r: TinyLM.sample(logits[row[r] : row[r] + 1], self.temperature, self.rngs[r])[0]
            for r in output.sampling
        }


def _track(rngs: dict[Hashable, np.random.Generator], output: SchedulerOutput) -> None:
    """Start a generator for each new request; drop those of finished ones."""
    for req_id in output.finished_req_ids:
        rngs.pop(req_id, None)
    for new in output.scheduled_new_reqs:
        rngs[new.req_id] = np.random.default_rng(new.seed)
