"""Notebook 11's summary: the numbers of its runs, one fact per line.

`summary_text(tier_runs, routing, serving)` reads the data of three reports (`bench tiers`,
`bench routing`, `bench serving`) and the cost model's Mistral-7B on an A100-40GB, and prints
each number on a line of its own under a heading per question.
"""

from __future__ import annotations

from pagedkv.labs import costs
from pagedkv.labs.serving import (
    FULL_RUN_RATES,
    PAPER,
    PAPER_EXTERNAL,
    PAPER_RATE_RATIOS,
    RATE_DIGITS,
    SYSTEMS,
    rate_ratio,
    sustainable_rate,
)


def _joined(values: list[float], digits: int) -> str:
    """[54.31, 68.9] -> '54.3 / 68.9' (with digits=1)."""
    return " / ".join(f"{value:.{digits}f}" for value in values)


def summary_text(
    tier_runs: dict, routing: dict, serving: dict, tokens: int = 2048, back_tokens: int = 1024
) -> str:
    """The summary as lines of text. `tier_runs` is `bench tiers`' data["runs"] (keys "0",
    "64", "256": host pages), `routing` `bench routing`'s data ({router: {N: run}}, N = 2, 4,
    8) and `serving` `bench serving`'s data (systems, rates, top_rate). `tokens` is the
    request length of the requests that fit (section 1.1's table), `back_tokens` that of the
    request brought back (section 1.2's). paged's rate over oracle's and max's: the full
    run's (`serving.FULL_RUN_RATES`, recorded) beside the paper's, then the quick run's."""
    cap = costs.capacity("Mistral-7B", "A100-40GB", tokens)
    way = costs.preemption_costs("Mistral-7B", "A100-40GB", back_tokens)
    ms = {k: f"{way[f'{k}_s'] * 1e3:.0f} ms" for k in ("recompute", "swap", "reload")}
    ns = sorted(routing["prefix_aware"])
    imbalance = _joined([routing["prefix_aware"][n]["imbalance"] for n in ns], 2)
    hits = {r: _joined([100 * routing[r][n]["hit_rate"] for n in ns], 1) for r in routing}
    systems, top = serving["systems"], str(serving["top_rate"])
    shares = _joined([systems[s][top]["token_states"] for s in SYSTEMS], 1)
    frag = [s for s in SYSTEMS if s in PAPER_EXTERNAL]  # max, pow2, oracle
    external = _joined([systems[s][top]["external_fragmentation"] for s in frag], 1)
    rate = {
        s: sustainable_rate(
            serving["rates"], [systems[s][str(r)]["normalized_latency"] for r in serving["rates"]]
        )
        for s in SYSTEMS
    }
    host = {k: f"{100 * tier_runs[k]['host_hit_rate']:.1f} %" for k in ("64", "256")}
    paper = {s: f"{low:g}-{high:g}x" for s, (low, high) in PAPER_RATE_RATIOS.items()}
    full = {s: rate_ratio(FULL_RUN_RATES["paged"], FULL_RUN_RATES[s]) for s in paper}
    over = {
        s: f"full run {full[s]:.2f}x (paper {paper[s]}); quick run {rate_ratio(rate['paged'], rate[s]):.2f}x"
        for s in paper
    }
    return "\n".join(
        [
            "section 1: Mistral-7B on an A100-40GB",
            f"  K/V per token:              {costs.bytes_per_token('Mistral-7B') // 1024} KiB",
            f"  token slots:                {cap['token_slots']:,}",
            f"  requests of {tokens:,} that fit: {cap['requests']}",
            f"  {f'a request of {back_tokens:,} back:':28}"
            f"recompute {ms['recompute']}, swap {ms['swap']}, reload {ms['reload']}",
            "second tier (section 2; hit rates in tokens, the same for any model)",
            f"  pool hits, tier or not:     {100 * tier_runs['0']['gpu_hit_rate']:.1f} % of prompt tokens",
            f"  a host tier adds:           {host['64']} with 64 pages, {host['256']} with 256",
            f"routing (section 3), N = {' / '.join(map(str, ns))} replicas",
            f"  prefix-aware hit rate:      {hits['prefix_aware']} %",
            f"  round-robin hit rate:       {hits['round_robin']} %",
            f"  prefix-aware imbalance:     {imbalance}",
            f"serving (section 4), {' / '.join(SYSTEMS)}",
            f"  slots holding tokens:       {shares} %",
            f"  the paper's:                {_joined([PAPER[s] for s in SYSTEMS], 1)} %",
            f"  external fragmentation:     {external} % ({' / '.join(frag)})",
            f"  the paper's:                {_joined([PAPER_EXTERNAL[s] for s in frag], 1)} %",
            f"  sustains (requests/s):      {_joined([rate[s] for s in SYSTEMS], RATE_DIGITS)} (quick run)",
            f"  paged's rate over oracle's: {over['oracle']}",
            f"  paged's rate over max's:    {over['max']}",
        ]
    )
