"""What the KV cache costs on a real model and GPU: bytes, capacity and the price of losing it.

The same arithmetic a deployment starts from (vLLM does the first half when it profiles
memory at start-up and logs "# GPU blocks"):

- bytes per token = 2 (K and V) x layers x K/V heads x head size x dtype bytes;
- KV budget = GPU memory x `gpu_memory_utilization` - weights; token slots = budget / bytes
  per token, rounded down to whole pages; requests that fit at a length = slots / length;
- a preempted or evicted request of L tokens comes back by one of three roads:
  recompute (a prefill of L tokens: 2 x params x L FLOPs plus attention, at `mfu` of the
  GPU's FLOP/s, never faster than reading the weights once), swap (its K/V out to host
  memory and back over the host link at `link_efficiency`) or a second-tier reload (only
  the way back: the copy out happened when the page was evicted, off the critical path).

Every number is an estimate under the stated `Assumptions`; the notebook's calculator
shows them next to each other. Leaves out: activation memory and CUDA graphs (vLLM reserves
some of the budget for them), tensor parallelism, overlap of transfers with compute, and
kernels' real efficiency (measure it: these are roofline numbers).
"""

from __future__ import annotations

from dataclasses import dataclass

from pagedkv.core.plumbing.validation import check_int, check_number
from pagedkv.labs.specs import DTYPE_BYTES, GPUS, MODELS, GPUSpec, ModelSpec, gpu_spec, model_spec

GIB = 1 << 30


@dataclass(frozen=True)
class Assumptions:
    gpu_memory_utilization: float = 0.9  # share of GPU memory for weights + KV (vLLM's default)
    mfu: float = 0.5  # share of peak FLOP/s a prefill reaches
    link_efficiency: float = 0.8  # share of the host link's bandwidth a copy reaches
    page_size: int = 16  # token slots per page (vLLM's default block_size)

    def __post_init__(self) -> None:
        for name in ("gpu_memory_utilization", "mfu", "link_efficiency"):
            if not 0 < check_number(name, getattr(self, name), 0.0) <= 1:
                raise ValueError(f"{name} must be a number in (0, 1], got {getattr(self, name)!r}")
        check_int("page_size", self.page_size, 1)


def _specs(model: str | ModelSpec, gpu: str | GPUSpec) -> tuple[ModelSpec, GPUSpec]:
    return (
        model if isinstance(model, ModelSpec) else model_spec(model),
        gpu if isinstance(gpu, GPUSpec) else gpu_spec(gpu),
    )


def bytes_per_token(model: str | ModelSpec) -> int:
    """K/V bytes one token takes over all layers. Example: Llama-3-8B -> 131072 (128 KiB)."""
    m = model if isinstance(model, ModelSpec) else model_spec(model)
    return 2 * m.num_layers * m.num_kv_heads * m.head_dim * DTYPE_BYTES[m.dtype]


def weight_bytes(model: str | ModelSpec) -> float:
    m = model if isinstance(model, ModelSpec) else model_spec(model)
    return m.num_params * DTYPE_BYTES[m.dtype]


def capacity(
    model: str | ModelSpec, gpu: str | GPUSpec, seq_len: int, assume: Assumptions = Assumptions()
) -> dict[str, float]:
    """KV budget (bytes), pages, token slots and requests of `seq_len` tokens that fit."""
    m, g = _specs(model, gpu)
    check_int("seq_len", seq_len, 1)
    budget = g.memory_gib * GIB * assume.gpu_memory_utilization - weight_bytes(m)
    if budget <= 0:
        raise ValueError(
            f"model {m.name}'s weights ({weight_bytes(m) / GIB:.1f} GiB) do not fit in "
            f"{assume.gpu_memory_utilization:.0%} of gpu {g.name}'s {g.memory_gib} GiB"
        )
    pages = int(budget // (bytes_per_token(m) * assume.page_size))
    slots = pages * assume.page_size
    pages_per_request = -(-seq_len // assume.page_size)
    return {
        "kv_budget_bytes": budget,
        "bytes_per_token": bytes_per_token(m),
        "num_pages": pages,
        "token_slots": slots,
        "requests": pages // pages_per_request,
    }


def prefill_seconds(
    model: str | ModelSpec, gpu: str | GPUSpec, tokens: int, assume: Assumptions = Assumptions()
) -> float:
    """Time to compute K/V of `tokens` tokens from scratch (one prefill)."""
    m, g = _specs(model, gpu)
    flops = 2 * m.num_params * tokens + 2 * m.num_layers * tokens**2 * m.num_heads * m.head_dim
    return max(flops / (g.tflops * 1e12 * assume.mfu), weight_bytes(m) / (g.hbm_gb_s * 1e9))


def step_seconds(
    model: str | ModelSpec,
    gpu: str | GPUSpec,
    num_batched_tokens: int,
    context_tokens: int,
    assume: Assumptions = Assumptions(),
) -> float:
    """One engine step computing `num_batched_tokens` tokens (a decode token per running
    sequence plus any prefill) over `context_tokens` of K/V in all: the longer of reading
    the weights and every K/V once (memory-bound decode) and the FLOPs of those tokens."""
    m, g = _specs(model, gpu)
    memory = (weight_bytes(m) + context_tokens * bytes_per_token(m)) / (g.hbm_gb_s * 1e9)
    compute = 2 * m.num_params * num_batched_tokens / (g.tflops * 1e12 * assume.mfu)
    return max(memory, compute)


def preemption_costs(
    model: str | ModelSpec, gpu: str | GPUSpec, num_tokens: int, assume: Assumptions = Assumptions()
) -> dict[str, float]:
    """Seconds to bring back a request of `num_tokens` tokens whose K/V left the GPU:
    recompute, swap (out and back) or a second-tier reload (back only), and the bytes moved."""
    m, g = _specs(model, gpu)
    check_int("num_tokens", num_tokens, 1)
    kv = num_tokens * bytes_per_token(m)
    link = g.host_gb_s * 1e9 * assume.link_efficiency
    return {
        "kv_bytes": kv,
        "recompute_s": prefill_seconds(m, g, num_tokens, assume),
        "swap_s": 2 * kv / link,
        "reload_s": kv / link,
    }


def table(seq_len: int = 2048, num_tokens: int = 1024, assume: Assumptions = Assumptions()) -> list[dict]:
    """One row per (model, GPU) whose weights fit: capacity at `seq_len` and the three
    ways back for a `num_tokens`-token request."""
    rows = []
    for m in MODELS:
        for g in GPUS:
            try:
                cap = capacity(m, g, seq_len, assume)
            except ValueError:
                continue  # weights alone do not fit (Llama-3-70B on one GPU)
            rows.append({"model": m, "gpu": g, **cap, **preemption_costs(m, g, num_tokens, assume)})
    return rows


def calculator():
    """An ipywidgets calculator: pick a model, GPU, request length and assumptions; read
    bytes per token, what fits and the three ways back. Returns the widget box."""
    import ipywidgets as widgets

    pick_model = widgets.Dropdown(options=list(MODELS), value="Mistral-7B", description="model")
    pick_gpu = widgets.Dropdown(options=list(GPUS), value="A100-40GB", description="GPU")
    length = widgets.IntSlider(2048, min=16, max=32768, step=16, description="tokens")
    util = widgets.FloatSlider(0.9, min=0.5, max=1.0, step=0.05, description="mem util")
    mfu = widgets.FloatSlider(0.5, min=0.1, max=1.0, step=0.05, description="MFU")
    out = widgets.HTML()

    def update(_=None) -> None:
        out.value = calculator_text(
            pick_model.value, pick_gpu.value, length.value, Assumptions(util.value, mfu.value)
        ).replace("\n", "<br>")

    for w in (pick_model, pick_gpu, length, util, mfu):
        w.observe(update, names="value")
    update()
    return widgets.VBox([widgets.HBox([pick_model, pick_gpu]), length, util, mfu, out])


def calculator_text(model: str, gpu: str, tokens: int, assume: Assumptions = Assumptions()) -> str:
    """The calculator's answer as text (what the widget shows)."""
    try:
        cap = capacity(model, gpu, tokens, assume)
    except ValueError as error:
        return str(error)
    cost = preemption_costs(model, gpu, tokens, assume)
    return (
        f"{model} on {gpu}: {cap['bytes_per_token'] / 1024:.0f} KiB per token, "
        f"KV budget {cap['kv_budget_bytes'] / GIB:.1f} GiB = {cap['token_slots']:,} token slots\n"
        f"requests of {tokens:,} tokens that fit: {cap['requests']:,}\n"
        f"bring one back ({cost['kv_bytes'] / 2**20:,.0f} MiB of K/V): recompute "
        f"{cost['recompute_s'] * 1e3:.1f} ms, swap out+in {cost['swap_s'] * 1e3:.1f} ms, "
        f"second-tier reload {cost['reload_s'] * 1e3:.1f} ms"
    )
