"""The serving run's memory shares in two windows, one small table each, and a run at one rate.

`bench serving` averages the K/V memory two ways (`pagedkv.labs.serving`): **under load**,
over the steps during which an arrived request waits to start (the paper's Fig. 2 bars), and
over the **whole run**, free memory included. Notebook 11 prints one table per window, with
plain column names, from a report's `data["systems"]` ({system: {str(rate): result}}), and
lets the reader serve the quick run's requests at a rate of their own (`shares_at`). Each
table's % columns are the run's five buckets, so a row adds up to 100. `littles_law` times
each request of `paged`'s run to show Little's law at work.

Leaves out: the latency columns (the report's notes print them) and the sustainable rates.
"""

from __future__ import annotations

from pagedkv.core.plumbing.validation import check_number
from pagedkv.labs.parallel import QUICK_WORKERS
from pagedkv.labs.serving import (
    FULL_RUN_RATES,
    FULL_RUN_REQUESTS,
    LATENCY_BOUND,
    PAPER,
    PAPER_RATE_RATIOS,
    PAPER_SLOTS,
    SYSTEMS,
    rate_ratio,
    serve_grid,
    sustainable_rate,
)
from pagedkv.labs.workloads import generate

QUICK_REQUESTS = 1000  # the requests of `bench serving --quick` (its QUICK_REQUESTS)
# requests/s `shares_at` accepts: below 0.5 every request runs alone for most of the run, and
# one system's run takes many seconds (one step per token of each request)
MIN_RATE, MAX_RATE = 0.5, 20.0

# the % columns of both tables are the run's five buckets (serving.CATEGORIES): each row adds up to 100
UNDER_LOAD_COLUMNS = [
    "system",
    "token %",
    "paper %",
    "reserved %",
    "internal %",
    "external %",
    "free %",
    "requests running",
]
WHOLE_RUN_COLUMNS = [
    "system",
    "token %",
    "reserved %",
    "internal %",
    "external %",
    "free %",
    "time requests wait %",
]


def _rows(systems: dict, rate: float, values) -> list[list[object]]:
    """One row per system: its name, then `values(at, system)`, `at` being its entry at `rate`."""
    return [[system, *values(systems[system][_key(rate)], system)] for system in SYSTEMS]


def under_load_rows(systems: dict, rate: float) -> list[list[object]]:
    """One row per system at `rate`, averaged over the steps while requests wait: % of slots
    holding tokens, the paper's Fig. 2 figure for it, % reserved for outputs not yet generated,
    % internal fragmentation, % external fragmentation, % free, and the mean number of
    requests running."""
    return _rows(
        systems,
        rate,
        lambda at, system: [
            round(at["token_states"], 1),
            PAPER[system],
            round(at["reserved"], 1),
            round(at["internal_fragmentation"], 1),
            round(at["external_fragmentation"], 1),
            round(at["free"], 1),
            round(at["mean_batch"], 1),
        ],
    )


def whole_run_rows(systems: dict, rate: float) -> list[list[object]]:
    """One row per system at `rate`, averaged over the whole run: % of slots holding tokens,
    % reserved, % internal and % external fragmentation, % free, and the % of the run's time
    during which requests wait."""
    return _rows(
        systems,
        rate,
        lambda at, system: [
            round(at["run_token_states"], 1),
            round(at["run_reserved"], 1),
            round(at["run_internal_fragmentation"], 1),
            round(at["run_external_fragmentation"], 1),
            round(at["run_free"], 1),
            round(100 * at["loaded_share"], 1),
        ],
    )


def shares_at(rate: float, seed: int = 0, requests: int = QUICK_REQUESTS) -> dict:
    """Serve the quick run's ShareGPT-like requests (`requests` of them, drawn with `seed`)
    arriving at `rate` per second (from MIN_RATE to MAX_RATE) with every system, in the
    paper's 15,728 slots (OPT-13B on an A100-40GB, cost model): {system: {str(rate): result}},
    the shape of a report's `data["systems"]`. The same seed gives the same numbers on every
    machine; the four systems run in QUICK_WORKERS processes, as `bench serving --quick` does."""
    if not MIN_RATE <= check_number("rate", rate, 0.0) <= MAX_RATE:
        raise ValueError(f"rate must be from {MIN_RATE:g} to {MAX_RATE:g} requests/s, got {rate!r}")
    options = {"num_slots": PAPER_SLOTS, "seed": seed}
    grid = serve_grid(generate("sharegpt", requests, seed), [float(rate)], options, QUICK_WORKERS)
    return {s: {_key(rate): grid[s][float(rate)]} for s in SYSTEMS}


def _key(rate: float) -> str:
    """The key of `rate` in a report's data: str of the float (2 -> "2.0")."""
    return str(float(rate))


def littles_law(run: dict, rate: float, requests: int = QUICK_REQUESTS) -> dict:
    """Little's law on a run of `requests` requests arriving at `rate` per second (`run`,
    `serve`'s result for it, e.g. a report's `data["systems"]["paged"]["2.0"]`), from the run's
    own clock: `time_in_system`, the mean seconds from a request's arrival to its finish;
    `in_flight`, rate x that time (the law); `tokens_each`, the mean tokens a request holds
    while in flight (the run's token-seconds / its requests' seconds); `slots`, in_flight x
    tokens_each; `share`, slots in % of the run's slots; and `token_share`, the run's measured
    % of slots holding tokens (`run_token_states`: over the steps' seconds, idle gaps left out)."""
    if not MIN_RATE <= check_number("rate", rate, 0.0) <= MAX_RATE:
        raise ValueError(f"rate must be from {MIN_RATE:g} to {MAX_RATE:g} requests/s, got {rate!r}")
    time_in_system = run["time_in_system"]
    token_seconds = run["run_token_states"] / 100 * PAPER_SLOTS * run["busy_seconds"]
    tokens_each = token_seconds / (time_in_system * check_number("requests", requests, 1))
    in_flight = rate * time_in_system
    return {
        "time_in_system": time_in_system,
        "in_flight": in_flight,
        "tokens_each": tokens_each,
        "slots": in_flight * tokens_each,
        "share": 100 * in_flight * tokens_each / PAPER_SLOTS,
        "token_share": run["run_token_states"],
    }


def serving_result(data: dict) -> dict:
    """From a serving report's `data`: `keeps_up` {system: sustainable rate}, `order` (the
    systems by that rate, lowest first: the order their lines cross the bound), `best` (the
    last), `ratios` {system: best's rate / its rate, as printed}, and `tokens` {system: % of
    slots holding tokens under load at the top rate}."""
    systems, rates = data["systems"], data["rates"]
    keeps_up = {
        s: sustainable_rate(rates, [systems[s][_key(r)]["normalized_latency"] for r in rates])
        for s in systems
    }
    order = sorted(systems, key=keeps_up.__getitem__)
    best = order[-1]
    return {
        "keeps_up": keeps_up,
        "order": order,
        "best": best,
        "ratios": {s: rate_ratio(keeps_up[best], keeps_up[s]) for s in systems},
        "tokens": {s: systems[s][_key(data["top_rate"])]["token_states"] for s in systems},
    }


def serving_result_text(data: dict, width: int = 80) -> str:
    """The lines notebook 11 prints inside its serving Result box (`serving_result` of `data`):
    the token shares at the top rate, the order the lines cross the bound, then the full run's
    rates and ratios beside the paper's and the quick run's (`paper_ratio_lines`), and why."""
    import textwrap

    r = serving_result(data)
    best, tokens, top = r["best"], r["tokens"], data["top_rate"]
    others = max(tokens[s] for s in tokens if s != best)
    lines = [
        f"at {top:g} requests/s tokens fill {tokens[best]:.0f} % of {best}'s slots,"
        f" at most {others:.0f} % of the others'",
        f"the lines cross the {LATENCY_BOUND:g} s/token bound in the order: " + ", ".join(r["order"]),
    ]
    lines += paper_ratio_lines(r["keeps_up"])
    lines.append(
        textwrap.fill(
            f"takeaway: {best} fills the largest share of its slots with tokens, so in the same"
            " memory it sustains the highest rate",
            width,
        )
    )
    return "\n".join(lines)


def bars_text(data: dict, width: int = 88) -> str:
    """What the serving figure's bars show under load, for notebook 11's Result box: the
    contiguous systems' fragmentation shares at the top rate, from a `bench serving` report's data."""
    import textwrap

    at = {s: data["systems"][s][str(data["top_rate"])] for s in ("max", "pow2", "oracle")}
    pow2, oracle = (at[s]["external_fragmentation"] for s in ("pow2", "oracle"))
    return textwrap.fill(
        "What the bars show: under load the three contiguous systems have no free slots, yet much"
        f" of their memory holds no token. max loses {at['max']['internal_fragmentation']:.1f} % to"
        " internal fragmentation: it reserves 2,048 slots for requests that end far shorter. pow2"
        f" and oracle lose {pow2:.1f} % and {oracle:.1f} % to external fragmentation: the buddy"
        " allocator's rounding, and holes too small for the next request.",
        width,
    )


def paper_ratio_lines(keeps_up: dict) -> list[str]:
    """First the full run (FULL_RUN_RATES, recorded): its sustainable rates and paged's rate over
    oracle's and max's beside the paper's ranges, the numbers to compare with the paper; then the
    quick run's (`keeps_up`, {system: rate}: the figure's), and in one line why its ratios are higher."""
    full = {s: rate_ratio(FULL_RUN_RATES["paged"], FULL_RUN_RATES[s]) for s in ("oracle", "max")}
    quick = {s: rate_ratio(keeps_up["paged"], keeps_up[s]) for s in ("oracle", "max")}
    full_rates = ", ".join(f"{s} {FULL_RUN_RATES[s]:.3f}" for s in ("max", "oracle", "paged"))
    quick_rates = ", ".join(f"{s} {keeps_up[s]:.3f}" for s in sorted(keeps_up, key=lambda s: keeps_up[s]))
    paper = {s: "{:g}-{:g}x".format(*PAPER_RATE_RATIOS[s]) for s in ("oracle", "max")}
    return [
        f"full run, {FULL_RUN_REQUESTS:,} requests (recorded): compare this with the paper",
        f"  sustainable rates {full_rates} requests/s",
        f"  paged's rate over oracle's {full['oracle']:.2f}x (paper: {paper['oracle']}),"
        f" over max's {full['max']:.2f}x (paper: {paper['max']})",
        f"quick run, {QUICK_REQUESTS:,} requests (the figure's run, also recorded): 0.5 to 4/s",
        f"  sustainable rates {quick_rates} requests/s",
        f"  paged's rate over oracle's {quick['oracle']:.2f}x, over max's {quick['max']:.2f}x",
        "  Both quick ratios are higher: a shorter trace gives queues less time to grow",
        "  (11b, section 6).",
    ]


def latency_text(notes: list[str], width: int = 95) -> str:
    """A serving report's latency table and sustainable-rate line (from its `notes`), without
    its ratio line (`serving_result_text` prints the ratios beside the paper's)."""
    import textwrap

    kept = [
        n
        for n in notes
        if n.startswith(("normalized latency", "  ", "sustainable rate")) and "(paper" not in n
    ]
    lines = [textwrap.fill(n, width, subsequent_indent="  ") for n in kept]
    head = f"the quick run ({QUICK_REQUESTS:,} requests):"
    return "\n".join([head, *lines])
