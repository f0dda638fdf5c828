"""docs/calibration.md, row by row: each published number pagedkv reproduces, within the
tolerance the doc states (±5 % for capacities and step times, ±5 points for Fig. 2 bars and
sharing savings, the paper's ranges for the ratios of sustainable rates).

A row the doc marks *outside* its tolerance carries an `xfail(strict=True)` marker: the test
asserts the tolerance, so it xfails while the row is outside and fails (XPASS, strict) when
the row moves inside; the doc and this file cannot drift apart silently. The published values
are typed in from their sources (the doc names each), never taken from pagedkv's own output.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from pagedkv.bench import serving as bench_serving
from pagedkv.bench import sharing as bench_sharing
from pagedkv.labs import costs, serving
from pagedkv.labs.workloads import generate

DOC = Path(__file__).resolve().parent.parent / "docs" / "calibration.md"
GIB = 2**30
OUTSIDE = pytest.mark.xfail(strict=True, reason="outside its tolerance: docs/calibration.md says why")


@dataclass(frozen=True)
class Row:
    key: str  # the row's label in docs/calibration.md's first column
    published: float | tuple[float, float]  # a value, or a range the paper states
    tolerance: str  # "5%" (relative), "5pt" (absolute points) or "range" (inside published)
    inside: bool  # what the doc claims
    value: Callable[[], float]


def _kv_gib(util: float) -> float:
    cap = costs.capacity("OPT-13B", "A100-40GB", 2048, costs.Assumptions.vllm_2023(util))
    return cap["kv_budget_bytes"] / GIB


def _ratio(block: int) -> float:
    way = costs.preemption_costs("OPT-13B", "A100-40GB", 1024, costs.Assumptions.vllm_2023(page_size=block))
    return way["recompute_s"] / way["swap_s"]


def _linear_ms(tokens: int) -> float:
    return costs.step_terms("Llama-3-8B", "A100-40GB", tokens, 0)["linear"] * 1e3


# vllm-project/vllm#12330: Meta-Llama-3-8B on one A100 40GB, gpu_memory_utilization 0.90,
# max_model_len 8192 (V0 engine, January 2025): "# GPU blocks: 5691" of 16 tokens. V0 captures
# CUDA graphs after it has sized the KV cache, so there is no CUDA-graph term.
def _llama3_blocks(logged_terms: bool) -> float:
    if not logged_terms:  # pagedkv's own estimate of every term
        assume = costs.Assumptions(0.9, 8192, cuda_graph_gib=0.0)
        return costs.capacity("Llama-3-8B", "A100-40GB", 8192, assume)["num_pages"]
    # the log's device memory (39.50 GiB), non-torch memory (0.10) and activation peak (9.37);
    # the weights and the bytes per token are pagedkv's own
    gpu = dataclasses.replace(costs.gpu_spec("A100-40GB"), reported_gib=39.50)
    assume = costs.Assumptions(0.9, 8192, non_torch_gib=0.10, cuda_graph_gib=0.0, activation_gib=9.37)
    return costs.capacity("Llama-3-8B", gpu, 8192, assume)["num_pages"]


# vllm-project/vllm#10511 (December 2024, V0): `vllm serve meta-llama/Meta-Llama-3-8B` on an
# H100 80GB with the defaults (0.9, max_model_len 8192, 256 sequences) logs "PyTorch activation
# peak memory 1.26GiB" and "available_kv_cache_memory 53.29GiB" (no CUDA-graph term in V0).
def _llama3_h100(term: str) -> float:
    assume = costs.Assumptions(0.9, 8192, cuda_graph_gib=0.0)
    if term == "activation":
        return costs.activation_bytes("Llama-3-8B", assume) / GIB
    return costs.capacity("Llama-3-8B", "H100-80GB", 8192, assume)["kv_budget_bytes"] / GIB


FAST = [
    Row("C1", 800, "5%", True, lambda: costs.bytes_per_token("OPT-13B") / 1024),
    Row("C2", 15_700, "5%", True, lambda: costs.paper_slots()),
    Row("C3", 12, "5%", False, lambda: _kv_gib(0.95)),
    Row("C4", 10, "5%", False, lambda: _kv_gib(0.9)),
    Row("L1", 5691, "5%", False, lambda: _llama3_blocks(logged_terms=False)),
    Row("L2", 5691, "5%", True, lambda: _llama3_blocks(logged_terms=True)),
    Row("L3", 53.29, "5%", True, lambda: _llama3_h100("kv")),
    Row("A1", 1.26, "5%", False, lambda: _llama3_h100("activation")),
    Row("S1", 153, "5%", True, lambda: _linear_ms(2048)),
    Row("S2", 77, "5%", True, lambda: _linear_ms(1024)),
    Row("F1", (0, 1), "range", True, lambda: max(_ratio(b) for b in (1, 2, 4, 8))),
    Row("F2", (0, 1.2), "range", False, lambda: max(_ratio(b) for b in (16, 32, 64, 128, 256))),
]


def within(row: Row, value: float) -> bool:
    if row.tolerance == "range":
        low, high = row.published  # type: ignore[misc]
        return low <= value <= high
    published = float(row.published)  # type: ignore[arg-type]
    if row.tolerance == "5%":
        return abs(value - published) <= 0.05 * published
    return abs(value - published) <= 5


@pytest.mark.parametrize("row", [pytest.param(r, id=r.key, marks=() if r.inside else OUTSIDE) for r in FAST])
def test_fast_rows(row):
    value = row.value()
    assert within(row, value), f"{row.key}: {value} vs published {row.published}"


# ---- the paper's sharing savings (Sec. 6.3): ranges over n, k = 2 to 6 ----------------------

SHARING = {  # (workload, mode) -> (row key, published low, published high, doc claims inside)
    ("alpaca", "parallel sampling"): ("P1", 6.1, 9.8, True),
    ("alpaca", "beam search"): ("P2", 37.6, 55.2, False),
    ("sharegpt", "parallel sampling"): ("P3", 16.2, 30.5, True),
    ("sharegpt", "beam search"): ("P4", 44.3, 66.3, False),
}
SHARING_REQUESTS = 60  # the doc's rows come from `bench sharing` (300 requests): same verdicts


@pytest.fixture(scope="module")
def savings() -> dict[str, dict[str, list[float]]]:
    """workload -> mode -> the savings (%) at n, k = 2, 4, 6."""
    out = {}
    for workload in ("alpaca", "sharegpt"):
        report = bench_sharing.run(requests=SHARING_REQUESTS, workload=workload)
        out[workload] = {mode: [d["saving_pct"] for d in w.values()] for mode, w in report.data.items()}
    return out


@pytest.mark.slow
@pytest.mark.parametrize(
    ("workload", "mode"),
    [pytest.param(w, m, id=v[0], marks=() if v[3] else OUTSIDE) for (w, m), v in SHARING.items()],
)
def test_sharing_savings(savings, workload, mode):
    key, low, high, _ = SHARING[workload, mode]
    got = savings[workload][mode]
    assert abs(min(got) - low) <= 5 and abs(max(got) - high) <= 5, f"{key}: {min(got):.1f}-{max(got):.1f}"


# ---- the serving run: Fig. 2 bars and sustainable rates (Sec. 6.2) --------------------------
# Both run the bench's trace (`bench serving`, 8,000 requests, seed 0): docs/calibration.md's
# trace-length study shows that shorter traces give other verdicts (E3 is outside at 2,000
# requests and inside at 8,000; vLLM's sustainable rate falls 14 % from 2,000 to 4,000), so
# these are long runs, marked slow.

SERVING_REQUESTS = bench_serving.REQUESTS  # 8,000
FIG2 = {"max": 20.4, "pow2": 26.8, "oracle": 38.2, "paged": 96.3}  # % of KV holding token states
FIG2_EXTERNAL = {"max": (8.9, "E1", True), "pow2": (41.6, "E2", True), "oracle": (36.6, "E3", True)}
RATIOS = {"oracle": ("R1", 1.7, 2.7), "max": ("R2", 2.7, 8.0)}  # the paper's Sec. 6.2


@pytest.fixture(scope="module")
def trace():
    return generate("sharegpt", SERVING_REQUESTS, 0)


@pytest.fixture(scope="module")
def under_load(trace):
    return {system: serving.serve(trace, system, arrival_rate=4.0) for system in FIG2}


@pytest.mark.slow
def test_fig2_bars(under_load):
    for system, published in FIG2.items():  # row B1
        share = under_load[system]["token_states"]
        assert abs(share - published) <= 5, f"{system}: {share:.1f} % vs {published} %"


@pytest.mark.slow
@pytest.mark.parametrize(
    "system", [pytest.param(s, id=v[1], marks=() if v[2] else OUTSIDE) for s, v in FIG2_EXTERNAL.items()]
)
def test_fig2_external_fragmentation(under_load, system):
    published = FIG2_EXTERNAL[system][0]
    assert abs(under_load[system]["external_fragmentation"] - published) <= 5


@pytest.fixture(scope="module")
def rates(trace) -> dict[str, float]:
    """Each system's sustainable rate as `bench serving` finds it (`crossing`, seed 0)."""
    return {
        s: bench_serving.crossing(trace, s, start, {"seed": 0})
        for s, start in bench_serving.STUDY_START.items()
    }


@pytest.mark.slow
@pytest.mark.parametrize("other", [pytest.param(o, id=v[0]) for o, v in RATIOS.items()])
def test_sustainable_rate_ratios(rates, other):
    _, low, high = RATIOS[other]
    assert low <= rates["paged"] / rates[other] <= high


@pytest.mark.slow
def test_the_recorded_full_run_rates_are_the_runs(rates):
    # notebook 11 quotes serving.FULL_RUN_RATES (recorded) beside the paper's ranges
    assert {s: round(rates[s], 3) for s in serving.FULL_RUN_RATES} == serving.FULL_RUN_RATES
    assert serving.FULL_RUN_REQUESTS == SERVING_REQUESTS


def test_the_doc_lists_every_row_with_its_status():
    text = DOC.read_text()
    serving_rows = {"B1": True, "R1": True, "R2": True} | {
        k: inside for _, k, inside in FIG2_EXTERNAL.values()
    }
    rows = {r.key: r.inside for r in FAST} | {v[0]: v[3] for v in SHARING.values()} | serving_rows
    for key, inside in rows.items():
        line = re.search(rf"^\| {key} \|.*$", text, re.M)
        assert line, f"row {key} missing from docs/calibration.md"
        status = line.group(0).rstrip(" |").rsplit("|", 1)[-1]
        assert ("outside" in status) != inside, f"row {key}: the doc's status column disagrees with this file"


def test_quick_walk_is_the_full_runs_grid_on_the_quick_requests():
    # notebook 11b, section 6: max on the quick requests, at the full run's start rate and one step up
    walk = bench_serving.quick_walk("max")
    reqs = generate("sharegpt", bench_serving.QUICK_REQUESTS)
    options = dict(num_slots=bench_serving.PAPER_SLOTS, page_size=16, max_num_seqs=256, seed=0)
    low, high = (
        serving.serve(reqs, "max", arrival_rate=r, memory=False, **options)["normalized_latency"]
        for r in (0.7, 0.77)
    )
    assert (walk["start"], round(walk["step"], 4)) == (0.7, 0.07) and walk["latency_at_start"] == low
    assert low < 0.5 <= high  # the bound is bracketed by the first step
    assert walk["rate"] == pytest.approx(0.7 + 0.07 * (0.5 - low) / (high - low))
