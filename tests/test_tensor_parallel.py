"""pagedkv.labs.tensor_parallel against the budget worked out by hand from Llama-3-70B's
published configuration (80 layers, 8 K/V heads of 128, hidden 8,192, MLP 28,672, vocabulary
128,256, 70.6e9 parameters in bf16) and the H100-80GB's reported 79.2 GiB."""

from __future__ import annotations

import pytest

from pagedkv.labs import costs
from pagedkv.labs.tensor_parallel import GPU_LINK_GB_S, tp_capacity, tp_exchange

GIB = 2**30


def hand_budget(tp: int) -> tuple[float, int, int]:
    """(KV budget bytes per GPU, K/V bytes per token per GPU, token slots), by hand."""
    weights = 70.6e9 * 2 / tp
    # the profile run's peak, unsplit: 8,192 tokens x (2 x hidden + SwiGLU's 3 x MLP) x 2 bytes,
    # plus 256 sequences' logits in bf16, float32 and float32 probabilities (2 + 4 + 4 bytes)
    peak = 8192 * (2 * 8192 + 3 * 28672) * 2 + 256 * 128256 * 10
    budget = 79.2 * GIB * 0.9 - weights - peak - 0.3 * GIB - 0.5 * GIB
    per_token = 2 * 80 * (8 // tp) * 128 * 2
    slots = int(budget // (per_token * 16)) * 16
    return budget, per_token, slots


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_llama_3_70b_split_over_h100s_matches_the_hand_budget(tp):
    got = tp_capacity("Llama-3-70B", "H100-80GB", tp)
    budget, per_token, slots = hand_budget(tp)
    assert got["weight_bytes"] == pytest.approx(70.6e9 * 2 / tp)
    assert got["bytes_per_token"] == per_token
    assert got["kv_budget_bytes"] == pytest.approx(budget)
    assert got["group_kv_bytes"] == pytest.approx(tp * budget)
    assert got["token_slots"] == slots
    assert got["requests"] == slots // 16 // (2048 // 16)


def test_known_values_and_one_gpu():
    assert [tp_capacity("Llama-3-70B", "H100-80GB", tp)["token_slots"] for tp in (2, 4, 8)] == [
        18736,
        468384,
        1367696,
    ]
    assert tp_capacity("Llama-3-70B", "H100-80GB", 4)["bytes_per_token"] == 80 * 1024
    # tp = 1 is the one-GPU budget
    assert tp_capacity("Mistral-7B", "A100-40GB", 1)["token_slots"] == 166352


def test_too_few_gpus_or_a_tp_that_splits_no_head_evenly():
    with pytest.raises(ValueError, match="does not fit on one H100-80GB"):
        tp_capacity("Llama-3-70B", "H100-80GB", 1)
    with pytest.raises(ValueError, match="must divide"):
        tp_capacity("Llama-3-70B", "H100-80GB", 3)
    with pytest.raises(ValueError):
        tp_capacity("Llama-3-70B", "H100-80GB", 0)
    assert costs.bytes_per_token("Llama-3-70B") == 320 * 1024


def test_tp_exchange_against_hand_values():
    # Llama-3-70B: hidden 8,192, 80 layers; 2 all-reduces x 8,192 x 2 bytes x 80 = 2,621,440
    ex = tp_exchange("Llama-3-70B", "H100-80GB", 4, 1024)
    assert ex["bytes_per_token"] == 2 * 8192 * 2 * 80 == 2_621_440
    # ring all-reduce: 2 x (4 - 1) / 4 of 1,024 tokens' bytes over 450 GB/s
    assert ex["exchange_s"] == pytest.approx(2_621_440 * 1024 * 1.5 / 450e9)
    # twice as many GPUs: half the compute per GPU
    assert tp_exchange("Llama-3-70B", "H100-80GB", 8, 1024)["compute_s"] == pytest.approx(ex["compute_s"] / 2)
    with pytest.raises(ValueError):
        tp_exchange("Llama-3-70B", "H100-80GB", 1, 1024)
    with pytest.raises(ValueError, match="tokens"):
        tp_exchange("Llama-3-70B", "H100-80GB", 2, 0)


def test_every_gpu_has_a_link_speed():
    # tp_exchange prices the exchange of any GPU the cost model knows: A100 SXM's NVLink is
    # 600 GB/s both ways (either memory size), H100 SXM's 900 GB/s; half of that each way
    assert GPU_LINK_GB_S == {"A100-40GB": 300.0, "A100-80GB": 300.0, "H100-80GB": 450.0}
    with pytest.raises(ValueError, match="NVLink.*'L4'"):
        tp_exchange("Llama-3-70B", "L4", 2, 1024)
