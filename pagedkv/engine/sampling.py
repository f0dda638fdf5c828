"""Choosing the next token from logits: greedy, temperature, top-k and top-p (nucleus).

The same knobs as vLLM's `SamplingParams` (temperature, top_k, top_p, seed) applied in the
same order as its sampler: scale by 1 / temperature, keep the top_k largest logits, keep the
smallest set of tokens whose probability reaches top_p, renormalise and draw. A seeded
`numpy.random.Generator` makes every draw repeatable; temperature 0 is argmax and draws
nothing. `SamplingParams` holds the three knobs a runner applies to every request it samples
(the seed is per request). Leaves out: repetition/presence penalties, min_p, logit bias, beam
scores, and settings that differ between the requests of one batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pagedkv.core.plumbing.validation import check_int


def check_sampling(temperature: object, top_k: object = None, top_p: object = None) -> None:
    """Raise TypeError / ValueError naming the knob if a sampling setting is not allowed."""
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float, np.floating)):
        raise TypeError(f"temperature must be a number, got {temperature!r} ({type(temperature).__name__})")
    if not 0 <= temperature < float("inf"):
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if top_k is not None:
        check_int("top_k", top_k, 1)
    if top_p is not None:
        if isinstance(top_p, bool) or not isinstance(top_p, (int, float, np.floating)):
            raise TypeError(f"top_p must be a number or None, got {top_p!r} ({type(top_p).__name__})")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")


@dataclass(frozen=True)
class SamplingParams:
    """How a runner picks each next token (vLLM's `SamplingParams`, less n and seed)."""

    temperature: float = 0.0  # 0: greedy (argmax)
    top_k: int | None = None  # keep the k most likely tokens (None: all)
    top_p: float | None = None  # keep the smallest set whose probability reaches top_p

    def __post_init__(self) -> None:
        check_sampling(self.temperature, self.top_k, self.top_p)

    def sample(self, logits: np.ndarray, rng: np.random.Generator) -> list[int]:
        """One token per row of logits [B, vocab], drawn from `rng`."""
        return sample(logits, self.temperature, rng, self.top_k, self.top_p)


def sample(
    logits: np.ndarray,
    temperature: float,
    rng: np.random.Generator,
    top_k: int | None = None,
    top_p: float | None = None,
) -> list[int]:
    """One token per row of logits [B, vocab].

    Example: sample(np.array([[0.0, 2.0, 1.0]]), 0, rng) -> [1]; with top_k=1 every
    temperature gives [1] too.
    """
    if temperature == 0:
        return [int(t) for t in logits.argmax(axis=-1)]
    z = logits.astype(np.float64) / temperature
    if top_k is not None and top_k < z.shape[-1]:
        kth = np.partition(z, -top_k, axis=-1)[:, -top_k][:, None]
        z = np.where(z >= kth, z, -np.inf)
    p = np.exp(z - z.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    if top_p is not None and top_p < 1:
        order = np.argsort(-p, axis=-1, kind="stable")
        sorted_p = np.take_along_axis(p, order, axis=-1)
        # Keep a token while the mass before it is below top_p (the first one always stays).
        keep_sorted = np.cumsum(sorted_p, axis=-1) - sorted_p < top_p
        keep = np.zeros_like(keep_sorted)
        np.put_along_axis(keep, order, keep_sorted, axis=-1)
        p = np.where(keep, p, 0.0)
        p /= p.sum(axis=-1, keepdims=True)
    return [int(rng.choice(p.shape[-1], p=row)) for row in p]
