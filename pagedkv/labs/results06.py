"""Notebook 06's answers as text, for its closed boxes: each function writes what a run shows,
so the sentences stay out of the notebook's visible cells until a reader opens the box."""

from __future__ import annotations

from pagedkv.labs import step_bytes
from pagedkv.labs.specs import gpu_spec, model_spec

WIDTH = 80  # characters per printed line: a closed box at projector width wraps no number


def memory_text(shares: dict[str, dict]) -> str:
    """Section 1's result: how full paging and the oracle keep the slots (`shares`:
    `memory.run(...).data["sharegpt"]`), and why paging's free share stays free (the steps in
    which the queue's first request needed more pages than were free); the batches wait for
    the prediction."""
    paged, oracle = shares["paged"], shares["oracle"]
    blocked, steps = paged["head_blocked_steps"], paged["loaded_steps"]
    which = f"all {steps:,}" if blocked == steps else f"{blocked:,} of the {steps:,}"
    return (
        f"Result: paging fills {paged['token_states']:.1f}% of the slots with K/V, the oracle "
        f"{oracle['token_states']:.1f}%.\nPaging's free {paged['free']:.1f}% stays free because "
        f"the first waiting request needed more\n  pages than were left, in {which} steps averaged."
        "\nThe batch and tokens per second: after the prediction below."
    )


def recompute_text(shares: dict[str, dict], prompt_tokens: int) -> str:
    """Section 1's cost the tokens per second leave out: paging's preemptions and the tokens it
    computes again (`prompt_tokens`: what the run's prompts hold), against the other systems'."""
    paged = shares["paged"]
    others = [s for s in shares if s != "paged" and not shares[s].get("preemptions")]
    return (
        f"paged: {paged['preemptions']} preemptions, of {paged['preempted_requests']} requests "
        "(some preempted several times),\n"
        f"  and {paged['recomputed_tokens']:,} tokens computed again (all the prompts hold "
        f"{prompt_tokens:,})\n{', '.join(others)}: no preemption"
    )


def price_steps(
    records: list, weights_ms: float, slot_ms: float, token_ms: float
) -> list[tuple[float, float]]:
    """Section 1's roofline, one step at a time: each record (batch, slots holding K/V, tokens
    recomputed in the step) priced as (its reading: the weights, then `slot_ms` per slot of
    K/V; its arithmetic: `token_ms` per decode and per recomputed token). The step takes the
    longer of the two."""
    return [(weights_ms + slots * slot_ms, (batch + again) * token_ms)
            for batch, slots, again in records]  # fmt: skip


def recompute_price(shares: dict[str, dict], num_slots: int, gpu: str = "A100-40GB") -> dict:
    """Section 1's recompute priced with the section's own model, at the GPU's data-sheet peaks
    (an estimate, not a measurement; OPT-13B). One window: the steps in which a request still
    waits (`loaded_steps`), over which the shares, the batch and so the 1.8x are averaged.
    `token_ms`: one token's arithmetic, 2 FLOPs per weight; `step_ms`: the mean step's reading;
    `decode_arithmetic_ms`: the mean batch's arithmetic. Each recorded step (`queued_steps`) is
    priced by `price_steps`; `priced_s` sums them, against `decode_s` (reading only);
    `arithmetic_steps`: the steps whose arithmetic exceeds their reading. `gain`: paging's
    tokens per second over the oracle's, counting reads only, then with each step's recompute
    priced in that step. `added`, `own_steps_gain`: the bound if the recompute took steps of
    its own (the times add)."""
    model, g = model_spec("OPT-13B"), gpu_spec(gpu)
    paged, oracle = (step_bytes.memory_run(shares[s], num_slots) for s in ("paged", "oracle"))
    token_ms = 2 * model.num_params / (g.tflops * 1e12) * 1e3
    step_ms = paged["total"] / (g.hbm_gb_s * 1e9) * 1e3
    weights_ms = paged["weights"] / (g.hbm_gb_s * 1e9) * 1e3
    slot_ms = (paged["kv"] / paged["kv_tokens"]) / (g.hbm_gb_s * 1e9) * 1e3
    row = shares["paged"]
    priced = price_steps(row["queued_steps"], weights_ms, slot_ms, token_ms)  # (reading, arithmetic)
    recompute_s = row["recomputed_while_queued"] * token_ms / 1e3
    decode_s, priced_s = row["loaded_steps"] * step_ms / 1e3, sum(map(max, priced)) / 1e3
    gain = oracle["per_token"] / paged["per_token"]
    added = recompute_s / decode_s
    return {"token_ms": token_ms, "step_ms": step_ms, "recompute_s": recompute_s,
            "decode_s": decode_s, "priced_s": priced_s, "added": added,
            "gain": (gain, gain * decode_s / priced_s), "own_steps_gain": gain / (1 + added),
            "arithmetic_steps": sum(arithmetic > reading for reading, arithmetic in priced),
            "decode_arithmetic_ms": paged["batch"] * token_ms}  # fmt: skip


def recompute_price_text(shares: dict[str, dict], num_slots: int) -> str:
    """`recompute_price` as the lines of section 1's box of the recompute: the window and the
    recomputed tokens in it (the rest fall in the drain after it), a token's arithmetic, the
    mean step's, each step priced, and the one line of paging's gain."""
    p, paged = recompute_price(shares, num_slots), shares["paged"]
    steps, inside = paged["loaded_steps"], paged["recomputed_while_queued"]
    total = paged["recomputed_tokens"]
    weights, tflops = model_spec("OPT-13B").num_params, gpu_spec("A100-40GB").tflops
    gain, priced = p["gain"]
    return "\n".join(
        [
            f"priced over the {steps:,} steps in which a request waits (A100 peaks, an estimate),",
            f"  which recompute {inside:,} of the {total:,} tokens ({total - inside:,} fall in the drain):",
            f"  a token's arithmetic: 2 FLOPs x {weights / 1e9:.1f} billion weights / {tflops:g} "
            f"TFLOP/s = {p['token_ms']:.3f} ms",
            f"  mean step: decodes {p['token_ms']:.3f} ms x batch {paged['mean_batch']:.1f} = "
            f"{p['decode_arithmetic_ms']:.1f} ms, reading {p['step_ms']:.1f} ms",
            "  a step takes its reading or its arithmetic (decodes + recompute), the longer:",
            f"  the arithmetic is longer in {p['arithmetic_steps']} steps; all {steps:,} take "
            f"{p['priced_s']:.1f} s, reading alone {p['decode_s']:.1f} s",
            f"paged's tokens/s against the oracle's: {gain:.1f}x counting decode reads only,",
            f"  {priced:.1f}x with each step's recompute priced in that step",
        ]
    )


def sharing_text(data: dict, prompts: list[int], page: int = 16) -> str:
    """Section 2's result: which mode saves more at width 6, and why (`data`:
    `sharing.run(...).data`; `prompts`: the run's prompt lengths, in pages of `page`)."""
    beam6, sample6 = (data[m][6]["saving_pct"] for m in ("beam search", "parallel sampling"))
    empty = sum(1 for p in prompts if p < page)
    return "\n".join(
        [
            "Result: beam search shares far more pages than parallel sampling",
            f"({beam6:.0f}% against {sample6:.0f}% at width 6).",
            "Samples share the prompt's full pages to the end, and its partial last page",
            "only until their first write: then each sample but one copies it",
            "(copy-on-write, notebook 04: a shared page is copied each time a sequence",
            "writes to it while another still shares it).",
            f"Here {empty} of these {len(prompts)} prompts fill no full page of {page} "
            f"(the longest, {max(prompts)}, fills {max(prompts) // page}).",
            "Beams also share the common beginnings of their outputs.",
        ]
    )


def clauses(head: str, parts: list[str], width: int = WIDTH) -> str:
    """`head` and its `parts` joined by ", ", a new indented line wherever the next part would
    pass `width`: lines break between facts, never inside a number."""
    lines = [f"{head} {parts[0]}"]
    for part in parts[1:]:
        if len(lines[-1]) + 1 + len(part) + 1 <= width:  # ", " after the last one: a comma
            lines[-1] += f", {part}"
        else:
            lines[-1] += ","
            lines.append(f"  {part}")
    return "\n".join(lines)


def settings_text(half: dict, big: dict, roomy: dict, outputs: list[int]) -> str:
    """The runs of section 3's try-it settings 2 to 5: `half` (pages of 256, 4,096 slots),
    `big` (256, 32,768), `roomy` (16, 32,768), and the 40 requests' output lengths; lines of
    at most WIDTH characters."""
    hit, looked = roomy["first_lookups"][1], roomy["first_lookups"][0]
    total, steps = sum(outputs), big["steps"]
    return "\n".join(
        [
            clauses(
                "setting 2, page 256, 4,096 slots:",
                [
                    f"mean running {half['mean_batch']:.1f}",
                    f"{half['preemptions']} preemptions",
                    f"prefix hits {half['prefix_hit_rate_pct']:.1f}%",
                ],
            ),
            clauses(
                "setting 3, page 256, 32,768 slots:",
                [
                    f"all {big['max_batch']} requests running by step {big['max_batch_step']}",
                    f"{big['preemptions']} preemptions",
                    f"prefix hits {big['prefix_hit_rate_pct']:.1f}%",
                ],
            ),
            clauses(
                "setting 4, page 16, 32,768 slots:",
                [
                    f"mean running {roomy['mean_batch']:.1f}",
                    f"{roomy['preemptions']} preemptions",
                    f"prefix hits {hit:,} of {looked:,} = {100 * hit / looked:.1f}%",
                ],
            ),
            clauses(
                "setting 5 (the page-256 run of setting 3): outputs:",
                [
                    f"mean {total / len(outputs):.0f} tokens",
                    f"longest {max(outputs):,}",
                    f"the run takes {steps:,} steps",
                ],
            ),
            f"setting 5: mean running = {total:,} output tokens / {steps:,} steps = {total / steps:.1f}",
        ]
    )


def bar_split(point: dict) -> tuple[int, int, int]:
    """One bar of section 4 split in three, in whole per cent of the paged step's time: the
    dense step (1 / the bar's ratio), the page copies alone (`gather_s / paged_s`), and the
    rest, 100 less the two, so the three add up to 100. Wall clock: they differ by run."""
    dense = round(100 / point["ratio"])
    copies = round(100 * point["gather_s"] / point["paged_s"])
    return dense, copies, 100 - dense - copies


def copy_share_text(data: dict, bar: tuple[int, int] = (8, 1024)) -> str:
    """Section 4's copy shares (`data`: `attention.run(...).data`): the bar B, L = `bar` split in
    three (`bar_split`), then the copies' share lowest to highest over all the points; wall
    clock, so it differs by run and machine."""
    points = data["points"]
    (point,) = [p for p in points if (p["batch"], p["context"]) == bar]
    dense, copies, rest = bar_split(point)
    name = f"bar B={bar[0]} L={bar[1]}, shares of its paged step's time (this run, wall clock):\n "
    parts = f"{name} the dense step {dense} % (1 ÷ the bar), the page copies alone {copies} %"
    if rest >= 0:
        split = f"{parts}, the rest {rest} %"
    else:  # the copies, timed alone, and dense add up to more than the paged step
        split = f"{parts}:\n  together over 100 %, so timing noise: run the cell again"
    shares = [round(100 * p["gather_s"] / p["paged_s"]) for p in points]
    return (
        f"{split}\n"
        f"the page copies at all {len(points)} points: {min(shares)} % to {max(shares)} % "
        "of the paged step's time\n(wall clock: this machine, this run)"
    )
