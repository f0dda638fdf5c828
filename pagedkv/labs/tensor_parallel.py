"""What fits per GPU when one model is split over several GPUs by tensor parallelism (TP).

A model too large for one GPU (Llama-3-70B's 131.5 GiB of weights) is served by a group of
TP GPUs that run every layer together. Each GPU holds 1/TP of every weight matrix and 1/TP of
the K/V heads (vLLM: `--tensor-parallel-size`). So, per GPU:

- weights = the model's weights / TP;
- K/V bytes per token = 2 x layers x (K/V heads / TP) x head size x bytes per number;
- KV budget = the same start-up budget as one GPU (`costs.capacity`), with those weights.

Every token's K/V is spread over all TP GPUs, each GPU holding its share of the heads. So the
group holds as many tokens as one GPU has token slots; the K/V memory of the group is TP times
one GPU's. The activation peak is left unsplit: each GPU keeps the one-GPU estimate (an upper
bound, since the MLP's tensors are split too). `tp_exchange` prices the time the GPUs spend
exchanging results. Leaves out: the all-reduce buffers, and K/V heads replicated when TP
exceeds their number (TP must divide it).
"""

from __future__ import annotations

import dataclasses

from pagedkv.core.plumbing.validation import check_int
from pagedkv.labs import costs
from pagedkv.labs.specs import GPUSpec, ModelSpec, model_spec

DEFAULT = costs.Assumptions()  # vLLM's defaults and pagedkv's estimates


def tp_capacity(
    model: str | ModelSpec,
    gpu: str | GPUSpec,
    tp: int,
    seq_len: int = 2048,
    assume: costs.Assumptions = DEFAULT,
) -> dict[str, float]:
    """Per-GPU weights, K/V bytes per token and KV budget of `model` split over `tp` GPUs of
    type `gpu`, and the token slots and requests of `seq_len` tokens the group holds.

    Returns weight_bytes (per GPU), bytes_per_token (per GPU), kv_budget_bytes (per GPU),
    group_kv_bytes (all TP GPUs), token_slots and requests (the whole group: a token's K/V is
    split over the GPUs). ValueError if `tp` does not divide the K/V heads, or if the weights
    left on each GPU still do not fit. Example: Llama-3-70B, H100-80GB, tp=4 -> 80 KiB per
    token per GPU, 468,384 token slots.
    """
    m = model if isinstance(model, ModelSpec) else model_spec(model)
    check_int("tp", tp, 1)
    if m.num_kv_heads % tp:
        raise ValueError(f"tp must divide {m.name}'s {m.num_kv_heads} K/V heads, got {tp}")
    peak = assume.activation_gib  # the one-GPU peak, unsplit
    if peak is None:
        peak = costs.activation_bytes(m, assume) / costs.GIB
    shard = dataclasses.replace(m, num_params=m.num_params / tp, num_kv_heads=m.num_kv_heads // tp)
    cap = costs.capacity(shard, gpu, seq_len, dataclasses.replace(assume, activation_gib=peak))
    return {
        "weight_bytes": costs.weight_bytes(shard),
        "bytes_per_token": cap["bytes_per_token"],
        "kv_budget_bytes": cap["kv_budget_bytes"],
        "group_kv_bytes": tp * cap["kv_budget_bytes"],
        "token_slots": cap["token_slots"],
        "requests": cap["requests"],
    }


# GPU-to-GPU link (NVLink), GB/s each way per GPU: half the data sheets' bidirectional totals
# (A100 SXM 600 GB/s, either memory size; H100 SXM 900 GB/s; the L4 has no NVLink, only PCIe).
# pagedkv's estimate: a real all-reduce reaches less.
GPU_LINK_GB_S = {"A100-40GB": 300.0, "A100-80GB": 300.0, "H100-80GB": 450.0}


def tp_exchange(model: str | ModelSpec, gpu: str, tp: int, tokens: int) -> dict[str, float]:
    """The time TP GPUs spend exchanging partial results for a step of `tokens` tokens, against
    the time each GPU computes its linear layers (the cost model's roofline).

    Every layer ends its attention and its MLP with an all-reduce of the hidden state: 2 x
    hidden size x 2 bytes per token per layer. A ring all-reduce sends 2 x (TP - 1) / TP of
    those bytes from each GPU over its link (GPU_LINK_GB_S). Returns bytes_per_token (all
    layers), exchange_s and compute_s. Example: Llama-3-70B, 2,621,440 bytes per token.
    """
    m = model if isinstance(model, ModelSpec) else model_spec(model)
    check_int("tp", tp, 2)
    check_int("tokens", tokens, 1)
    g = costs.gpu_spec(gpu)
    if g.name not in GPU_LINK_GB_S:
        raise ValueError(f"gpu must be one with an NVLink link, {sorted(GPU_LINK_GB_S)}, got {gpu!r}")
    per_token = 2 * m.hidden_size * 2 * m.num_layers
    sent = per_token * tokens * 2 * (tp - 1) / tp
    compute = 2 * costs.linear_params(m) * tokens / tp / (g.tflops * 1e12 * g.linear_efficiency)
    return {
        "bytes_per_token": per_token,
        "exchange_s": sent / (GPU_LINK_GB_S[g.name] * 1e9),
        "compute_s": compute,
    }
