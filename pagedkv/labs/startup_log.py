"""A published vLLM start-up log of Llama-3-8B on an A100-40GB, and what vLLM v1 prints from it.

Notebook 11's exercise reads this log (docs/calibration.md, rows L1, L2 and A1 give its source
and the H100 log beside it): the memory the device reported, the profile run's activation
peak, the non-torch memory, no CUDA-graph pool, and the `# GPU blocks` it printed. vLLM v1
(`vllm/v1/core/kv_cache_utils.py`) prints the same budget as `GPU KV cache size: N tokens`
(N = blocks x block size) and `Maximum concurrency for L tokens per request: Xx`
(X = blocks / ceil(L / block size)), for a model whose layers are all full attention.
`answer_text` works the exercise out, so the notebook's visible cells quote none of it.
Leaves out: the log's other lines (model loading, CUDA graphs), which size nothing here.
"""

from __future__ import annotations

import dataclasses
import textwrap

from pagedkv.labs import costs

MODEL, GPU = "Llama-3-8B", "A100-40GB"
# the A100 log's terms, GiB: as it printed them
LOG_TERMS = {"reported_gib": 39.50, "activation_gib": 9.37, "non_torch_gib": 0.10, "cuda_graph_gib": 0.0}
LOG_BLOCKS = 5691  # '# GPU blocks: 5691' in the A100 log
H100_LOG_ACTIVATION_GIB = 1.26  # the H100 log's activation peak, same model and batch
BATCHED_TOKENS = 8192  # the profile run's tokens in both logs
BLOCK = 16  # tokens per block, vLLM's default


def log_capacity(max_len: int = BATCHED_TOKENS, activation_gib: float | None = None) -> int:
    """The cost model's blocks with every term of the A100 log typed in (5,694); with
    `activation_gib`, that peak replaces the log's and the other three terms stay the log's."""
    gpu = dataclasses.replace(costs.gpu_spec(GPU), reported_gib=LOG_TERMS["reported_gib"])
    t = dict(LOG_TERMS) if activation_gib is None else {**LOG_TERMS, "activation_gib": activation_gib}
    assume = costs.Assumptions(
        0.9,
        BATCHED_TOKENS,
        activation_gib=t["activation_gib"],
        non_torch_gib=t["non_torch_gib"],
        cuda_graph_gib=t["cuda_graph_gib"],
    )
    return int(costs.capacity(MODEL, gpu, max_len, assume)["num_pages"])


def v1_lines(blocks: int, max_len: int) -> tuple[str, str]:
    """vLLM v1's two start-up numbers for `blocks` blocks of 16 and requests of `max_len`."""
    return (
        f"GPU KV cache size: {blocks * BLOCK:,} tokens",
        f"Maximum concurrency for {max_len:,} tokens per request: {blocks / -(-max_len // BLOCK):.2f}x",
    )


def by_hand() -> tuple[float, int]:
    """The exercise on paper, weights rounded to 14.96 GiB: the KV budget in GiB and the blocks."""
    weights = round(costs.weight_bytes(MODEL) / costs.GIB, 2)
    spent = sum(LOG_TERMS[k] for k in ("activation_gib", "non_torch_gib", "cuda_graph_gib"))
    budget = 0.9 * LOG_TERMS["reported_gib"] - weights - spent
    block_mib = BLOCK * costs.bytes_per_token(MODEL) / 2**20
    return budget, int(budget * 1024 / block_mib)


def answer_text(blocks: int, max_len: int) -> str:
    """The exercise's answer: first the learner's three numbers worked by hand, then the cost
    model's (exact weights) and the log's, a check in one's head, the log's rounding as the reason
    for the few blocks the cost model is off, and last the blocks with pagedkv's own four terms (67 % more);
    each paragraph wrapped at 88 characters."""
    budget, hand = by_hand()
    exact = costs.weight_bytes(MODEL) / costs.GIB
    block_mib = BLOCK * costs.bytes_per_token(MODEL) // 2**20
    per_request = -(-max_len // BLOCK)
    own_peak = costs.activation_bytes(MODEL, costs.Assumptions(0.9, BATCHED_TOKENS)) / costs.GIB
    own = int(costs.capacity(MODEL, GPU, BATCHED_TOKENS)["num_pages"])  # every term pagedkv's
    gpu, assume = costs.gpu_spec(GPU), costs.Assumptions(0.9, BATCHED_TOKENS)
    margin = 0.9 * 0.005 + 0.005 + 0.005  # GiB: the three terms, each rounded to 0.01 GiB
    head = [
        f"Your three numbers (weights rounded to {exact:.2f} GiB):",
        f"  blocks: {budget:.2f} GiB / {block_mib} MiB = {budget * 1024 / block_mib:,.1f}, so {hand:,}",
        f"  N = {hand:,} x {BLOCK} = {hand * BLOCK:,} tokens",
        f"  X = {hand:,} / {per_request} = {hand / per_request:.2f}x",
        f"The cost model (the weights' exact {exact:.3f} GiB): {blocks:,} blocks, {blocks - hand} more",
        *(f"  {line}" for line in v1_lines(blocks, max_len)),
        f"The log: '# GPU blocks: {LOG_BLOCKS}'",
    ]
    paragraphs = [
        f"A check in your head: one block is {block_mib} MiB, and L = {max_len:,} tokens is "
        f"{per_request} blocks, {per_request * block_mib / 1024:g} GiB. So X equals the "
        f"KV budget in GiB: {budget:.2f} GiB gives {budget:.2f}x.",
        f"{blocks - LOG_BLOCKS} blocks more than the log "
        f"({100 * (blocks - LOG_BLOCKS) / LOG_BLOCKS:.2f} %): within the log's rounding (its terms "
        f"are given to 0.01 GiB, which can move the budget by up to {margin * 1024 / block_mib:.0f} blocks).",
    ]
    rows = {
        "the log's four terms:": blocks,
        f"the same, with pagedkv's peak ({own_peak:.2f} GiB):": log_capacity(activation_gib=own_peak),
        "all four of pagedkv's terms:": own,
    }
    more = f": {100 * (own - LOG_BLOCKS) / LOG_BLOCKS:.0f} % more than the log"
    table = [
        "Last, pagedkv's own terms against the log's (11b, section 1 splits the gap term by term):",
        *(f"  {name:47}{n:>6,} blocks" for name, n in rows.items()),
    ]
    table[-1] += more
    table.append(
        f"  (pagedkv's terms: {gpu.reported_gib:.2f} GiB reported, {assume.non_torch_gib:.2f} GiB "
        f"non-torch, a {assume.cuda_graph_gib:.2f} GiB graph reserve)"
    )
    return "\n".join([*head, "", *(textwrap.fill(p, 88) + "\n" for p in paragraphs), *table])


# the log's terms in the order the gap split types them in: calculator box -> Assumptions field
SPLIT_ORDER = (
    ("reported GiB", "reported_gib"),
    ("non-torch GiB", "non_torch_gib"),
    ("graphs GiB", "cuda_graph_gib"),
    ("act. GiB", "activation_gib"),
)


def gap_split() -> dict:
    """pagedkv's own estimate of the A100 log's blocks, then each log term typed in turn
    (`SPLIT_ORDER`): the pages each term moves (`moved`, box -> pages) and the pages with all
    of them (`pages`, 5,694). Also `no_graph`: the estimate without the 0.5 GiB graph reserve."""
    estimate = int(costs.capacity(MODEL, GPU, BATCHED_TOKENS)["num_pages"])
    no_graph_assume = costs.Assumptions(0.9, BATCHED_TOKENS, cuda_graph_gib=0.0)
    no_graph = int(costs.capacity(MODEL, GPU, BATCHED_TOKENS, no_graph_assume)["num_pages"])
    log_gpu, t = dataclasses.replace(costs.gpu_spec(GPU), reported_gib=LOG_TERMS["reported_gib"]), LOG_TERMS
    a0 = costs.Assumptions(0.9, BATCHED_TOKENS)
    a1 = dataclasses.replace(a0, non_torch_gib=t["non_torch_gib"])
    a2 = dataclasses.replace(a1, cuda_graph_gib=t["cuda_graph_gib"])
    a3 = dataclasses.replace(a2, activation_gib=t["activation_gib"])
    pages, moved = estimate, {}
    for (box, _), assume in zip(SPLIT_ORDER, (a0, a1, a2, a3), strict=True):  # each term on top of the last
        now = int(costs.capacity(MODEL, log_gpu, BATCHED_TOKENS, assume)["num_pages"])
        moved[box], pages = now - pages, now
    return {"estimate": estimate, "no_graph": no_graph, "moved": moved, "pages": pages, "logged": LOG_BLOCKS}


def gap_split_text(split: dict) -> str:
    """The split as the notebook prints it: the estimate, without the graph reserve, each term's
    pages, and the sum that closes the gap."""
    est, logged, pages, moved = split["estimate"], split["logged"], split["pages"], split["moved"]
    act = moved["act. GiB"]
    rest = sum(v for k, v in moved.items() if k != "act. GiB")
    lines = [
        f"pagedkv's own estimate {est:,} pages, the log {logged:,}: {(est - logged) / logged:.0%} more",
        f"without the 0.5 GiB graph reserve (docs/calibration.md row L1): {split['no_graph']:,} pages,"
        f" {(split['no_graph'] - logged) / logged:.1%} more",
        "the gap, each term in turn from pagedkv's value to the log's:",
    ]
    for box, field in SPLIT_ORDER:
        lines.append(f"  {box:15} -> {LOG_TERMS[field]:5.2f}: {moved[box]:+7,} pages")
    lines.append(
        f"with every term from the log: {pages:,} pages, {pages - logged} more than the log,"
        f" {(pages - logged) / logged:.2%}"
    )
    lines.append(
        f"{act:,} + {rest:,} = {act + rest:,}; {est:,} - {-(act + rest):,} = {pages:,}"
        f" = log + {pages - logged}"
    )
    return "\n".join(lines)


def two_7b_text(models: tuple[str, ...] = ("Mistral-7B", "Qwen2.5-7B"), gpu: str = "A100-40GB") -> str:
    """Notebook 11b's answer to its "two 7B models" quiz: each model's token slots on `gpu`
    (2,048-token requests, pagedkv's defaults), their ratio, and each model's activation peak,
    the term that keeps the ratio below the table's KiB-per-token one."""
    slots = {m: costs.capacity(m, gpu, 2048)["token_slots"] for m in models}
    lines = [f"{m:12} {n:9,} token slots" for m, n in slots.items()]
    lines.append(f"{models[1]}'s / {models[0]}'s: {slots[models[1]] / slots[models[0]]:.2f}")
    peaks = ", ".join(f"{m} {costs.activation_bytes(m) / costs.GIB:.2f}" for m in models)
    lines.append(f"not the table's 2.2: activation peaks (GiB) {peaks}")
    return "\n".join(lines)
