"""Published numbers of real models and GPUs: the inputs of `pagedkv.labs.costs`.

A model's KV footprint follows from four fields of its Hugging Face `config.json`:
`num_hidden_layers`, `num_key_value_heads`, `hidden_size / num_attention_heads` (the head
size) and `torch_dtype`; the parameter count sizes the weights that share the GPU with the
KV cache, and `hidden_size`, `intermediate_size` and `vocab_size` size the activations of
vLLM's profile run. vLLM reads the same fields (`ModelConfig.get_num_kv_heads`,
`get_head_size`, `get_num_layers`).

A GPU's fields are of three kinds, and each says which: data-sheet numbers (memory, HBM
bandwidth, FLOP/s), measurements (the memory the device reports, host-link bandwidths), and
efficiencies that turn the roofline into time. docs/calibration.md lists every published
number these reproduce and how far off they are.

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
    num_params: float  # parameters, for the weights' bytes
    dtype: str  # torch_dtype of the published weights, also the KV dtype here
    max_seq_len: int  # max_position_embeddings
    hidden_size: int  # hidden_size
    intermediate_size: int  # intermediate_size (OPT: ffn_dim)
    vocab_size: int  # vocab_size: the embedding and LM head are hidden_size x vocab_size
    gated_mlp: bool  # SwiGLU (gate and up projections, Llama family) or one fc1 (OPT)


@dataclass(frozen=True)
class GPUSpec:
    name: str
    memory_gib: float  # nominal device memory of the data sheet ("40 GB"), GiB
    reported_gib: float  # what the device reports to CUDA (torch.cuda.mem_get_info total)
    hbm_gb_s: float  # device memory bandwidth, GB/s (data sheet)
    tflops: float  # dense 16-bit tensor-core FLOP/s, in TFLOP/s (no sparsity; data sheet)
    host_to_gpu_gb_s: float  # host link, host -> GPU (reload, swap in), GB/s (measured)
    gpu_to_host_gb_s: float  # host link, GPU -> host (swap out), GB/s (measured)
    linear_efficiency: float  # share of peak FLOP/s the linear layers reach in a prefill
    attention_efficiency: float  # share of peak FLOP/s prefill attention reaches
    decode_bw_efficiency: float  # share of HBM bandwidth a decode step's reads reach


# Sources: each model's config.json on its Hugging Face model page (meta-llama/Llama-2-7b-hf,
# meta-llama/Meta-Llama-3-8B, meta-llama/Meta-Llama-3-70B, mistralai/Mistral-7B-v0.1,
# Qwen/Qwen2.5-7B, facebook/opt-13b); parameter counts from the same model cards. Head size =
# hidden_size / num_attention_heads = 128 for all six.
MODELS = {
    m.name: m
    for m in (
        # The multi-head 7B most tutorials use (and notebook 00's "7B"): 512 KiB per token.
        ModelSpec("Llama-2-7B", 32, 32, 128, 32, 6.74e9, "float16", 4096, 4096, 11008, 32000, True),
        ModelSpec("Llama-3-8B", 32, 8, 128, 32, 8.03e9, "bfloat16", 8192, 4096, 14336, 128256, True),
        ModelSpec("Llama-3-70B", 80, 8, 128, 64, 70.6e9, "bfloat16", 8192, 8192, 28672, 128256, True),
        ModelSpec("Mistral-7B", 32, 8, 128, 32, 7.24e9, "bfloat16", 32768, 4096, 14336, 32000, True),
        ModelSpec("Qwen2.5-7B", 28, 4, 128, 28, 7.62e9, "bfloat16", 131072, 3584, 18944, 152064, True),
        # The vLLM paper's model (no GQA: every head has its own K/V): 800 KB per token.
        ModelSpec("OPT-13B", 40, 40, 128, 40, 12.9e9, "float16", 2048, 5120, 20480, 50272, False),
    )
}

# Sources, field by field:
# - memory_gib, hbm_gb_s, tflops: NVIDIA's data sheets (A100 Tensor Core GPU, SXM4 40 GB /
#   80 GB; H100 SXM5; L4).
# - reported_gib: the "total capacity" PyTorch prints in its CUDA out-of-memory message (the
#   total of torch.cuda.mem_get_info, which vLLM's profiler also starts from): 39.39 GiB for
#   an A100-40GB (a vLLM start-up log in github.com/vllm-project/vllm/issues/12330 reads
#   39.50 GiB: boards and drivers differ by ~0.3 %), 79.15 GiB for an A100-80GB, ~79.2 GiB
#   for an H100-80GB (79.1-79.3 GiB depending on the driver), ~22 GiB for an L4 (pagedkv's
#   reading of such messages for 24 GB cards; not checked on an L4).
# - host links: NVIDIA's nvbandwidth on an H100 SXM5 host (PCIe 5.0): ~35 GB/s host -> GPU,
#   ~53 GB/s GPU -> host. A100 and L4 (PCIe 4.0 x16, 32 GB/s per direction on paper): 25 GB/s
#   each way is pagedkv's estimate (about 80 % of the slot; not a published measurement).
# - linear_efficiency on the A100: from Vidur's operator profiles of Llama-3-8B (Agrawal et al.,
#   MLSys 2024; its A100 profile data): the linear layers of a 2,048-token prefill take
#   ~153 ms (~77 ms for 1,024) where 2 x 6.98e9 linear parameters x tokens at 312 TFLOP/s
#   would take 91.6 ms (45.8 ms): 0.60. The H100 and L4 values are pagedkv's estimate (the
#   same share), as are all attention and decode efficiencies (no published profile used).
GPUS = {
    g.name: g
    for g in (
        GPUSpec("A100-40GB", 40, 39.39, 1555, 312, 25, 25, 0.60, 0.50, 0.70),
        GPUSpec("A100-80GB", 80, 79.15, 2039, 312, 25, 25, 0.60, 0.50, 0.70),
        GPUSpec("H100-80GB", 80, 79.2, 3350, 989, 35, 53, 0.60, 0.50, 0.70),
        GPUSpec("L4", 24, 22.0, 300, 121, 25, 25, 0.60, 0.50, 0.70),
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


def size_text(num_bytes: float) -> str:
    """A size in the largest binary unit in which it is at least 1, so a small size never
    reads "0 MiB": size_text(128 * 1024) -> "128 KiB", size_text(2**27) -> "128 MiB"."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if num_bytes >= scale:
            return (
                f"{num_bytes / scale:,.0f} {unit}"
                if num_bytes % scale == 0
                else f"{num_bytes / scale:,.1f} {unit}"
            )
    return f"{num_bytes:,.0f} bytes"
