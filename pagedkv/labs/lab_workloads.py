"""Four request streams that serving engines see, and a mix of two, for the eviction lab
(seeded).

Each request carries its prompt *and* its output tokens, because in a chat the next turn's
prompt is the conversation so far, outputs included: a prefix cache that keeps the pages a
decode filled serves the next turn from them. Token ids are random, so two requests share
a prefix only where the stream says they do.

- `multi_turn_chat`: conversations advance one turn at a time, interleaved at random; each
  turn's prompt is the previous prompt + the previous answer + a new user message, after
  one shared system prompt. Reuse is *recent*: LRU's home ground.
- `zipf_system_prompts`: short requests after one of many system prompts, the k-th picked
  with probability ~ 1/k**alpha. Reuse is *frequent* (a few hot prefixes).
- `rag_documents`: a shared instruction, then one retrieved document (popularity Zipf, as
  document retrieval usually is), then the question. Only the document right after the
  instruction can be a prefix hit; its length makes each miss expensive.
- `scan_mix`: the Zipf stream with bursts of one-off long prompts (a batch job, a long
  paste) that are never seen again. The scan pollutes recency-based caches.
- `mixed_traffic`: the chat stream and the scan stream interleaved at random, each in its
  own order: one server's chats, popular system prompts and batch jobs together.

Leaves out: arrival times and overlap (the lab runs each request to completion before the
next, as `pagedkv.labs.experiments` does), real text, and output lengths tied to the prompt.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pagedkv.core.plumbing.validation import check_int

VOCAB = 32_000


@dataclass(frozen=True)
class LabRequest:
    """One request of a lab stream: prompt tokens, then the output tokens it generates."""

    req_id: str
    prompt_token_ids: list[int]
    output_token_ids: list[int]

    @property
    def final_len(self) -> int:
        """Tokens the request holds when it finishes: prompt + output."""
        return len(self.prompt_token_ids) + len(self.output_token_ids)


def _tokens(rng: np.random.Generator, n: int) -> list[int]:
    return rng.integers(0, VOCAB, size=n).tolist()


def _zipf_picks(rng: np.random.Generator, n: int, k: int, alpha: float) -> np.ndarray:
    weights = 1 / np.arange(1, k + 1) ** alpha
    return rng.choice(k, size=n, p=weights / weights.sum())


def multi_turn_chat(
    num_conversations: int = 24, turns: int = 5, system_len: int = 32, seed: int = 0
) -> list[LabRequest]:
    """`num_conversations` chats of `turns` turns, interleaved at random (each turn of a
    chat after its previous one)."""
    check_int("num_conversations", num_conversations, 1, 1 << 16)
    check_int("turns", turns, 1, 64)
    rng = np.random.default_rng([seed, 10])
    system = _tokens(rng, system_len)
    history = {c: list(system) for c in range(num_conversations)}
    left = {c: turns for c in range(num_conversations)}
    out = []
    while left:
        c = int(rng.choice(sorted(left)))
        prompt = history[c] + _tokens(rng, int(rng.integers(16, 48)))
        answer = _tokens(rng, int(rng.integers(16, 48)))
        out.append(LabRequest(f"chat{c}-t{turns - left[c]}", prompt, answer))
        history[c] = prompt + answer
        left[c] -= 1
        if not left[c]:
            del left[c]
    return out


def zipf_system_prompts(
    num_requests: int = 300,
    num_prompts: int = 24,
    length: int = 96,
    alpha: float = 1.0,
    seed: int = 0,
) -> list[LabRequest]:
    """Short requests after one of `num_prompts` system prompts of `length` tokens."""
    check_int("num_requests", num_requests, 1, 1 << 20)
    check_int("num_prompts", num_prompts, 1, 1 << 16)
    rng = np.random.default_rng([seed, 11])
    prompts = [_tokens(rng, length) for _ in range(num_prompts)]
    return [
        LabRequest(
            f"zipf{i}-p{k}",
            prompts[k] + _tokens(rng, int(rng.integers(8, 32))),
            _tokens(rng, int(rng.integers(8, 24))),
        )
        for i, k in enumerate(_zipf_picks(rng, num_requests, num_prompts, alpha).tolist())
    ]


def rag_documents(
    num_requests: int = 300,
    num_docs: int = 40,
    doc_len: int = 160,
    alpha: float = 0.8,
    seed: int = 0,
) -> list[LabRequest]:
    """An instruction, one of `num_docs` documents (Zipf popularity), a question."""
    check_int("num_requests", num_requests, 1, 1 << 20)
    check_int("num_docs", num_docs, 1, 1 << 16)
    rng = np.random.default_rng([seed, 12])
    instruction = _tokens(rng, 32)
    docs = [_tokens(rng, doc_len) for _ in range(num_docs)]
    return [
        LabRequest(
            f"rag{i}-d{d}",
            instruction + docs[d] + _tokens(rng, int(rng.integers(8, 24))),
            _tokens(rng, int(rng.integers(8, 24))),
        )
        for i, d in enumerate(_zipf_picks(rng, num_requests, num_docs, alpha).tolist())
    ]


def scan_mix(
    num_requests: int = 300,
    every: int = 12,
    burst: int = 4,
    scan_len: int = 384,
    seed: int = 0,
) -> list[LabRequest]:
    """`zipf_system_prompts` with a burst of `burst` one-off `scan_len`-token prompts after
    every `every` requests."""
    check_int("every", every, 1, 1 << 16)
    check_int("burst", burst, 0, 1 << 16)
    rng = np.random.default_rng([seed, 13])
    out = []
    for i, request in enumerate(zipf_system_prompts(num_requests, seed=seed)):
        out.append(request)
        if (i + 1) % every == 0:
            out += [LabRequest(f"scan{i}-{j}", _tokens(rng, scan_len), _tokens(rng, 8)) for j in range(burst)]
    return out


def mixed_traffic(seed: int = 0, scan_requests: int = 300) -> list[LabRequest]:
    """`multi_turn_chat` and `scan_mix` (its zipf part `scan_requests` long) interleaved at
    random: every request of both, each stream's requests in their own order. The two share
    no prefix (their random tokens differ), so every hit in the mix reuses its own stream's pages."""
    streams = [multi_turn_chat(seed=seed), scan_mix(scan_requests, seed=seed)]
    rng = np.random.default_rng([seed, 14])
    picks = np.repeat(np.arange(len(streams)), [len(s) for s in streams])
    rng.shuffle(picks)
    nexts = [iter(s) for s in streams]
    return [next(nexts[k]) for k in picks.tolist()]


LAB_WORKLOADS: dict[str, Callable[..., list[LabRequest]]] = {  # name -> generator(seed=...)
    "chat": multi_turn_chat,
    "zipf": zipf_system_prompts,
    "rag": rag_documents,
    "scan": scan_mix,
    "mix": mixed_traffic,
}


def lab_workload(name: str, seed: int = 0) -> list[LabRequest]:
    """The named stream with its default sizes."""
    if name not in LAB_WORKLOADS:
        raise ValueError(f"workload must be one of {sorted(LAB_WORKLOADS)}, got {name!r}")
    return LAB_WORKLOADS[name](seed=seed)
