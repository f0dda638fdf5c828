"""pagedkv.labs.summary: notebook 11's summary, one fact per line, from made-up runs."""

from __future__ import annotations

from pagedkv.labs import costs
from pagedkv.labs.serving import rate_ratio
from pagedkv.labs.summary import summary_text


def run(hit: float, imbalance: float) -> dict:
    return {"hit_rate": hit, "imbalance": imbalance}


def serving_run(share: float, latencies: list[float]) -> dict:
    return {
        str(r): {"token_states": share, "external_fragmentation": share / 2, "normalized_latency": lat}
        for r, lat in zip((1.0, 2.0), latencies)
    }


def test_summary_prints_one_fact_per_line_from_the_runs():
    tiers = {"0": {"gpu_hit_rate": 0.25}, "64": {"host_hit_rate": 0.1}, "256": {"host_hit_rate": 0.125}}
    routing = {
        "round_robin": {2: run(0.4, 1.2), 4: run(0.3, 1.3)},
        "prefix_aware": {2: run(0.5, 1.5), 4: run(0.75, 2.0)},
    }
    # latency reaches 0.5 s/token at: max 1.0 (starts above), oracle 1.5, paged never (2.0)
    systems = {
        "max": serving_run(10.0, [0.6, 0.9]),
        "pow2": serving_run(20.0, [0.6, 0.9]),
        "oracle": serving_run(30.0, [0.3, 0.7]),
        "paged": serving_run(90.0, [0.1, 0.2]),
    }
    text = summary_text(tiers, routing, {"systems": systems, "rates": [1.0, 2.0], "top_rate": 2.0})
    lines = text.splitlines()
    slots = costs.capacity("Mistral-7B", "A100-40GB", 2048)["token_slots"]
    assert f"  token slots:                {slots:,}" in lines
    assert "  K/V per token:              128 KiB" in lines
    back = costs.preemption_costs("Mistral-7B", "A100-40GB", 1024)  # section 1.5's request
    ms = [f"{back[k] * 1e3:.0f} ms" for k in ("recompute_s", "swap_s", "reload_s")]
    assert f"  a request of 1,024 back:    recompute {ms[0]}, swap {ms[1]}, reload {ms[2]}" in lines
    assert "  pool hits, tier or not:     25.0 % of prompt tokens" in lines
    assert "  a host tier adds:           10.0 % with 64 pages, 12.5 % with 256" in lines
    assert "routing (section 3), N = 2 / 4 replicas" in lines
    assert "  prefix-aware hit rate:      50.0 / 75.0 %" in lines
    assert "  round-robin hit rate:       40.0 / 30.0 %" in lines
    assert "  prefix-aware imbalance:     1.50 / 2.00" in lines
    assert "  slots holding tokens:       10.0 / 20.0 / 30.0 / 90.0 %" in lines
    assert "  the paper's:                20.4 / 26.8 / 38.2 / 96.3 %" in lines
    assert "  external fragmentation:     5.0 / 10.0 / 15.0 % (max / pow2 / oracle)" in lines
    assert "  the paper's:                8.9 / 41.6 / 36.6 %" in lines
    assert "  sustains (requests/s):      1.000 / 1.000 / 1.500 / 2.000 (quick run)" in lines
    # the full run's recorded rates (docs/calibration.md, R1 and R2: 2.519 / 1.217 and / 0.707)
    assert "  paged's rate over oracle's: full run 2.07x (paper 1.7-2.7x); quick run 1.33x" in lines
    assert "  paged's rate over max's:    full run 3.56x (paper 2.7-8x); quick run 2.00x" in lines
    assert max(len(line) for line in lines) <= 95


def test_each_printed_ratio_is_the_quotient_of_the_printed_rates():
    # rates that round differently at 2 and 3 decimals: 3.53108 / 1.37485 is 2.5683, but
    # 3.53 / 1.37 would print 2.58
    assert rate_ratio(3.53108, 1.37485) == 3.531 / 1.375
    assert f"{rate_ratio(3.53108, 1.37485):.2f}" == "2.57"
    assert f"{rate_ratio(3.53108, 0.64701):.2f}" == f"{3.531 / 0.647:.2f}" == "5.46"
