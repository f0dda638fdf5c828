"""What one decode step reads from GPU memory: the model's weights once, and the K/V of every
running request.

A decode step makes one token per running request. Its matrix products are small (one token
per request), so the step's pace is set by the bytes it reads from memory: all the weights,
once for the whole batch, plus every running request's K/V. The bytes per output token are
the step's bytes divided by the batch: the lower they are, the more tokens each second of
memory reading makes. Counts only, no clock: `costs.step_seconds` turns bytes into time.
"""

from __future__ import annotations

from pagedkv.labs import costs

GB = 10**9  # decimal gigabytes, as weight sizes are usually quoted


def decode_step(batch: float, kv_tokens: float, model: str = "OPT-13B") -> dict[str, float]:
    """Bytes one decode step reads with `batch` requests running that hold `kv_tokens` tokens
    of K/V in all: "weights", "kv", "total" and "per_token" (total / batch), in bytes.

    Example: OPT-13B (12.9e9 parameters in float16, 800 KiB of K/V per token), 20 requests
    holding 8,000 tokens: weights 25.8 GB, K/V 6.55 GB, 1.62 GB per output token."""
    if batch <= 0 or kv_tokens < 0:
        raise ValueError(f"need batch > 0 and kv_tokens >= 0, got {batch} and {kv_tokens}")
    weights = costs.weight_bytes(model)
    kv = kv_tokens * costs.bytes_per_token(model)
    return {"weights": weights, "kv": kv, "total": weights + kv, "per_token": (weights + kv) / batch}


def memory_run(row: dict, num_slots: int, model: str = "OPT-13B") -> dict[str, float]:
    """`decode_step` for one system of `bench memory` (a row of `report.data[workload]`): its
    mean batch, and the K/V its slots held (token states, as a share of `num_slots`), both
    means over the same steps, those in which a request waits."""
    kv_tokens = row["token_states"] / 100 * num_slots
    return {"batch": row["mean_batch"], "kv_tokens": kv_tokens} | decode_step(
        row["mean_batch"], kv_tokens, model
    )


def chain(rows: dict[str, dict], num_slots: int, model: str = "OPT-13B", base: str = "oracle") -> dict:
    """Section 1's chain for each system of `bench memory` (`rows` = `report.data[workload]`),
    all over the same steps, those in which a request waits: its share of slots holding token
    states (%), its mean batch (= output tokens per decode step), the bytes one step reads, the
    bytes per output token, and its tokens per second relative to `base`'s if reading memory
    sets the pace: (batch / base's batch) × (base's step bytes / its step bytes)."""
    read = {system: memory_run(row, num_slots, model) for system, row in rows.items()}
    ref = read[base]
    return {
        system: {
            "token_states": rows[system]["token_states"],
            "batch": r["batch"],
            "step_bytes": r["total"],
            "per_token": r["per_token"],
            "speed": (r["batch"] / ref["batch"]) * (ref["total"] / r["total"]),
        }
        for system, r in read.items()
    }
