"""Generation for a fixed batch of prompts, through the Scheduler's loop, and the no-cache
reference it must match.

`generate` is `TinyLM.generate`: it queues each prompt as a request of a `Scheduler` sized
so that every prompt is admitted and prefilled in the first step, then steps it to the end
(schedule -> prepare -> compute -> update, `Scheduler.step`): the same loop every other
caller uses, so a fixed batch and a continuous stream of requests generate alike, and a
pool too small for the whole batch preempts and resumes instead of failing. nano-vllm's
`LLMEngine.generate` is the same thin loop around its scheduler and runner; vLLM's offline
`LLM.generate` too. Each request samples with its own generator seeded `seed` (+ k for the
k-th of n samples), so a prompt generates what `generate_reference` does with that seed.

`generate_reference` recomputes the whole context every step with `forward_reference`
(dense attention, no cache): the oracle the paged loop must match, token for token.

Leaves out: stop strings and EOS, streaming, and different sampling settings per prompt.
"""

from __future__ import annotations

from collections.abc import Hashable
from collections.abc import Sequence as SequenceLike
from typing import Protocol

import numpy as np

from pagedkv.core.plumbing.validation import check_bool, check_int, check_vocab
from pagedkv.core.sequence import SequenceManager
from pagedkv.engine.runner import Model, ModelRunner
from pagedkv.engine.sampling import check_sampling, sample
from pagedkv.engine.scheduler import Scheduler


class TextModel(Model, Protocol):
    """A `Model` that also encodes text and recomputes logits without a cache (the oracle)."""

    def encode(self, text: str) -> list[int]: ...

    def forward_reference(self, token_ids: SequenceLike[int]) -> np.ndarray: ...


def _check_request(
    model: TextModel,
    manager: SequenceManager,
    prompts: SequenceLike[SequenceLike[int] | str],
    seq_ids: SequenceLike[Hashable] | None,
    n: int,
) -> tuple[list[list[int]], list[Hashable], list[Hashable]]:
    """(token lists, prompt ids, sample ids) of a valid request; ValueError otherwise."""
    if isinstance(prompts, str) or not prompts:
        raise ValueError("prompts must be a non-empty list of token-id lists or strings")
    token_lists = [model.encode(p) if isinstance(p, str) else list(p) for p in prompts]
    for i, toks in enumerate(token_lists):
        if not toks:
            raise ValueError(f"prompts[{i}] must not be empty")
        check_vocab(f"prompts[{i}]", toks, model.vocab_size)
    ids: list[Hashable] = list(seq_ids) if seq_ids is not None else [f"req{i}" for i in range(len(prompts))]
    if len(ids) != len(token_lists) or len(set(ids)) != len(ids):
        raise ValueError(f"seq_ids must be {len(token_lists)} distinct ids, got {ids}")
    sample_ids: list[Hashable] = ids if n == 1 else [f"{i}.{k}" for i in ids for k in range(n)]
    clash = [s for s in [*ids, *sample_ids] if s in manager]
    if clash:
        raise ValueError(f"seq_ids already live: {clash}")
    return token_lists, ids, sample_ids


def generate(
    model: TextModel,
    manager: SequenceManager,
    prompts: SequenceLike[SequenceLike[int] | str],
    max_new_tokens: int,
    *,
    seq_ids: SequenceLike[Hashable] | None = None,
    n: int = 1,
    temperature: float = 0.0,
    seed: int = 0,
    top_k: int | None = None,
    top_p: float | None = None,
    free: bool = True,
) -> dict[Hashable, list[int]]:
    """Generate through the paged cache; returns new tokens per sequence id (`TinyLM.generate`).

    Each prompt is admitted with its prefix hits and prefilled in one batch, then decoded
    one token per step. With n > 1 each prompt becomes n samples "{id}.0" .. "{id}.{n-1}"
    seeded seed + k, which share its full pages through the prefix cache. With `free`,
    all sequences are freed at the end, leaving their full pages CACHED for later prompts;
    else they stay live. If a step cannot run, everything this call admitted is freed and
    the error propagates."""
    check_int("max_new_tokens", max_new_tokens, 0, 100_000)
    check_int("n", n, 1, 1024)
    check_sampling(temperature, top_k, top_p)
    check_bool("free", free)
    token_lists, ids, sample_ids = _check_request(model, manager, prompts, seq_ids, n)
    if max_new_tokens == 0:
        return {s: [] for s in sample_ids}
    batch_tokens = max(n * sum(map(len, token_lists)), len(sample_ids))
    sched = Scheduler(
        manager,
        model,
        max_num_seqs=len(sample_ids),
        max_num_batched_tokens=min(batch_tokens, 1 << 24),
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        free_finished=free,
    )
    for req_id, tokens in zip(ids, token_lists):
        sched.add_request(req_id, tokens, max_new_tokens, seed=seed, n=n)
    try:
        sched.run()
    except Exception:
        _release(sched, sample_ids)
        raise
    return {s: sched.request(s).output for s in sample_ids}


def _release(sched: Scheduler, sample_ids: list[Hashable]) -> None:
    """Free every live sequence of a failed generation. A step that failed mid-way leaves
    sequences whose pages are indexed without K/V: compute them first, or freeing would
    cache garbage for the next prompt."""
    manager = sched.manager
    live = [s for s in sample_ids if s in manager]
    pending = [s for s in live if manager.get(s).num_computed_tokens < manager.get(s).num_tokens]
    if pending and isinstance(sched.runner, ModelRunner):
        sched.runner.forward(pending)
    for seq_id in live:
        manager.free(seq_id)


def generate_reference(
    model: TextModel,
    prompt: SequenceLike[int] | str,
    max_new_tokens: int,
    temperature: float = 0.0,
    seed: int = 0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> list[int]:
    """Greedy/sampled generation by recomputing the whole context every step, no cache
    (`TinyLM.generate_reference`)."""
    check_int("max_new_tokens", max_new_tokens, 0, 100_000)
    check_sampling(temperature, top_k, top_p)
    tokens = model.encode(prompt) if isinstance(prompt, str) else list(prompt)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(max_new_tokens):
        token = sample(model.forward_reference(tokens)[-1:], temperature, rng, top_k, top_p)[0]
        out.append(token)
        tokens.append(token)
    return out
