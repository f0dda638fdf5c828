"""bench routing: prefix hit rate and load imbalance across N replicas, per router.

The same requests — Alpaca-like instructions after one of `--num-prompts` Zipf-popular
system prompts of `--prompt-length` tokens (`pagedkv.labs.experiments.popular_system_prompts`),
arriving by a Poisson process of `--arrival-rate` requests per step per replica — are
served by N = 2, 4, 8 replicas of `--num-pages` pages each, routed round-robin, to the
least loaded replica, or prefix-aware (SGLang router's `cache_aware`; `pagedkv.labs.routing`).
Reported: the share of prompt tokens served from a replica's prefix cache (all replicas
together), the load imbalance (the busiest replica's requests in flight, summed over the
steps while requests arrive, over the same sum of the mean; 1.0 = even), requests per
replica, recompute preemptions and how many requests prefix-aware routing's safety valve
sent to the least loaded replica.
"""

from __future__ import annotations

import argparse

from pagedkv.bench import Report
from pagedkv.labs.experiments import popular_system_prompts
from pagedkv.labs.parallel import QUICK_WORKERS, run_all
from pagedkv.labs.routing import ROUTERS, RouterConfig, replica_counts, simulate

DIGITS = {"imbalance": 2}  # the table's floats: the imbalance with two decimals
HELP = "prefix hit rate and load imbalance over N replicas: round-robin, least-loaded, prefix-aware"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--replicas", default="2,4,8", help="comma-separated replica counts")
    parser.add_argument("--routers", default=",".join(ROUTERS), help="comma-separated")
    parser.add_argument("--num-pages", type=int, default=128, help="pages per replica")
    parser.add_argument("--page-size", type=int, default=16)
    parser.add_argument("--max-num-seqs", type=int, default=16)
    parser.add_argument("--arrival-rate", type=float, default=0.15, help="requests per step per replica")
    parser.add_argument("--num-prompts", type=int, default=32, help="distinct system prompts")
    parser.add_argument("--prompt-length", type=int, default=256, help="tokens per system prompt")
    parser.add_argument("--balance-abs-threshold", type=int, default=32)
    parser.add_argument("--cache-threshold", type=float, default=0.5)
    parser.add_argument("--balance-rel-threshold", type=float, default=1.0001)


def _ints(name: str, text: str) -> list[int]:
    try:
        return [int(x) for x in str(text).split(",")]
    except ValueError:
        raise ValueError(f"{name} must be comma-separated ints, got {text!r}") from None


def run(
    *,
    quick: bool = False,
    seed: int = 0,
    requests: int = 600,
    replicas: str = "2,4,8",
    routers: str = ",".join(ROUTERS),
    num_pages: int = 128,
    page_size: int = 16,
    max_num_seqs: int = 16,
    arrival_rate: float = 0.15,
    num_prompts: int = 32,
    prompt_length: int = 256,
    balance_abs_threshold: int = 32,
    cache_threshold: float = 0.5,
    balance_rel_threshold: float = 1.0001,
) -> Report:
    if quick:
        requests = 200
    counts = _ints("replicas", replicas)
    names = str(routers).split(",")
    configs = [RouterConfig(r, cache_threshold, balance_abs_threshold, balance_rel_threshold) for r in names]
    workload = popular_system_prompts(requests, num_prompts, prompt_length, seed)
    options = dict(num_pages=num_pages, page_size=page_size, max_num_seqs=max_num_seqs, seed=seed)
    jobs = [(n, config, arrival_rate * n) for n in counts for config in configs]
    workers = QUICK_WORKERS if quick else 1
    results = run_all(_simulate_job, jobs, (workload, options), workers, desc="routing")
    rows: list[list] = []
    data: dict[str, dict[int, dict]] = {}
    for (n, config, _), out in zip(jobs, results):
        data.setdefault(config.router, {})[n] = out
        rows.append(_row(n, config.router, out))
    return Report(
        title=(
            f"bench routing: {requests} requests after {num_prompts} Zipf-popular system prompts "
            f"of {prompt_length} tokens;\n  {num_pages} pages x {page_size} per replica; "
            f"{arrival_rate} requests/step/replica"
        ),
        columns=[
            "replicas",
            "router",
            "prefix hit %",
            "imbalance",
            "requests per replica",
            "preempted",
            "valve",
        ],
        rows=rows,
        notes=[
            "prefix hit %: prompt tokens served from a replica's cache, all replicas together",
            "imbalance = the busiest replica's load ÷ the mean load, each added up over the steps\n"
            "  while requests arrive.",
            "  A replica's load is its requests in flight; 1.0 means even.",
            "preempted: times a request went back to the queue when a replica's pages ran out",
            "valve: requests prefix-aware routing sent to the least loaded replica, not by cache",
        ],
        data=data,
        plotter=figure,
        digits=DIGITS,
    )


def prompts_seen(router: str, num_replicas: int, *, quick: bool = True) -> list[int]:
    """How many distinct system prompts each replica was sent in `run(quick=quick)`'s run of
    `router` over `num_replicas` replicas (run's defaults; the same run, request for request)."""
    return per_replica(router, num_replicas, quick=quick)["prompts"]


def per_replica(router: str, num_replicas: int, *, quick: bool = True) -> dict[str, list[int]]:
    """Per replica, in `run(quick=quick)`'s run of `router` over `num_replicas` replicas (the
    same run, request for request): requests sent (`routed`), distinct system prompts among
    them (`prompts`) and preemptions (`preempted`)."""
    requests, num_prompts, prompt_length, rate = (200 if quick else 600), 32, 256, 0.15
    workload = popular_system_prompts(requests, num_prompts, prompt_length, 0)
    options = dict(num_pages=128, page_size=16, max_num_seqs=16, seed=0)
    config = RouterConfig(router, 0.5, 32)
    return replica_counts(
        workload, num_replicas, prompt_length, config=config, arrival_rate=rate * num_replicas, **options
    )


def per_replica_text(num_replicas: int, *, quick: bool = True) -> str:
    """One line per router: each replica's requests sent, distinct system prompts, preemptions."""
    lines = [f"{num_replicas} replicas, per replica: requests sent / distinct system prompts / preempted"]
    for router in ROUTERS:
        c = per_replica(router, num_replicas, quick=quick)
        cells = "  ".join(f"{a}/{b}/{p}" for a, b, p in zip(c["routed"], c["prompts"], c["preempted"]))
        lines.append(f"  {router:<13} {cells}")
    return "\n".join(lines)


def _simulate_job(job: tuple, workload: list, options: dict) -> dict:
    num_replicas, config, rate = job
    return simulate(workload, num_replicas, config, arrival_rate=rate, **options)


def _row(replicas: int, router: str, out: dict) -> list[object]:
    hit_percent, imbalance = round(100 * out["hit_rate"], 1), round(out["imbalance"], 2)
    valve = out["by_valve"] if router == "prefix_aware" else "-"
    return [
        replicas,
        router,
        hit_percent,
        imbalance,
        " ".join(map(str, out["routed"])),
        out["preemptions"],
        valve,
    ]


def figure(report: Report):
    """Two panels against N: total prefix hit rate and load imbalance, one line per router."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    wider = ConstrainedLayoutEngine(wspace=0.08)  # the right panel's y-label clear of the left panel
    fig = Figure(figsize=(8.5, 3.5), dpi=100, layout=wider)  # 850 x 350 px: fits a 720-px screen
    FigureCanvasAgg(fig)
    hit, imb = fig.subplots(1, 2)
    for router, by_n in report.data.items():
        ns = sorted(by_n)
        hit.plot(ns, [100 * by_n[n]["hit_rate"] for n in ns], marker="o", label=router)
        imb.plot(ns, [by_n[n]["imbalance"] for n in ns], marker="o", label=router)
    for ax, label in ((hit, "prefix hit rate\n(% of prompt tokens)"), (imb, "load imbalance (max / mean)")):
        ax.set_xlabel("replicas N", fontsize=12)
        ax.set_ylabel(label, fontsize=12)
        ax.set_xscale("log", base=2)
        ax.set_xticks(
            sorted({n for d in report.data.values() for n in d}),
            labels=[str(n) for n in sorted({n for d in report.data.values() for n in d})],
        )
        ax.tick_params(labelsize=14)  # >= 12 px at 850 px
        ax.grid(alpha=0.3)
    hit.set_ylim(0, 100)
    imb.axhline(1, color="grey", lw=0.8)
    top = max(by_n[n]["imbalance"] for by_n in report.data.values() for n in by_n)
    imb.set_ylim(0.6, top + 0.3)  # under the line at 1, room for its label clear of the x-axis
    imb.annotate(
        "1 = perfectly even",
        (0.1, 1),
        xycoords=("axes fraction", "data"),
        xytext=(0, -6),
        textcoords="offset points",
        ha="left",
        va="top",
        color="#555555",
        fontsize=12,
    )
    fig.suptitle("Routing across replicas: cache affinity vs load balance", fontsize=13)
    handles, labels = hit.get_legend_handles_labels()  # both panels draw the routers alike
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=12, frameon=False)
    return fig
