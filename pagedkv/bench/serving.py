"""bench serving: the paper's serving run — Poisson arrivals, memory shares and latency vs rate.

The requests of `bench memory` arrive by a Poisson process instead of all at time 0 and are
served by contiguous reservations (`max`, `pow2`, `oracle`) and by pages, on the cost
model's clock (OPT-13B on an A100-40GB by default; `pagedkv.labs.serving`). For each rate of
`--rates` and each system it reports the normalized latency (seconds per output token, the
vLLM paper's metric: its Fig. 12 plots it against the request rate) and the KV memory in
the paper's Fig. 2 categories two ways:

- **under load**: averaged over the time requests wait (memory is the bottleneck), at the
  highest rate: the terms of `bench memory` and of the paper's bars;
- **all arrivals** at `--arrival-rate`: averaged over the whole run, free memory included
  (the paper's "external fragmentation & others").

Each system's sustainable rate (normalized latency below 0.5 s/token) is found by `crossing`:
from a start rate it steps by 10 % until two rates bracket the bound, then interpolates; the
ratios of vLLM's to Orca's are the paper's Sec. 6.2 figures. The default trace is 8,000
requests, about an hour of arrivals at vLLM's sustainable rate (the paper's traces are an hour
long): `--lengths 1000,2000,4000,8000 --seeds 0,1` prints how the rates drift with the length,
docs/calibration.md gives the numbers. The default run (8,000 requests, 11 rates, 4 systems and
the walk) takes several minutes; `--quick` serves 1,000 requests at 5 rates (0.5 to 4/s) and
skips the walk. `bench memory --arrival-rate R` prints this report.
"""

from __future__ import annotations

import argparse

from tqdm import tqdm

from pagedkv.bench import Report
from pagedkv.core.plumbing.validation import check_number
from pagedkv.labs.parallel import QUICK_WORKERS
from pagedkv.labs.serving import (  # sustainable_rate: notebook 11 reads it from here too
    LATENCY_BOUND,
    PAPER,
    PAPER_RATE_RATIOS,
    PAPER_SLOTS,
    RATE_DIGITS,
    SYSTEMS,
    rate_ratio,
    serve,
    serve_grid,
    sustainable_rate,
)
from pagedkv.labs.workloads import generate
from pagedkv.viz.serving_figure import serving_figure

# the table's floats: shares of KV slots (%) and the mean batch with one decimal
DIGITS = {"token %": 1, "external": 1, "mean batch": 1}
HELP = "serving run with Poisson arrivals: Fig. 2 memory shares and normalized latency vs rate"
RATES = "0.25,0.5,0.75,1,1.25,1.5,2,2.5,3,3.5,4"  # requests/s: below Orca (Max)'s limit to above vLLM's
QUICK_REQUESTS, QUICK_RATES = 1000, "0.5,1,2,3,4"  # `--quick`: a crossing for each system
REQUESTS = 8000  # trace length: docs/calibration.md's trace-length study ("How long the trace is")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--requests",
        type=int,
        default=REQUESTS,
        help="trace length (default 8,000: about an hour of arrivals at vLLM's sustainable rate, "
        "where the sustainable rates stop drifting; see docs/calibration.md)",
    )
    parser.add_argument("--workload", default="sharegpt", choices=["sharegpt", "alpaca"])
    parser.add_argument("--rates", default=RATES, help="requests/s, comma-separated")
    parser.add_argument("--arrival-rate", type=float, default=2.0, help="rate of the whole-run column")
    parser.add_argument(
        "--num-slots",
        type=int,
        default=PAPER_SLOTS,
        help="KV memory budget (slots; default the paper's OPT-13B)",
    )
    parser.add_argument("--page-size", type=int, default=16)
    parser.add_argument("--max-num-seqs", type=int, default=256)
    parser.add_argument("--model", default="OPT-13B", help="a name of pagedkv.labs.specs.MODELS")
    parser.add_argument("--gpu", default="A100-40GB", help="a name of pagedkv.labs.specs.GPUS")
    parser.add_argument(
        "--lengths",
        default=None,
        help="trace lengths, comma-separated: print each system's sustainable rate at each length "
        "and seed of --seeds instead (the trace-length study of docs/calibration.md)",
    )
    parser.add_argument("--seeds", default="0", help="seeds of the --lengths study, comma-separated")


def _rates(text: str) -> list[float]:
    try:
        rates = sorted(float(x) for x in str(text).split(","))
    except ValueError:
        raise ValueError(f"rates must be comma-separated numbers, got {text!r}") from None
    if rates[0] <= 0:
        raise ValueError(f"rates must all be > 0 (arrival_rate), got {text!r}")
    return rates


def run(
    *,
    quick: bool = False,
    seed: int = 0,
    requests: int = REQUESTS,
    workload: str = "sharegpt",
    rates: str = RATES,
    arrival_rate: float = 2.0,
    num_slots: int = PAPER_SLOTS,
    page_size: int = 16,
    max_num_seqs: int = 256,
    model: str = "OPT-13B",
    gpu: str = "A100-40GB",
    lengths: str | None = None,
    seeds: str = "0",
) -> Report:
    if check_number("arrival_rate", arrival_rate, 0.0) == 0:  # requests/s
        raise ValueError(f"arrival_rate must be a number > 0 (requests/s), got {arrival_rate!r}")
    options: dict = dict(
        num_slots=num_slots, page_size=page_size, max_num_seqs=max_num_seqs, model=model, gpu=gpu, seed=seed
    )
    if lengths is not None:
        return length_study(
            [int(n) for n in lengths.split(",")], [int(x) for x in seeds.split(",")], workload, options
        )
    if quick:  # every system crosses the bound (a shorter trace crosses it at higher rates)
        requests, rates = QUICK_REQUESTS, QUICK_RATES
    grid = sorted({*_rates(rates), *_rates(str(arrival_rate))})
    reqs = generate(workload, requests, seed)
    workers = QUICK_WORKERS if quick else 1
    data = serve_grid(reqs, grid, options, workers, memory_at={grid[-1], arrival_rate})  # as reported
    top = grid[-1]
    walked = {} if quick else {s: crossing(reqs, s, start, options) for s, start in STUDY_START.items()}
    return Report(
        title=(
            f"bench serving: {requests} {workload}-like requests, Poisson arrivals, "
            f"{num_slots:,} token slots, {model} on {gpu} (cost model); % of KV slots"
        ),
        columns=[
            "system",
            f"token % at {top:g}/s, under load",
            f"token % at {arrival_rate:g}/s, whole run",
            "token % in paper",  # no % sign: like the other columns (names ending in "%" get one)
            f"external % at {top:g}/s, under load",
            f"external+free % at {arrival_rate:g}/s, whole run",
            f"mean batch at {top:g}/s, under load",
        ],
        rows=[_row(system, data[system][top], data[system][arrival_rate]) for system in SYSTEMS],
        notes=_notes(data, grid, top, arrival_rate, walked),
        data={
            "rates": grid,
            "top_rate": top,
            "sustainable_rates": walked,
            "arrival_rate": arrival_rate,
            "systems": {s: {str(r): v for r, v in d.items()} for s, d in data.items()},
        },
        plotter=figure,
        digits=DIGITS,
    )


STUDY_START = {"max": 0.7, "oracle": 1.3, "paged": 3.0}  # requests/s where the walk starts


def crossing(requests: list, system: str, start: float, options: dict) -> float:
    """The rate at which `system`'s normalized latency on `requests` reaches LATENCY_BOUND:
    from `start`, step by 10 % of it (up while below the bound, down while above) until two
    neighbouring rates bracket the bound, then interpolate (`sustainable_rate`)."""
    step, seen = start / 10, {}

    def latency(rate: float) -> float:
        key = round(rate, 4)
        if key <= 0:
            raise ValueError(f"{system} is above the bound at every rate down to {step:g}/s")
        if key not in seen:
            run = serve(requests, system, arrival_rate=key, memory=False, **options)  # latency only
            seen[key] = run["normalized_latency"]
        return seen[key]

    rate, below = start, latency(start) < LATENCY_BOUND
    while (latency(rate) < LATENCY_BOUND) == below:
        rate += step if below else -step
        if rate > 10 * start:
            raise ValueError(f"{system} stays below the bound up to {10 * start:g}/s: a longer trace?")
    low, high = (rate - step, rate) if below else (rate, rate + step)
    return sustainable_rate([round(low, 4), round(high, 4)], [latency(low), latency(high)])


def quick_walk(system: str) -> dict:
    """The full run's walk for `system` (`crossing` from `STUDY_START`, steps of a tenth of it) on the
    quick run's 1,000 requests: its start and step (requests/s), the normalized latency at the start
    (s per output token) and the rate where it crosses the bound."""
    reqs, start = generate("sharegpt", QUICK_REQUESTS), STUDY_START[system]
    options: dict = dict(
        num_slots=PAPER_SLOTS, page_size=16, max_num_seqs=256, model="OPT-13B", gpu="A100-40GB", seed=0
    )
    at_start = serve(reqs, system, arrival_rate=start, memory=False, **options)["normalized_latency"]
    return {
        "start": start,
        "step": start / 10,
        "latency_at_start": at_start,
        "rate": crossing(reqs, system, start, options),
    }


def length_study(lengths: list[int], seeds: list[int], workload: str, options: dict) -> Report:
    """Each system's sustainable rate (and vLLM's ratios) at each trace length and seed, and how
    far the mean over seeds moves from one length to the next."""
    rows, means = [], {}
    for n in tqdm(lengths, desc="lengths", disable=None):
        for seed in seeds:
            trace = generate(workload, n, seed)
            got = {
                s: crossing(trace, s, start, {**options, "seed": seed}) for s, start in STUDY_START.items()
            }
            rows.append([n, seed, *(round(got[s], 3) for s in STUDY_START)])
            rows[-1] += [round(got["paged"] / got["oracle"], 2), round(got["paged"] / got["max"], 2)]
        means[n] = [sum(r[i] for r in rows[-len(seeds) :]) / len(seeds) for i in range(2, 5)]
    notes = [
        f"{a:,} -> {b:,} requests, mean over seeds: "
        + ", ".join(
            f"{s} {100 * (y / x - 1):+.1f} %" for s, x, y in zip(STUDY_START, means[a], means[b], strict=True)
        )
        for a, b in zip(lengths, lengths[1:], strict=False)
    ]
    return Report(
        title=f"bench serving --lengths: sustainable rate (latency < {LATENCY_BOUND:g} s/token), {workload}",
        columns=["requests", "seed", "max /s", "oracle /s", "paged /s", "paged/oracle", "paged/max"],
        rows=rows,
        notes=notes,
        data={"rows": rows, "means": {str(n): m for n, m in means.items()}},
    )


def _row(system: str, loaded: dict, whole: dict) -> list[object]:
    """A system's token and external shares under load (`loaded`) and over the whole run."""
    return [
        system,
        round(loaded["token_states"], 1),
        round(whole["run_token_states"], 1),
        PAPER[system],
        round(loaded["external_fragmentation"], 1),
        round(whole["run_external_fragmentation"] + whole["run_free"], 1),
        round(loaded["mean_batch"], 1),
    ]


def _notes(data: dict, grid: list[float], top: float, arrival_rate: float, walked: dict) -> list[str]:
    """The latency table by rate, the paper's figures, and how this run accounts for them."""
    latency_rows = [
        [rate, *(round(data[s][rate]["normalized_latency"], 3) for s in SYSTEMS)] for rate in grid
    ]
    sustained = {s: walked[s] if s in walked else _sustained(data, grid, s) for s in SYSTEMS}
    return [
        "normalized latency (s per output token) vs request rate (requests/s):",
        *("  " + line for line in _latency_table(latency_rows).splitlines()),
        *_sustained_lines(data, grid, sustained, set(walked)),
        "paper (Kwon et al. 2023, Fig. 2): 20.4 / 26.8 / 38.2 / 96.3 % hold token states "
        "(max / pow2 / oracle / vLLM); external fragmentation & others 8.9 / 41.6 / 36.6 / -",
        *_account(data, top, arrival_rate),
    ]


def _sustained(data: dict, grid: list[float], system: str) -> float:
    return sustainable_rate(grid, [data[system][rate]["normalized_latency"] for rate in grid])


def _sustained_lines(data: dict, grid: list[float], sustained: dict[str, float], walked: set[str]) -> list:
    """Each system's sustainable rate ("> top" where its latency never reached the bound) and,
    on a second line, the two ratios the paper states, when both rates were measured (ratios
    of the rates as printed, `rate_ratio`). Rates of `walked` systems come from `crossing`
    (10 % steps around the bound); the others interpolate the grid."""
    reached = {s: s in walked or data[s][grid[-1]]["normalized_latency"] >= LATENCY_BOUND for s in SYSTEMS}
    rates = ", ".join(f"{s} {'' if reached[s] else '> '}{sustained[s]:.{RATE_DIGITS}f}/s" for s in SYSTEMS)
    ratios = []
    for other, (low, high) in PAPER_RATE_RATIOS.items():
        if reached["paged"] and reached[other]:
            ratio = rate_ratio(sustained["paged"], sustained[other])
            ratios.append(f"paged / {other} {ratio:.2f}x (paper {low:g}-{high:g}x)")
        else:
            ratios.append(f"paged / {other} not measured (raise --rates until both cross the bound)")
    return [f"sustainable rate (< {LATENCY_BOUND:g} s/token): {rates}", "  " + "; ".join(ratios)]


def _account(data: dict, top: float, rate: float) -> list[str]:
    """Which systems land within 5 points of the paper, and where the rest of the gap is."""
    lines = []
    for label, key, at in (("under load", "token_states", top), ("all arrivals", "run_token_states", rate)):
        near = [s for s in SYSTEMS if abs(data[s][at][key] - PAPER[s]) <= 5]
        lines.append(f"within 5 points of the paper, {label} ({at:g}/s): {', '.join(near) or 'none'}")
    paged, oracle = data["paged"][rate]["run_token_states"], data["oracle"][rate]["run_token_states"]
    pow2_ext, oracle_ext = (data[s][top]["external_fragmentation"] for s in ("pow2", "oracle"))
    lines.append(
        f"at one rate every system that keeps up holds the same tokens (Little's law: {rate:g}/s gives "
        f"oracle {oracle:.1f} %, paged {paged:.1f} %), so the paper's bars cannot share one rate; under "
        "load the pow2/oracle gap is external fragmentation: "
        f"{pow2_ext:.1f} / {oracle_ext:.1f} % "
        "here vs 41.6 / 36.6 % 'external & others' in the paper"
    )
    return lines


def _latency_table(rows: list[list]) -> str:
    from pagedkv.bench import format_table

    return format_table(["rate", *SYSTEMS], rows, {"rate": 1})


def figure(report: Report):
    """The report's figure: latency against rate, and the slots under load (`serving_figure`)."""
    return serving_figure(report.data)
