"""Generation with TinyLM: the paged decode loop and the no-cache reference it must match.

`generate` is what a serving engine's request loop does for a fixed batch: admit each
prompt (`seqs.add`, reusing cached prefix pages), prefill them in one forward, then decode
one token per step for the whole batch, `append_slot` before every step (vLLM v1's
`Scheduler` + `GPUModelRunner` do the same, one step at a time). Parallel sampling (n > 1)
forks each prompt after prefill, as vLLM's `n` does, so the samples share the prompt's pages
until one of them writes into a shared page (copy-on-write).

`generate_reference` recomputes the whole context every step with `forward_reference`
(dense attention, no cache): the oracle the paged loop must match, token for token.

Both are also `TinyLM.generate` and `TinyLM.generate_reference`, the names notebooks use.

Leaves out: stop strings and EOS, streaming, preemption and admitting requests mid-loop
(the `Scheduler` does those), different sampling settings per sequence.
"""

from __future__ import annotations

from collections.abc import Hashable
from collections.abc import Sequence as SequenceLike

import numpy as np

from pagedkv.core.plumbing.validation import check_int, check_vocab
from pagedkv.core.pool import OutOfPagesError
from pagedkv.core.sequence import SequenceManager
from pagedkv.engine.sampling import check_sampling, sample
from pagedkv.model.tinylm import VOCAB_SIZE, TinyLM


def _check_request(
    model: TinyLM,
    seqs: SequenceManager,
    prompts: SequenceLike[SequenceLike[int] | str],
    seq_ids: SequenceLike[Hashable] | None,
    n: int,
) -> tuple[list[list[int]], list[Hashable], list[Hashable]]:
    """(token lists, prompt ids, sample ids) of a valid request; ValueError otherwise."""
    token_lists = [model.encode(p) if isinstance(p, str) else list(p) for p in prompts]
    for i, toks in enumerate(token_lists):
        if not toks:
            raise ValueError(f"prompts[{i}] must not be empty")
        check_vocab(f"prompts[{i}]", toks, VOCAB_SIZE)
    ids: list[Hashable] = list(seq_ids) if seq_ids is not None else [f"req{i}" for i in range(len(prompts))]
    if len(ids) != len(token_lists) or len(set(ids)) != len(ids):
        raise ValueError(f"seq_ids must be {len(token_lists)} distinct ids, got {ids}")
    sample_ids: list[Hashable] = ids if n == 1 else [f"{i}.{k}" for i in ids for k in range(n)]
    clash = [s for s in [*ids, *sample_ids] if s in seqs]
    if clash:
        raise ValueError(f"seq_ids already live: {clash}")
    return token_lists, ids, sample_ids


def _release(model: TinyLM, seqs: SequenceManager, seq_ids: list[Hashable]) -> None:
    """Free every live sequence of `seq_ids` after a failed generation.

    Prompts admitted before a later one failed have indexed pages without K/V: compute
    them first, or freeing would cache garbage for the next prompt."""
    live = [s for s in dict.fromkeys(seq_ids) if s in seqs]
    pending = [s for s in live if seqs.get(s).num_computed_tokens < seqs.get(s).num_tokens]
    if pending:
        model.forward(seqs, pending)
    for seq_id in live:
        seqs.free(seq_id)


def _check_decode_room(seqs: SequenceManager, sample_ids: list[Hashable]) -> None:
    """Raise OutOfPagesError if the next decode step needs more pages than are available.

    Checked before any append: every live token's K/V is then computed, so the pages freed
    after the error are safe to keep as prefix cache."""
    needed = seqs.pages_needed_for_decode(sample_ids)
    if needed > seqs.pool.num_available_pages:
        raise OutOfPagesError(
            f"decode step needs {needed} pages, {seqs.pool.num_available_pages} are FREE or CACHED"
        )


def generate(
    model: TinyLM,
    seqs: SequenceManager,
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

    Each prompt is admitted with `seqs.add` (reusing cached prefix pages), prefilled
    in one batch, then decoded one token per step for the whole batch. With n > 1 each
    prompt is forked after prefill into n samples `"{id}.0" .. "{id}.{n-1}"` that share
    its pages (the prompt's own sequence is then freed); a sample copies a shared page
    only when it writes into it. With `free`, all sequences are freed at the end,
    leaving their full pages CACHED for later prompts. If the pool runs out of pages
    midway, everything this call admitted is freed and OutOfPagesError propagates.
    """
    if isinstance(prompts, str) or not prompts:
        raise ValueError("prompts must be a non-empty list of token-id lists or strings")
    check_int("max_new_tokens", max_new_tokens, 0, 100_000)
    check_int("n", n, 1, 100_000)
    check_sampling(temperature, top_k, top_p)
    token_lists, ids, sample_ids = _check_request(model, seqs, prompts, seq_ids, n)
    rng = np.random.default_rng(seed)
    out: dict[Hashable, list[int]] = {s: [] for s in sample_ids}
    try:
        for seq_id, toks in zip(ids, token_lists):
            seqs.add(seq_id, toks)
        logits = model.forward(seqs, ids)
        if n > 1:
            logits = np.repeat(logits, n, axis=0)
            for seq_id in ids:
                for k in range(n):
                    seqs.fork(seq_id, f"{seq_id}.{k}")
                seqs.free(seq_id)
        for step in range(max_new_tokens):
            tokens = sample(logits, temperature, rng, top_k, top_p)
            for seq_id, token in zip(sample_ids, tokens):
                out[seq_id].append(token)
            if step + 1 == max_new_tokens:
                # The last token gets no slot: its K/V would never be computed, and a page
                # it filled would be indexed holding garbage (vLLM stops the same way).
                break
            _check_decode_room(seqs, sample_ids)
            for seq_id, token in zip(sample_ids, tokens):
                seqs.append_slot(seq_id, token)
            logits = model.forward(seqs, sample_ids)
    except Exception:
        # Out of pages mid-generation (or any error): release what this call admitted.
        _release(model, seqs, [*ids, *sample_ids])
        raise
    if free:
        for seq_id in sample_ids:
            seqs.free(seq_id)
    return out


def generate_reference(
    model: TinyLM,
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
