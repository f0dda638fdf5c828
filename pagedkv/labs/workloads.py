"""Seeded request generators: the inputs of the scheduler, the notebooks and the benchmarks.

The vLLM paper (Kwon et al., SOSP 2023, Sec. 6.1) evaluates on two datasets whose length
statistics we reproduce without the text:

| workload | mean prompt | mean output | here: log-normal (mu, sigma) prompt / output |
|---|---|---|---|
| ShareGPT (long chats) | 161.31 | 337.99 | (4.615, 1.0) / (5.514, 0.9) |
| Alpaca (short instructions) | 19.31 | 58.45 | (2.781, 0.6) / (3.748, 0.8) |

Each length is a log-normal draw rounded to an int and clipped to [1, 1024] (so prompt +
output <= 2,048, the OPT models' context); mu is solved so the *clipped* mean equals the
paper's mean (the tests check the sample means). Token ids are uniform over the vocabulary,
so two requests share a prefix only when a generator makes them: `with_system_prompt`
prepends one shared prompt to every request; `parallel_sampling` asks n samples of each
(`Request.n`, which `Scheduler.add_requests` fans out); `beam_parents` draws which beams
survive each step (the beam-search trace `bench sharing` replays with fork).

Leaves out: arrival times (every request is queued at time 0, the offline setting of the
paper's Fig. 2 and of `bench memory`) and real text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from pagedkv.core.plumbing.validation import check_int
from pagedkv.engine.request import Request  # re-exported: generators make requests

MAX_LEN = 1024  # clip for prompt and for output lengths
# name -> (mean prompt, mean output) reported by the paper, and the log-normal parameters
# (mu, sigma) of prompt and output lengths that reproduce those means after clipping.
WORKLOADS = {
    "sharegpt": {"paper_means": (161.31, 337.99), "prompt": (4.615, 1.0), "output": (5.514, 0.9)},
    "alpaca": {"paper_means": (19.31, 58.45), "prompt": (2.781, 0.6), "output": (3.748, 0.8)},
}


def lengths(workload: str, num_requests: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Prompt and output lengths of `num_requests` requests: two int64 arrays [num_requests]."""
    if workload not in WORKLOADS:
        raise ValueError(f"workload must be one of {sorted(WORKLOADS)}, got {workload!r}")
    check_int("num_requests", num_requests, 1, 10_000_000)
    rng = np.random.default_rng(seed)
    spec = WORKLOADS[workload]
    out = []
    for mu, sigma in (spec["prompt"], spec["output"]):
        draws = np.rint(rng.lognormal(mu, sigma, num_requests))
        out.append(np.clip(draws, 1, MAX_LEN).astype(np.int64))
    return out[0], out[1]


def generate(workload: str, num_requests: int, seed: int = 0, vocab_size: int = 32_000) -> list[Request]:
    """`num_requests` requests with the workload's length distributions and random tokens."""
    check_int("vocab_size", vocab_size, 1, 1 << 62)
    prompt_lens, output_lens = lengths(workload, num_requests, seed)
    rng = np.random.default_rng([seed, 1])  # tokens: a stream independent of the lengths
    tokens = rng.integers(0, vocab_size, size=int(prompt_lens.sum()), dtype=np.int64).tolist()
    ends = np.cumsum(prompt_lens).tolist()
    starts = [0, *ends[:-1]]
    return [
        Request(f"{workload}-{i}", tokens[a:b], int(out), seed=seed * 1_000_003 + i)
        for i, (a, b, out) in enumerate(zip(starts, ends, output_lens.tolist(), strict=True))
    ]


def mean_lengths(requests: list[Request]) -> tuple[float, float]:
    """The mean prompt length and mean output length (`max_new_tokens`) of `requests`: a
    draw's own means, which differ from the workload's target means (`WORKLOADS`).
    Example: mean_lengths(generate("sharegpt", 150)) -> (163.27..., 306.92)."""
    if not requests:
        raise ValueError("mean_lengths needs at least one request")
    count = len(requests)
    return (
        sum(r.prompt_len for r in requests) / count,
        sum(r.max_new_tokens for r in requests) / count,
    )


def sharegpt_like(num_requests: int, seed: int = 0, vocab_size: int = 32_000) -> list[Request]:
    """Long chats: mean prompt about 161 tokens, mean output about 338."""
    return generate("sharegpt", num_requests, seed, vocab_size)


def alpaca_like(num_requests: int, seed: int = 0, vocab_size: int = 32_000) -> list[Request]:
    """Short instructions: mean prompt about 19 tokens, mean output about 58."""
    return generate("alpaca", num_requests, seed, vocab_size)


def with_system_prompt(
    requests: list[Request], length: int, seed: int = 0, vocab_size: int = 32_000
) -> list[Request]:
    """The same requests, each prompt starting with one shared `length`-token system prompt."""
    check_int("length", length, 0, 1 << 20)
    system = np.random.default_rng([seed, 2]).integers(0, vocab_size, size=length).tolist()
    return [replace(r, prompt_token_ids=system + list(r.prompt_token_ids)) for r in requests]


def parallel_sampling(requests: list[Request], n: int) -> list[Request]:
    """The same requests, each asking for n samples of its output."""
    check_int("n", n, 1, 1024)
    return [replace(r, n=n) for r in requests]


def beam_parents(width: int, steps: int, seed: int = 0, decay: float = 0.5) -> np.ndarray:
    """Which beam each surviving beam extends, per decode step: int [steps, width], sorted.

    Beam search keeps the `width` best continuations of the current beams; continuations of
    the best beams win most often, so after each step several survivors share a parent and
    weak beams die. Modelled here: each survivor's parent is drawn independently, the beam
    of rank r with probability proportional to decay**r (rank 0 is the best beam).
    """
    check_int("width", width, 1, 1024)
    check_int("steps", steps, 0, 1 << 24)
    if not 0 < decay <= 1:
        raise ValueError(f"decay must be in (0, 1], got {decay!r}")
    weights = decay ** np.arange(width)
    rng = np.random.default_rng(seed)
    draws = rng.choice(width, size=(steps, width), p=weights / weights.sum())
    return np.sort(draws, axis=1)


def ops_trace(requests: int, prompt_len: int, shared_len: int, seed: int) -> list[np.ndarray]:
    """`bench ops`' trace: random prompts, every even-numbered one starting with one shared
    `shared_len`-token prefix."""
    rng = np.random.default_rng(seed)
    prompts = rng.integers(0, 32_000, size=(requests, prompt_len), dtype=np.int64)
    prompts[::2, :shared_len] = rng.integers(0, 32_000, size=shared_len, dtype=np.int64)
    return list(prompts)


def token_budget(requests: Sequence[Request]) -> int:
    """The preemption benchmark's token budget a step (`max_num_batched_tokens`): 4,096, or the
    longest request if longer, so that every request fits one step whole."""
    return max(4096, max(r.final_len for r in requests))


def distinct_prefixes(requests: Sequence[Request], length: int) -> int:
    """How many different first-`length`-token prefixes `requests` have (e.g. their distinct
    system prompts). Example: two requests after one 64-token system prompt -> 1."""
    check_int("length", length, 1)
    return len({tuple(r.prompt_token_ids[:length]) for r in requests})
