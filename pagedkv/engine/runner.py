"""Model runners: what computes the tokens a `SchedulerOutput` schedules.

The scheduler only decides; a runner does the work, as vLLM v1's `GPUModelRunner` executes
each `SchedulerOutput` and nano-vllm's model runner does in run(seqs, is_prefill). One step
of either loop that generates tokens (`Scheduler.step`, and so `TinyLM.generate`) is
schedule -> prepare -> compute -> update:

- `ModelRunner.execute(output)` copies the swap-out then the swap-in pages, then `forward`:
  `prepare` (context.py) turns the scheduled sequences into token ids, positions, slot
  mapping, block tables and context lengths; the model computes logits from that context
  and the pool's K/V store (`Model.compute`, writing the new K/V at the slot mapping; K/V of
  all sequences are written before any attends, so one may hit pages another fills in the
  same step); the runner marks the tokens computed and samples one token for each request
  in `output.sampling`, with a generator per request seeded by the request's seed.
- `ScriptedRunner` is for bookkeeping-only simulations (benchmarks with thousands of
  requests): it computes nothing (nothing reads K/V there, and `num_computed_tokens`
  stays as admission left it) and "samples" from a seeded script per request, so a
  request's tokens depend on its seed alone.

Both return `{req_id: token}` for `Scheduler.update_from_output`. Like vLLM's runner they
keep per-request state (here the sampling generator) from `scheduled_new_reqs` until the
request appears in `finished_req_ids`. The engine knows a model only through the `Model`
Protocol below, so a model package can sit above the engine and use its loop.

Leaves out: CUDA graphs, input batch persistence, speculative decoding, logprobs.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from collections.abc import Sequence as SequenceLike
from typing import Protocol, runtime_checkable

import numpy as np

from pagedkv.core.plumbing.validation import check_instance, check_vocab
from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.engine.context import ForwardContext, prepare
from pagedkv.engine.sampling import SamplingParams
from pagedkv.engine.scheduler_output import SchedulerOutput
from pagedkv.engine.swap import SwapSpace

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


@runtime_checkable
class Model(Protocol):
    """What a runner needs of a model: its K/V shape, its vocabulary and one pure forward."""

    vocab_size: int
    num_layers: int
    num_kv_heads: int
    head_dim: int

    def compute(self, context: ForwardContext, pool: KVCachePool) -> np.ndarray:
        """Write the K/V of `context`'s tokens at its slot mapping in `pool`'s store and
        return the logits [B, vocab] at each sequence's last token."""
        ...


class ModelRunner:
    """Prepares each step's context from a SequenceManager, runs a `Model`, samples."""

    def __init__(
        self,
        model: Model,
        manager: SequenceManager,
        swap_space: SwapSpace | None = None,
        sampling: SamplingParams | None = None,
    ) -> None:
        check_instance("manager", manager, SequenceManager)
        if not isinstance(model, Model):
            raise TypeError(
                "model must have vocab_size, num_layers, num_kv_heads, head_dim and compute(); "
                f"got {type(model).__name__}"
            )
        cfg = manager.pool.config
        shape = (model.num_layers, model.num_kv_heads, model.head_dim)
        if (cfg.num_layers, cfg.num_kv_heads, cfg.head_dim) != shape:
            raise ValueError(
                "pool shape (num_layers, num_kv_heads, head_dim) = "
                f"{(cfg.num_layers, cfg.num_kv_heads, cfg.head_dim)} does not fit the model's "
                f"{shape}; use TinyLM.cache_config"
            )
        self.model, self.manager, self.swap_space = model, manager, swap_space
        self.sampling = SamplingParams() if sampling is None else sampling
        self.rngs: dict[Hashable, np.random.Generator] = {}  # req id -> its sampling generator

    def forward(self, seq_ids: SequenceLike[Hashable]) -> np.ndarray:
        """Compute every not-yet-computed token of each sequence; logits [B, vocab] at each
        sequence's last token. prepare -> compute -> mark the tokens computed."""
        context = prepare(self.manager, seq_ids)
        check_vocab("token_ids", context.token_ids.tolist(), self.model.vocab_size)
        logits = self.model.compute(context, self.manager.pool)
        for seq_id, length in zip(seq_ids, context.context_lens.tolist()):
            self.manager.set_computed(seq_id, length)
        return logits

    def execute(self, output: SchedulerOutput) -> dict[Hashable, int]:
        """Run one scheduled step: page copies, forward, one token per `output.sampling`."""
        _track(self.rngs, output)
        if output.swap_out or output.swap_in:
            if self.swap_space is None:
                raise ValueError("the step swaps pages, but this runner has no swap space")
            self.swap_space.copy_out(output.swap_out)  # first: these pages may be reused now
            self.swap_space.copy_in(output.swap_in)
        req_ids = list(output.num_scheduled_tokens)
        if not req_ids:
            return {}
        logits = self.forward(req_ids)  # [B, vocab] at each last position
        row = {r: b for b, r in enumerate(req_ids)}
        return {
            r: self.sampling.sample(logits[row[r] : row[r] + 1], self.rngs[r])[0] for r in output.sampling
        }


def _track(rngs: dict[Hashable, np.random.Generator], output: SchedulerOutput) -> None:
    """Start a generator for each new request; drop those of finished ones."""
    for req_id in output.finished_req_ids:
        rngs.pop(req_id, None)
    for new in output.scheduled_new_reqs:
        rngs[new.req_id] = np.random.default_rng(new.seed)
