"""Published numbers of real models and GPUs: the inputs of `pagedkv.labs.costs`.

A model's KV footprint follows from four fields of its Hugging Face `config.json`:
`num_hidden_layers`, `num_key_value_heads`, `hidden_size / num_attention_heads` (the head
size) and `torch_dtype`; the parameter count sizes the weights that share the GPU with the
KV cache. vLLM reads the same fields to size its cache (`ModelConfig.get_num_kv_heads`,
`get_head_size`, `get_num_layers`).

Leaves out: quantized weights or KV (fp8 KV would halve bytes per token), sliding-window
layers, MLA (DeepSeek's latent KV) and tensor parallelism (splitting K/V heads over GPUs).
"""

from __future__ import annotations

from dataclasses import dataclass

DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "fp8": 1}


@dataclass(frozen=True)
class ModelSpec:
    name: str
    num_layers: int  # num_hidden_layers
    num_kv_heads: int  # num_key_value_heads (GQA: fewer than the query heads)
    head_dim: int  # hidden_size / num_attention_heads
    num_heads: int  # num_attention_heads (query heads)
    num_params: float  # parameters, for the weights' bytes and the FLOPs of a forward pass
    dtype: str  # torch_dtype of the published weights, also the KV dtype here
    max_seq_len: int  # max_position_embeddings


@dataclass(frozen=True)
class GPUSpec:
    name: str
    memory_gib: float  # device memory (HBM or GDDR), GiB
    hbm_gb_s: float  # device memory bandwidth, GB/s
    host_gb_s: float  # host link, one direction, GB/s (PCIe 4.0 x16: 32; PCIe 5.0 x16: 64)
    tflops: float  # dense 16-bit tensor-core FLOP/s, in TFLOP/s (no sparsity)


# Sources: each model's config.json on its Hugging Face model page (meta-llama/Meta-Llama-3-8B,
# meta-llama/Meta-Llama-3-70B, mistralai/Mistral-7B-v0.1, Qwen/Qwen2.5-7B, facebook/opt-13b);
# parameter counts from the same model cards. Head size = hidden_size / num_attention_heads:
# 4096/32, 8192/64, 4096/32, 3584/28, 5120/40 = 128 for all five.
MODELS = {
    m.name: m
    for m in (
        ModelSpec("Llama-3-8B", 32, 8, 128, 32, 8.03e9, "bfloat16", 8192),
        ModelSpec("Llama-3-70B", 80, 8, 128, 64, 70.6e9, "bfloat16", 8192),
        ModelSpec("Mistral-7B", 32, 8, 128, 32, 7.24e9, "bfloat16", 32768),
        ModelSpec("Qwen2.5-7B", 28, 4, 128, 28, 7.62e9, "bfloat16", 131072),
        # The vLLM paper's model (no GQA: every head has its own K/V): 800 KB per token.
        ModelSpec("OPT-13B", 40, 40, 128, 40, 12.9e9, "float16", 2048),
    )
}

# Sources: NVIDIA's data sheets (A100 Tensor Core GPU, SXM4 40 GB / 80 GB; H100 SXM5; L4).
# The host link is the PCIe slot (A100 and L4: PCIe 4.0 x16; H100: PCIe 5.0 x16), one direction.
GPUS = {
    g.name: g
    for g in (
        GPUSpec("A100-40GB", 40, 1555, 32, 312),
        GPUSpec("A100-80GB", 80, 2039, 32, 312),
        GPUSpec("H100-80GB", 80, 3350, 64, 989),
        GPUSpec("L4", 24, 300, 32, 121),
    )
}


def model_spec(name: str) -> ModelSpec:
    """The published configuration of a model by name (ValueError naming the choices)."""
    if name not in MODELS:
        raise ValueError(f"model must be one of {list(MODELS)}, got {name!r}")
    return MODELS[name]


def gpu_spec(name: str) -> GPUSpec:
    """The data-sheet numbers of a GPU by name (ValueError naming the choices)."""
    if name not in GPUS:
        raise ValueError(f"gpu must be one of {list(GPUS)}, got {name!r}")
    return GPUS[name]
