"""What the KV cache costs on a real model and GPU: bytes, capacity and the price of losing it.

The arithmetic a deployment starts from. Capacity is what vLLM's memory profiler does at start-up
(`Worker.determine_available_memory`), logged as "GPU KV cache size: N tokens" (older: "# GPU blocks: N"):

- bytes per token = 2 (K and V) x layers x K/V heads x head size x dtype bytes;
- KV budget = the memory the device reports x `gpu_memory_utilization` - weights - the activation peak
  of a profile run of `max_num_batched_tokens` tokens - non-torch memory (CUDA context, cuBLAS/NCCL
  buffers) - pagedkv's CUDA-graph reserve; token slots = budget / bytes per token, rounded down to whole
  pages. Weights and bytes per token are exact; the other three terms are pagedkv's estimates
  (`capacity_terms` says which, and why). The activation formula is the weakest: logged peaks run 16 % to
  8.6x above it (docs/calibration.md, rows A1 and L1), so a peak read from the engine's log can replace
  it (`Assumptions.activation_gib`);
- a preempted or evicted request of L tokens comes back by recompute (a prefill priced per operator
  class, `step_seconds`), swap (its K/V out to host memory and back, priced per copy: vLLM copies one
  block of one layer's K or V at a time, `copy_calls`) or a second-tier reload (one way).

Step times are roofline terms scaled by efficiencies from published profiles (`specs`), plus a fixed
CPU/scheduler time per step. docs/calibration.md compares every number that has a published counterpart.
Tensor parallelism is in `tensor_parallel`. Leaves out: overlap of transfers with compute, kernel-by-kernel
variation (a profiled simulator such as Vidur measures each operator at each shape instead of scaling a
roofline) and the sampler's cost beyond the LM head.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from pagedkv.core.plumbing.validation import check_int, check_number
from pagedkv.labs.specs import DTYPE_BYTES, GPUS, MODELS, GPUSpec, ModelSpec, gpu_spec, model_spec, size_text

GIB = 1 << 30
PAPER_KV_GIB = 12  # the vLLM paper's Table 1: KV memory of OPT-13B on one A100-40GB ("12 GB")


@dataclass(frozen=True)
class Assumptions:
    gpu_memory_utilization: float = 0.9  # share of reported memory vLLM may use (its default)
    max_num_batched_tokens: int = 8192  # tokens of vLLM's profile run (its v1 default on a GPU server)
    max_num_seqs: int = 256  # sequences of the profile run: the LM-head logits it holds
    non_torch_gib: float = 0.3  # memory outside torch's allocator: pagedkv's estimate
    cuda_graph_gib: float = 0.5  # CUDA-graph reserve: pagedkv's own (vLLM's default: 0)
    page_size: int = 16  # token slots per page (vLLM's default block_size)
    step_overhead_s: float = 0.003  # CPU time per engine step (scheduling, sampling): estimate
    copy_overhead_s: float = 10e-6  # fixed cost of one host<->GPU copy call: estimate
    activation_gib: float | None = None  # the profile run's peak as an engine logged it; None: the formula

    def __post_init__(self) -> None:
        util = check_number("gpu_memory_utilization", self.gpu_memory_utilization, 0.0)
        if not 0 < util <= 1:
            raise ValueError(f"gpu_memory_utilization must be a number in (0, 1], got {util!r}")
        for name in ("non_torch_gib", "cuda_graph_gib", "step_overhead_s", "copy_overhead_s"):
            check_number(name, getattr(self, name), 0.0)
        if self.activation_gib is not None:
            check_number("activation_gib", self.activation_gib, 0.0)
        check_int("max_num_batched_tokens", self.max_num_batched_tokens, 1)
        check_int("max_num_seqs", self.max_num_seqs, 1)
        check_int("page_size", self.page_size, 1)

    @classmethod
    def vllm_2023(cls, gpu_memory_utilization: float = 0.9, page_size: int = 16) -> Assumptions:
        """The engine of the vLLM paper (v0.1, 2023): a profile run of 2,560 tokens (its
        `max_num_batched_tokens` default), no CUDA graphs, and non-torch memory not
        subtracted (it read `torch.cuda.max_memory_allocated`)."""
        return cls(gpu_memory_utilization, 2560, 256, 0.0, 0.0, page_size)


def _specs(model: str | ModelSpec, gpu: str | GPUSpec) -> tuple[ModelSpec, GPUSpec]:
    return _model(model), gpu if isinstance(gpu, GPUSpec) else gpu_spec(gpu)


def _model(model: str | ModelSpec) -> ModelSpec:
    return model if isinstance(model, ModelSpec) else model_spec(model)


def bytes_per_token(model: str | ModelSpec) -> int:
    """K/V bytes one token takes over all layers. Example: Llama-3-8B -> 131072 (128 KiB)."""
    m = _model(model)
    return 2 * m.num_layers * m.num_kv_heads * m.head_dim * DTYPE_BYTES[m.dtype]


def weight_bytes(model: str | ModelSpec) -> float:
    m = _model(model)
    return m.num_params * DTYPE_BYTES[m.dtype]


def linear_params(model: str | ModelSpec) -> int:
    """Parameters of the per-token linear layers (Q, K, V, O and the MLP), from the config;
    the embedding and the LM head are not among them. Example: Llama-3-8B -> 6,979,321,856."""
    m = _model(model)
    kv_dim = m.num_kv_heads * m.head_dim
    mlp = (3 if m.gated_mlp else 2) * m.hidden_size * m.intermediate_size
    return m.num_layers * (m.hidden_size * (m.hidden_size + 2 * kv_dim) + m.hidden_size**2 + mlp)


def activation_bytes(model: str | ModelSpec, assume: Assumptions = Assumptions()) -> int:
    """pagedkv's estimate of the activation peak of vLLM's profile run, a formula per architecture.

    The run (vLLM V0: `GPUModelRunnerBase.profile_run` in vllm/worker/model_runner.py, called by
    `Worker.determine_num_available_blocks` in vllm/worker/worker.py; V1: `profile_run` and
    `_dummy_sampler_run` of vllm/v1/worker/gpu_model_runner.py) is one forward pass of
    `max_num_batched_tokens` dummy tokens split over `max_num_seqs` sequences, then the sampler on each
    sequence's last token. Counted, per token in the model's dtype: the residual stream and the layer's
    hidden state (2 x hidden) plus the wider of the QKV output and the MLP's intermediate tensors (SwiGLU:
    gate and up, 2 x intermediate, and their product; OPT: fc1's output and its activation); and the logits
    of `max_num_seqs` sequences in the dtype, in float32 and as float32 probabilities. Not counted:
    attention workspace, the caching allocator's rounding (torch's peak counts requested sizes, rounded to
    512 B) and the sampler's top-k/top-p temporaries, which come after the forward pass's tensors are freed.
    docs/calibration.md compares it with logged peaks (rows A1, L1). Example: Llama-3-8B at 8,192 tokens ->
    1.09 GiB."""
    m = _model(model)
    dtype, tokens = DTYPE_BYTES[m.dtype], assume.max_num_batched_tokens
    qkv = m.hidden_size + 2 * m.num_kv_heads * m.head_dim
    mlp = (3 if m.gated_mlp else 2) * m.intermediate_size
    per_token = (2 * m.hidden_size + max(qkv, mlp)) * dtype
    logits = min(assume.max_num_seqs, tokens) * m.vocab_size * (dtype + 4 + 4)
    return tokens * per_token + logits


def capacity_terms(
    model: str | ModelSpec, gpu: str | GPUSpec, assume: Assumptions = Assumptions()
) -> list[tuple[str, float, str]]:
    """The KV budget term by term, in bytes, each with its source: (name, bytes, source).
    The first term is what vLLM may use; the others are subtracted from it. A source says
    "your value" where the number differs from pagedkv's default (typed into the calculator,
    or passed in code), so it never claims a typed number came from a data sheet."""
    m, g = _specs(model, gpu)
    table = GPUS.get(g.name)
    usual = table is not None and table.reported_gib == g.reported_gib
    return [
        (
            f"{g.reported_gib:.2f} GiB reported x {assume.gpu_memory_utilization:g}",
            g.reported_gib * GIB * assume.gpu_memory_utilization,
            "CUDA's figure for this GPU" if usual else "your value",
        ),
        ("weights", weight_bytes(m), f"model card: params x {DTYPE_BYTES[m.dtype]} bytes"),
        (
            f"activation peak at {assume.max_num_batched_tokens:,} tokens",
            activation_bytes(m, assume) if assume.activation_gib is None else assume.activation_gib * GIB,
            "pagedkv's estimate" if assume.activation_gib is None else "your value",
        ),
        ("non-torch memory", assume.non_torch_gib * GIB, _source(assume, "non_torch_gib")),
        ("CUDA-graph reserve", assume.cuda_graph_gib * GIB, _source(assume, "cuda_graph_gib")),
    ]


def _source(assume: Assumptions, field: str) -> str:
    ours = "pagedkv's own; vLLM: 0" if field == "cuda_graph_gib" else "pagedkv's estimate"
    return ours if getattr(assume, field) == Assumptions.__dataclass_fields__[field].default else "your value"


def capacity(
    model: str | ModelSpec, gpu: str | GPUSpec, seq_len: int, assume: Assumptions = Assumptions()
) -> dict[str, float]:
    """KV budget (bytes), pages, token slots and requests of `seq_len` tokens that fit."""
    m, g = _specs(model, gpu)
    check_int("seq_len", seq_len, 1)
    usable, *spent = (value for _, value, _ in capacity_terms(m, g, assume))
    budget = usable - sum(spent)
    if budget <= 0:
        raise ValueError(  # lines under 80 characters (the calculator's width)
            f"{m.name} does not fit on one {g.name}: no memory is left for K/V.\n"
            f"Weights, activation peak, non-torch memory and CUDA graphs take {sum(spent) / GIB:.2f} GiB,\n"
            f"more than {assume.gpu_memory_utilization:.0%} of the {g.reported_gib:.2f} GiB reported "
            f"({usable / GIB:.2f} GiB)."
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


def paper_slots(page_size: int = 16) -> int:
    """Token slots of the vLLM paper's OPT-13B setup (Table 1: 12 GB of KV, "15.7K slots"),
    in whole pages: the memory budget of the serving benches. Example: 16 -> 15728."""
    check_int("page_size", page_size, 1)
    return int(PAPER_KV_GIB * GIB // (bytes_per_token("OPT-13B") * page_size)) * page_size


STEP_TERMS = ("linear", "lm_head", "attention_prefill", "attention_decode", "cpu")


def step_terms(
    model: str | ModelSpec,
    gpu: str | GPUSpec,
    num_batched_tokens: int,
    context_tokens: int,
    assume: Assumptions = Assumptions(),
    *,
    prefill_lens: Sequence[int] = (),
    num_seqs: int = 1,
) -> dict[str, float]:
    """One engine step's seconds per operator class (STEP_TERMS): the linear layers over
    `num_batched_tokens` (at least one read of the weights), the LM head for `num_seqs`
    last tokens, causal attention over each prompt of `prefill_lens`, decode attention
    reading `context_tokens` of K/V, and the CPU overhead."""
    terms = _step_pricer(model, gpu, assume)
    return dict(zip(STEP_TERMS, terms(num_batched_tokens, context_tokens, prefill_lens, num_seqs)))


def step_seconds(
    model: str | ModelSpec,
    gpu: str | GPUSpec,
    num_batched_tokens: int,
    context_tokens: int,
    assume: Assumptions = Assumptions(),
    *,
    prefill_lens: Sequence[int] = (),
    num_seqs: int = 1,
) -> float:
    """One engine step computing `num_batched_tokens` tokens (a decode token per running
    sequence plus any prefill) over `context_tokens` of K/V: the sum of `step_terms`."""
    return step_clock(model, gpu, assume)(num_batched_tokens, context_tokens, prefill_lens, num_seqs)


def _step_pricer(model: str | ModelSpec, gpu: str | GPUSpec, assume: Assumptions):
    """The terms of `step_terms` as a function of (num_batched_tokens, context_tokens,
    prefill_lens, num_seqs), with the model's and GPU's constants worked out once."""
    m, g = _specs(model, gpu)
    flops = g.tflops * 1e12
    hbm = g.hbm_gb_s * 1e9 * g.decode_bw_efficiency
    linear_den, attention_den = flops * g.linear_efficiency, flops * g.attention_efficiency
    linear_k, weights_s = 2 * linear_params(m), weight_bytes(m) / hbm
    lm_k, kv = 2 * m.hidden_size * m.vocab_size, bytes_per_token(m)
    attention_k = 2 * m.num_layers * m.num_heads * m.head_dim

    def terms(
        num_batched_tokens: int, context_tokens: int, prefill_lens: Sequence[int], num_seqs: int
    ) -> tuple[float, float, float, float, float]:
        attention = sum(attention_k * n * (n + 1) for n in prefill_lens)
        return (
            max(linear_k * num_batched_tokens / linear_den, weights_s),
            lm_k * num_seqs / linear_den,
            attention / attention_den,
            context_tokens * kv / hbm,
            assume.step_overhead_s,
        )

    return terms


def step_clock(model: str | ModelSpec, gpu: str | GPUSpec, assume: Assumptions = Assumptions()):
    """`step_terms` summed, as a function of (num_batched_tokens, context_tokens, prefill_lens,
    num_seqs), constants worked out once (a serving run prices hundreds of thousands of steps)."""
    terms = _step_pricer(model, gpu, assume)
    return lambda *step: sum(terms(*step))  # the terms added in STEP_TERMS' order


def prefill_seconds(
    model: str | ModelSpec, gpu: str | GPUSpec, tokens: int, assume: Assumptions = Assumptions()
) -> float:
    """Time to compute K/V of `tokens` tokens from scratch: one step with one prompt."""
    return step_seconds(model, gpu, tokens, 0, assume, prefill_lens=(tokens,))


def copy_seconds(
    model: str | ModelSpec,
    gpu: str | GPUSpec,
    num_tokens: int,
    to_gpu: bool,
    assume: Assumptions = Assumptions(),
) -> float:
    """One direction of a swap: the K/V bytes over the host link in that direction, plus a
    fixed cost per copy call. vLLM's `swap_blocks` issues one copy per block per layer, for K
    and for V, so small blocks pay many calls (the paper's Fig. 19)."""
    m, g = _specs(model, gpu)
    link = (g.host_to_gpu_gb_s if to_gpu else g.gpu_to_host_gb_s) * 1e9
    return num_tokens * bytes_per_token(m) / link + copy_calls(m, num_tokens, assume) * assume.copy_overhead_s


def copy_calls(model: str | ModelSpec, num_tokens: int, assume: Assumptions = Assumptions()) -> int:
    """Copy calls one direction of a swap of `num_tokens` tokens makes: one per block, layer, K or V."""
    return -(-num_tokens // assume.page_size) * _model(model).num_layers * 2


def preemption_costs(
    model: str | ModelSpec, gpu: str | GPUSpec, num_tokens: int, assume: Assumptions = Assumptions()
) -> dict[str, float]:
    """Seconds to bring back a request of `num_tokens` tokens whose K/V left the GPU:
    recompute, swap (out and back) or a second-tier reload (back only), and the bytes moved."""
    m, g = _specs(model, gpu)
    check_int("num_tokens", num_tokens, 1)
    back = copy_seconds(m, g, num_tokens, True, assume)
    return {
        "kv_bytes": num_tokens * bytes_per_token(m),
        "recompute_s": prefill_seconds(m, g, num_tokens, assume),
        "swap_s": copy_seconds(m, g, num_tokens, False, assume) + back,
        "reload_s": back,
    }


def table(seq_len: int = 2048, num_tokens: int = 1024, assume: Assumptions = Assumptions()) -> list[dict]:
    """One row per (model, GPU) whose weights fit: capacity at `seq_len`, ways back for `num_tokens`."""
    rows = []
    for m in MODELS:
        for g in GPUS:
            try:
                cap = capacity(m, g, seq_len, assume)
            except ValueError:
                continue  # weights alone do not fit (Llama-3-70B on one GPU)
            rows.append({"model": m, "gpu": g, **cap, **preemption_costs(m, g, num_tokens, assume)})
    return rows


def calculator_text(
    model: str | ModelSpec, gpu: str | GPUSpec, tokens: int, assume: Assumptions = Assumptions(), ways=True
) -> str:
    """The budget as text: each term and its source, pages, token slots, what fits, ways back if `ways`."""
    m, g = _specs(model, gpu)
    try:
        cap = capacity(m, g, tokens, assume)
    except ValueError as error:
        return str(error)
    terms = capacity_terms(m, g, assume)
    lines = [f"{m.name} on {g.name}: {cap['bytes_per_token'] / 1024:.0f} KiB per token"]
    for i, (name, value, source) in enumerate(terms):
        lines.append(f"  {'  ' if i == 0 else '- '}{name:<32} {value / GIB:6.2f} GiB  ({source})")
    shown = [round(value / GIB, 2) for _, value, _ in terms]  # the terms as printed above
    rounded = f"{shown[0] - sum(shown[1:]):.2f}"
    lines.append(
        f"  = KV budget {cap['kv_budget_bytes'] / GIB:.2f} GiB = {cap['num_pages']:,} pages of "
        f"{assume.page_size} = {cap['token_slots']:,} token slots"
    )
    if rounded != f"{cap['kv_budget_bytes'] / GIB:.2f}":  # only where rounding shows
        lines.append(f"    (from the exact terms; the rounded ones above add up to {rounded})")
    v1 = capacity(m, g, tokens, replace(assume, cuda_graph_gib=0.0))  # vLLM v1 subtracts no graphs
    pad = "      " if assume.cuda_graph_gib else "    vLLM v1 logs "  # two lines: no wrap in the widget
    if assume.cuda_graph_gib:  # vLLM records its graphs outside the 0.9 (docs/vllm_map.md): 0 there
        lines.append(f"    with graphs GiB 0, as vLLM v1 by default: {v1['num_pages']:,} pages, logged as")
    lines += [
        f"{pad}'GPU KV cache size: {v1['token_slots']:,} tokens'",
        f"      (older: '# GPU blocks: {v1['num_pages']}')",
        f"requests of {tokens:,} tokens that fit: {cap['requests']:,}",
    ]
    if not ways:
        return "\n".join(lines)
    cost = preemption_costs(m, g, tokens, assume)
    lines += [
        f"bring one back on {m.name}, {size_text(cost['kv_bytes'])} of K/V:",
        f"  recompute {cost['recompute_s'] * 1e3:.1f} ms, swap out+in {cost['swap_s'] * 1e3:.1f} ms, "
        f"second-tier reload {cost['reload_s'] * 1e3:.1f} ms",
    ]
    return "\n".join(lines)
