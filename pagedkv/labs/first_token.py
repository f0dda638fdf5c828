"""What a prefix hit is worth to a user: the prompt tokens each request still prefills, and
the time to its first token (TTFT) that prefill costs at a stated price per token.

`prefill_per_request` replays a stream one request at a time (as `replay` does) and keeps,
for each request, its prompt tokens minus those the prefix cache served: the tokens the
model must compute before it can emit the first output token. `ttft_rows` turns them into
a mean and a 90th percentile in milliseconds at `MS_PER_PREFILL_TOKEN`, an assumed price:
no clock is read, so the numbers are the same on every machine.

Leaves out: queueing, batching with other requests' decode steps, and the decode step that
samples the first token; prefill time taken as linear in the tokens computed (attention's
quadratic part is small at these lengths). Linear fits a busy server that batches or chunks
prefill tokens with other work: there a hit saves each token's marginal cost. A lone prefill
also reads all the weights once per forward pass (`weights_read_ms`); that read overlaps the
compute, so `prefill_ms` prices a lone prefill as a roofline, the larger of the two, and
`with_fixed_text` compares the means both ways.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pagedkv.core.sequence import SequenceManager
from pagedkv.labs.costs import weight_bytes
from pagedkv.labs.hit_rate_lab import lab_pool, serve_one_at_a_time, source
from pagedkv.labs.lab_workloads import LabRequest
from pagedkv.labs.specs import gpu_spec

# Assumed: Llama-2-7B (6.74e9 parameters in specs.MODELS; 2 x parameters = 13.5 GFLOP per
# prompt token) prefilling at 140 TFLOP/s, about 45 % of an A100's 312 (specs.GPUS), computes
# about 10,000 prompt tokens a second: 0.1 ms per token.
MS_PER_PREFILL_TOKEN = 0.1


def prefill_per_request(requests: Sequence[LabRequest], cache_tokens: int, policy: str = "lru") -> list[int]:
    """For each request in order: its prompt tokens the prefix cache did not serve."""
    pool = lab_pool(requests, cache_tokens, policy, 16)
    seqs = SequenceManager(pool)
    computed = []
    for request in requests:
        hits_before = pool.stats.prefix_hits
        serve_one_at_a_time(seqs, [request])
        computed.append(len(request.prompt_token_ids) - (pool.stats.prefix_hits - hits_before))
    return computed


def p90(values: Sequence[int]) -> int:
    """The 90th percentile, nearest rank: 9 of 10 values are at most this one."""
    ranked = sorted(values)
    return ranked[max(0, -(-9 * len(ranked) // 10) - 1)]


def ttft_rows(
    streams: Mapping[str, Sequence[LabRequest]],
    cache_tokens: int,
    policies: Sequence[str],
    ms_per_token: float = MS_PER_PREFILL_TOKEN,
) -> dict[str, dict[str, dict[str, float]]]:
    """{stream: {policy: {"prefilled": tokens, "mean ms": ..., "p90 ms": ...}}}: prompt
    tokens computed over the whole stream, and TTFT's mean and 90th percentile per request."""
    rows: dict[str, dict[str, dict[str, float]]] = {}
    for name, requests in streams.items():
        rows[name] = {}
        for policy in policies:
            computed = prefill_per_request(requests, cache_tokens, policy)
            rows[name][policy] = {
                "prefilled": sum(computed),
                "mean ms": round(sum(computed) * ms_per_token / len(computed), 1),
                "p90 ms": round(p90(computed) * ms_per_token, 1),
            }
    return rows


def source_means(
    requests: Sequence[LabRequest], cache_tokens: int, policy: str, ms_per_token: float = MS_PER_PREFILL_TOKEN
) -> dict[str, float]:
    """TTFT's mean in ms per source stream of `requests` (in the scan: "zipf" and "scan",
    its one-off prompts)."""
    computed = prefill_per_request(requests, cache_tokens, policy)
    by: dict[str, list[int]] = {}
    for request, n in zip(requests, computed, strict=True):
        by.setdefault(source(request), []).append(n)
    return {name: round(sum(ns) * ms_per_token / len(ns), 1) for name, ns in by.items()}


def ttft_text(
    rows: Mapping[str, Mapping[str, Mapping[str, float]]], ms_per_token: float = MS_PER_PREFILL_TOKEN
) -> str:
    """One line per stream: each policy's TTFT mean / p90 in ms."""
    policies = list(next(iter(rows.values())))
    lines = [
        f"TTFT of prefill at {ms_per_token} ms per prompt token computed; mean / p90 per request, in ms",
        "stream " + "".join(f"{p:>14s}" for p in policies),
    ]
    for name, by_policy in rows.items():
        cells = "".join(f"{r['mean ms']:>7.1f} /{r['p90 ms']:>5.1f}" for r in by_policy.values())
        lines.append(f"{name:6s} {cells}")
    return "\n".join(lines)


def weights_read_ms(model: str = "Llama-2-7B", gpu: str = "A100-80GB") -> float:
    """One read of the model's weights at the GPU's data-sheet bandwidth, in ms (0.1 ms
    steps): the least a lone forward pass costs, however few tokens it computes."""
    return round(weight_bytes(model) / (gpu_spec(gpu).hbm_gb_s * 1e9) * 1000, 1)


def prefill_ms(tokens: int, fixed_ms: float, ms_per_token: float = MS_PER_PREFILL_TOKEN) -> float:
    """A lone prefill of `tokens` computed tokens, as a roofline: the weights read once
    (`fixed_ms`) and the compute overlap, so it takes the larger of the two."""
    return max(fixed_ms, tokens * ms_per_token)


def mean_ms(
    computed: Sequence[int], fixed_ms: float = 0.0, ms_per_token: float = MS_PER_PREFILL_TOKEN
) -> float:
    """Mean TTFT in ms (0.1 ms steps) of requests that computed `computed` tokens each, each
    priced by `prefill_ms` (with `fixed_ms` 0, per token only). Summed in tokens, then priced
    once, so that the mean rounds as `ttft_rows` rounds it."""
    floor = round(fixed_ms / ms_per_token, 9)  # the fixed cost, in tokens' worth of compute
    return round(sum(max(floor, n) for n in computed) * ms_per_token / len(computed), 1)


def sender_prefills(
    requests: Sequence[LabRequest], cache_tokens: int, policies: Sequence[str] = ("lru", "arc")
) -> dict[str, list[list[int]]]:
    """{"all requests": [computed per request, one list per policy], "<source> requests": ...}:
    each request's prompt tokens the cache did not serve, for all of `requests` and per sender."""
    runs = [prefill_per_request(requests, cache_tokens, policy) for policy in policies]
    out = {"all requests": runs}
    for name in dict.fromkeys(source(r) for r in requests):
        keep = [source(r) == name for r in requests]
        out[f"{name} requests"] = [[n for n, k in zip(run, keep, strict=True) if k] for run in runs]
    return out


def cut(before: float, after: float) -> int:
    """How much less `after` is than `before`, in whole percent."""
    return round(100 * (1 - after / before))


def with_fixed_text(prefills: Mapping[str, Sequence[Sequence[int]]], fixed_ms: float) -> str:
    """For each label, mean TTFT under LRU and ARC (ms) and the cut: first priced per token,
    then each prefill priced as max(`fixed_ms`, its tokens' compute) (`prefill_ms`)."""
    lines = [f"mean TTFT, LRU -> ARC: per token only | max({fixed_ms} ms, per token) per prefill"]
    for label, (lru_run, arc_run) in prefills.items():
        lru, arc = mean_ms(lru_run), mean_ms(arc_run)
        lru_f, arc_f = mean_ms(lru_run, fixed_ms), mean_ms(arc_run, fixed_ms)
        lines.append(
            f"{label:22s} {lru:5.1f} -> {arc:5.1f} ms ({cut(lru, arc)} % less)"
            f" | {lru_f:5.1f} -> {arc_f:5.1f} ms ({cut(lru_f, arc_f)} % less)"
        )
    return "\n".join(lines)
