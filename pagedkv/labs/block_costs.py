"""Recompute against swap as vLLM's block (page) size grows: the numbers of notebook 11's
section 1.2's Optional part for the vLLM paper's OPT-13B, and what the paper's ratio of 1.2 would need.

A swap makes one copy call per block, layer, K and V, each way, so small blocks pay many
calls; recompute does not depend on the block size. At large blocks the copy calls hardly
count, and the swap is the K/V bytes over the host link, out and back in.
"""

from __future__ import annotations

from pagedkv.labs import costs


def ways_back_by_block(
    model: str = "OPT-13B",
    gpu: str = "A100-40GB",
    tokens: int = 1024,
    blocks: tuple[int, ...] = (1, 4, 16, 64, 256),
    paper_ratio: float = 1.2,
) -> dict:
    """Milliseconds to recompute and to swap (out and in) a request of `tokens` tokens for each
    block size of `blocks` (vLLM 0.1's settings, `Assumptions.vllm_2023`), and, at the largest
    block: the link's and copy calls' shares of the swap, the linear layers' share of the
    recompute, and the link speed (GB/s) or prefill speed-up that `paper_ratio` would need.

    Returns blocks, ms (list of (recompute, swap) rounded ms), mib (K/V MiB each way),
    link_ms, copy_ms, linear_ms, link_gb_s, swap_for_paper, link_needed, faster, and ratio
    (recompute / swap at the largest block, before rounding).
    """
    ways = [
        costs.preemption_costs(model, gpu, tokens, costs.Assumptions.vllm_2023(page_size=b)) for b in blocks
    ]
    ms = [(round(w["recompute_s"] * 1e3), round(w["swap_s"] * 1e3)) for w in ways]
    g = costs.gpu_spec(gpu)
    kv = tokens * costs.bytes_per_token(model)
    link_ms = 2 * kv / (g.host_to_gpu_gb_s * 1e9) * 1e3  # out and back in
    copy_ms = ways[-1]["swap_s"] * 1e3 - link_ms
    recompute, swap = ms[-1][0], link_ms + copy_ms  # swap before rounding
    swap_for_paper = recompute / paper_ratio
    return {
        "blocks": blocks,
        "ms": ms,
        "mib": kv / 2**20,
        "link_ms": link_ms,
        "copy_ms": copy_ms,
        "linear_ms": costs.step_terms(model, g, tokens, 0, prefill_lens=(tokens,))["linear"] * 1e3,
        "link_gb_s": g.host_to_gpu_gb_s,
        "swap_for_paper": swap_for_paper,
        "link_needed": g.host_to_gpu_gb_s * link_ms / (swap_for_paper - copy_ms),
        "faster": recompute / (paper_ratio * swap),
        "paper_ratio": paper_ratio,
        "ratio": ways[-1]["recompute_s"] / ways[-1]["swap_s"],  # before rounding
    }


def ways_back_text(r: dict, model: str = "OPT-13B", tokens: int = 1024, gpu: str = "A100-40GB") -> str:
    """The lines notebook 11 prints for `ways_back_by_block`'s result `r`: the table of times
    per block size, then what the swap at the largest block is made of, then what the paper's
    ratio would need."""
    rec, big, p = r["ms"][-1][0], r["blocks"][-1], r["paper_ratio"]
    swap = r["link_ms"] + r["copy_ms"]  # the table rounds it
    s4p, link = r["swap_for_paper"], f"{r['link_gb_s']:g} GB/s"
    lines = [
        f"{model}, {tokens:,} tokens, {gpu}: ms to bring the request back",
        f"{'tokens per block':18}" + "".join(f"{b:>7,}" for b in r["blocks"]),
        f"{'recompute':18}" + "".join(f"{m[0]:7,}" for m in r["ms"]),
        f"{'swap out+in':18}" + "".join(f"{m[1]:7,}" for m in r["ms"]),
        f"{model} at {big} tokens per block:",
        f"  recompute {rec} ms (linear layers {r['linear_ms']:.0f} ms); swap {swap:.1f} ms;"
        f" ratio {r['ratio']:.2f}",
        f"  swap = link {r['link_ms']:.1f} ms ({r['mib']:.0f} MiB out and back in at {link}:"
        f" {r['link_ms'] / 2:.1f} ms each way)",
        f"    + copy calls {r['copy_ms']:.1f} ms",
        f"for the paper's ratio of {p:g} on {model}, one of:",
        f"  a swap of {rec} / {p:g} = {s4p:.1f} ms: link part {s4p:.1f} - {r['copy_ms']:.1f}"
        f" = {s4p - r['copy_ms']:.1f} ms,",
        f"    so a link of {r['link_gb_s']:g} x {r['link_ms']:.1f} / {s4p - r['copy_ms']:.1f}"
        f" = {r['link_needed']:.0f} GB/s",
        f"  a recompute of {p:g} x {swap:.1f} = {p * swap:.0f} ms: a prefill {rec} / {p * swap:.0f}"
        f" = {r['faster']:.1f} times faster",
    ]
    return "\n".join(lines)


def swap_crossover(model: str, gpu: str = "A100-40GB", longest: int = 8192) -> int:
    """The longest request (at most `longest` tokens) that swaps out and back in faster than
    it recomputes, with today's settings (vLLM's 16-token blocks); 0 if none does. No longer
    request swaps faster: the swap's bytes and copy calls grow with the tokens, while a short
    prefill costs about one read of the weights whatever its length. (Just below it, a
    request that starts a new block may lose: each block adds its copy calls at once.)"""
    best = 0
    for tokens in range(1, longest + 1):
        way = costs.preemption_costs(model, gpu, tokens)
        if way["swap_s"] < way["recompute_s"]:
            best = tokens
    return best


def swap_crossover_text(model: str, gpu: str = "A100-40GB", width: int = 80) -> str:
    """The sentence notebook 11 prints inside its Result box: up to which request length a swap
    beats recompute on `model` (`swap_crossover`), and why, wrapped to `width` characters."""
    import textwrap

    longest = swap_crossover(model, gpu)
    return textwrap.fill(
        f"swap beats recompute only for requests of at most {longest} tokens: a short prefill"
        " costs about one read of the weights whatever its length; a swap's cost grows with every"
        " token from the start",
        width,
    )


def copy_calls_text(model: str, gpu: str = "A100-40GB", tokens: int = 1024, gathered: bool = False) -> str:
    """What one direction of a swap (a reload) of `tokens` tokens costs, at vLLM's 16-token
    blocks: the copy calls (one per block, layer, K or V) against the bytes over the link, and
    the bytes one call moves; with `gathered`, also a swap's time were all blocks gathered into
    one call each way (no per-call cost), set against recompute's time."""
    m, g, assume = costs.MODELS[model], costs.gpu_spec(gpu), costs.Assumptions()
    blocks, calls = -(-tokens // assume.page_size), costs.copy_calls(model, tokens, assume)
    link_gb_s = g.host_to_gpu_gb_s
    mib = tokens * costs.bytes_per_token(model) / 2**20
    link_ms = tokens * costs.bytes_per_token(model) / (link_gb_s * 1e9) * 1e3
    call_kib = assume.page_size * costs.bytes_per_token(model) / (2 * m.num_layers) / 1024
    text = (
        f"copying back in: {blocks} blocks x {m.num_layers} layers x K and V = {calls:,} copy"
        f" calls x {assume.copy_overhead_s * 1e6:g} µs = {calls * assume.copy_overhead_s * 1e3:.1f}"
        f" ms,\n  while its {mib:,.0f} MiB cross the {link_gb_s:g} GB/s host link in"
        f" {link_ms:.1f} ms;\n  one call moves only {call_kib:g} KiB (one block, layer, K or V):"
        " count a way back's copy calls,\n  not only its bytes"
    )
    if gathered:
        recompute_ms = costs.preemption_costs(model, gpu, tokens)["recompute_s"] * 1e3
        side = "less" if 2 * link_ms < recompute_ms else "more"
        text += (
            f";\n  gathered into one call each way, a swap would take about {2 * link_ms:.1f} ms,"
            f" {side} than\n  recompute's {recompute_ms:.1f} ms: the order above holds for the assumed"
            f" {assume.copy_overhead_s * 1e6:g} µs a call;\n  how many calls today's engines make"
            " is not checked here (11b, section 4)"
        )
    return text


def swap_sum_text(model: str, gpu: str = "A100-40GB", tokens: int = 1024) -> str:
    """A swap of `tokens` tokens as the sum of its two directions, each its copy calls plus its
    bytes over the host link (ms, 1 decimal), and the total (whole ms), e.g.
    "swap = out (41.0 + 5.4) + back (41.0 + 5.4) = 93 ms"."""
    assume = costs.Assumptions()
    calls_ms = costs.copy_calls(model, tokens, assume) * assume.copy_overhead_s * 1e3
    out_ms, back_ms = (costs.copy_seconds(model, gpu, tokens, to_gpu) * 1e3 for to_gpu in (False, True))
    total = round(costs.preemption_costs(model, gpu, tokens, assume)["swap_s"] * 1e3)
    parts = [f"{calls_ms:.1f} + {way_ms - calls_ms:.1f}" for way_ms in (out_ms, back_ms)]
    return f"swap = out ({parts[0]}) + back ({parts[1]}) = {total} ms  (copy calls + bytes, each way)"


def swap_break_even_us(model: str, gpu: str = "A100-40GB", tokens: int = 1024) -> float:
    """The cost of one copy call (µs, 1 decimal) at which a swap (out and back) of `tokens`
    tokens costs as much as recomputing them: below it swap wins, above it recompute does."""
    assume = costs.Assumptions()
    way = costs.preemption_costs(model, gpu, tokens, assume)
    calls = 2 * costs.copy_calls(model, tokens, assume)  # out and back
    bytes_s = way["swap_s"] - calls * assume.copy_overhead_s
    return round((way["recompute_s"] - bytes_s) / calls * 1e6, 1)


def bring_back_text(model: str, gpu: str, tokens: int) -> str:
    """The three ways back for a request of `tokens` tokens (vLLM's defaults: 16-token blocks),
    as the capacity calculator's text ends (`costs.calculator_text`), without the budget above
    them: the opening lines of notebook 11's section 1.2 Result box."""
    cost = costs.preemption_costs(model, gpu, tokens)
    ms = {k: f"{cost[f'{k}_s'] * 1e3:.1f} ms" for k in ("recompute", "swap", "reload")}
    return (
        f"bring back a request of {tokens:,} tokens on {model} ({gpu}), "
        f"{costs.size_text(cost['kv_bytes'])} of K/V:\n"
        f"  recompute {ms['recompute']}, swap out+in {ms['swap']}, second-tier reload {ms['reload']}"
    )


def constants_text(gpu: str = "A100-40GB") -> str:
    """The cost model's constants for `gpu` (`costs.gpu_spec`, `costs.Assumptions`), one a line,
    with what each prices."""
    spec, assume = costs.gpu_spec(gpu), costs.Assumptions()
    flops = f"{spec.tflops:g} TFLOP/s"
    rows = (
        ("linear layers' FLOP/s", f"{spec.linear_efficiency:.0%} of {flops}", "prefill compute"),
        ("attention FLOP/s", f"{spec.attention_efficiency:.0%} of {flops}", "prefill attention"),
        (
            "reading memory",
            f"{spec.decode_bw_efficiency:.0%} of {spec.hbm_gb_s:,g} GB/s",
            "weights, once a step",
        ),
        ("host link, each way", f"{spec.host_to_gpu_gb_s:g} GB/s", "swap, reload"),
        ("one copy call", f"{assume.copy_overhead_s * 1e6:g} µs", "per block (page), layer, K or V"),
        ("CPU time per step", f"{assume.step_overhead_s * 1e3:g} ms", "scheduling, sampling"),
    )
    lines = [f"{f'cost-model constant ({gpu})':32} {'value':>20}  used for"]
    lines += [f"{what:32} {value:>20}  {use}" for what, value, use in rows]
    return "\n".join(lines)


def prefill_work(model: str = "Mistral-7B", gpu: str = "A100-40GB", tokens: int = 1024) -> dict:
    """A prefill's work by hand: 2 FLOPs per linear-layer parameter per token (`linear`), plus
    causal attention (`attention`): QK^T and AV, 2 FLOPs per multiply-add each, over the
    tokens x (tokens + 1) / 2 pairs, per head and layer; and its time at the cost model's rates
    plus the CPU time of one step (`ms`)."""
    m, spec, assume = costs.MODELS[model], costs.gpu_spec(gpu), costs.Assumptions()
    linear = 2 * costs.linear_params(model) * tokens
    attention = 2 * m.num_layers * m.num_heads * m.head_dim * tokens * (tokens + 1)
    seconds = (
        linear / (spec.tflops * 1e12 * spec.linear_efficiency)
        + attention / (spec.tflops * 1e12 * spec.attention_efficiency)
        + assume.step_overhead_s
    )
    return {"linear": linear, "attention": attention, "ms": 1e3 * seconds}


def prefill_work_text(work: dict, model: str = "Mistral-7B", tokens: int = 1024) -> str:
    """The prefill's work and time, as the notebook prints them."""
    cpu_ms = costs.Assumptions().step_overhead_s * 1e3
    return (
        f"{model} prefill of {tokens:,} tokens: {work['linear'] / 1e12:.1f} TFLOP in linear layers"
        f" + {work['attention'] / 1e12:.2f} TFLOP of attention\n"
        "recompute (notebook 11, section 1.2): linear + attention at the rates above\n"
        f"  + {cpu_ms:g} ms of CPU = {work['ms']:.0f} ms"
    )
