"""bench memory: where KV memory goes, contiguous reservations vs pages (the paper's Fig. 2).

The same requests (ShareGPT-like and Alpaca-like, all queued at once) are served FCFS with
continuous batching from the same memory budget of `--num-slots` token slots, by:

- `ContiguousKVCache` with the `max`, `pow2` and `oracle` reservation policies (Orca-style
  systems: admit while a contiguous range fits, free when the request finishes);
- the paged pool through the `Scheduler` in bookkeeping-only mode (pages of `--page-size`
  allocated on demand, recompute preemption when the pool runs out).

After every step in which requests are still waiting (the system is under load), every slot
is counted in the vLLM paper's categories: token states, reserved (for tokens not yet
generated), internal fragmentation (reserved beyond the final length, or the unfilled tail
of a sequence's last page), external fragmentation (free slots in holes too small for the
next request), free. The report averages them over those steps, with the batch size each
system reaches. The default budget, offline and with `--arrival-rate` alike, is the paper's
OPT-13B on one 40 GB A100 (Table 1: 12 GB of KV at 800 KB per token, "15.7K" slots), as
`costs.paper_slots` computes it in whole pages: 15,728 slots of a 2,048-token model.
"""

from __future__ import annotations

import argparse
from collections import deque

import numpy as np
from tqdm import tqdm

from pagedkv.bench import Report
from pagedkv.labs.contiguous import ContiguousKVCache, NoContiguousHoleError
from pagedkv.labs.serving import CATEGORIES, PAPER_SLOTS, paged_categories, paged_scheduler
from pagedkv.labs.workloads import Request, generate

HELP = "share of KV memory holding token states: contiguous (max, pow2, oracle) vs paged"
PAPER = {"max": 20.4, "pow2": 26.8, "oracle": 38.2, "paged": 96.3}  # % holding token states
SYSTEMS = ("max", "pow2", "oracle", "paged")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--requests",
        type=int,
        default=None,
        help="requests per workload (default 1,000; with --arrival-rate, bench serving's 8,000)",
    )
    parser.add_argument(
        "--num-slots",
        type=int,
        default=PAPER_SLOTS,
        help="KV memory budget (slots; default the paper's OPT-13B, 15,728 = costs.paper_slots())",
    )
    parser.add_argument("--max-seq-len", type=int, default=2048)
    parser.add_argument("--page-size", type=int, default=16)
    parser.add_argument("--max-num-seqs", type=int, default=256)
    parser.add_argument("--workloads", default="sharegpt,alpaca", help="comma-separated")
    parser.add_argument(
        "--arrival-rate",
        type=float,
        default=None,
        help="requests/s: a serving run with Poisson arrivals instead (bench serving)",
    )


def simulate_contiguous(
    requests: list[Request],
    num_slots: int,
    policy: str,
    max_seq_len: int,
    max_num_seqs: int,
    allocator: str = "first_fit",
    pow2_of: str = "sequence",
) -> dict:
    """Serve the requests from one ContiguousKVCache; average the categories under load.
    `allocator` and `pow2_of` go to ContiguousKVCache: the defaults are this benchmark's,
    ("buddy", "output") are the paper's Orca baselines."""
    arena = ContiguousKVCache(num_slots, policy, max_seq_len, allocator=allocator, pow2_of=pow2_of)
    waiting = deque(requests)
    running: list[tuple[Request, int]] = []  # (request, tokens held)
    totals, batches, steps = dict.fromkeys(CATEGORIES, 0), [], 0
    while waiting or running:
        while waiting and len(running) < max_num_seqs:
            r = waiting[0]
            try:
                arena.add(r.req_id, r.prompt_len, r.final_len)
            except NoContiguousHoleError:
                break
            running.append((waiting.popleft(), r.prompt_len))
        if waiting:
            acc = arena.accounting(waiting[0].final_len).as_dict()
            for name in CATEGORIES:
                totals[name] += acc[name]
            batches.append(len(running))
        steps += 1
        still = []
        for request, held in running:  # one decode step: finish, or hold one more token
            if held == request.final_len:
                arena.free(request.req_id)
            else:
                arena.append(request.req_id)
                still.append((request, held + 1))
        running = still
    return _summary(totals, batches, steps, num_slots)


def simulate_paged(
    requests: list[Request], num_slots: int, page_size: int, max_num_seqs: int, max_seq_len: int
) -> dict:
    """Serve the requests from a paged pool via the Scheduler (bookkeeping only). The token
    budget is the whole memory, so, like the contiguous arenas, a step admits every request
    that fits; ramp-up takes one step. `steps` includes the steps that recompute preempted
    requests' K/V (`recomputed_tokens` counts those tokens). `queued_steps`: per step in which
    a request waits, (batch, slots holding K/V, tokens recomputed in it)."""
    sched = paged_scheduler(num_slots, page_size, max_num_seqs, max_seq_len)
    sched.add_requests(requests)
    totals, batches, steps = dict.fromkeys(CATEGORIES, 0), [], 0
    preempted: set = set()  # the requests preempted at least once
    in_window = 0  # tokens recomputed in the steps the shares average (a request still waits)
    blocked = 0  # of those steps: the queue's first request needed more pages than were FREE
    records = []  # (batch, token-state slots, tokens recomputed) per such step
    while sched.has_unfinished:
        output = sched.schedule()
        free = sched.pool.num_available_pages  # what the step's admissions left
        out = sched.update_from_output(output, sched.runner.execute(output))
        preempted.update(req_id for req_id, _ in out.preempted)
        steps += 1
        if sched.waiting:
            blocked += -(-sched.waiting[0].num_tokens // page_size) > free
            in_window += out.recomputed_tokens
            kinds = paged_categories(sched)
            for name, slots in kinds.items():
                totals[name] += slots
            batches.append(len(sched.running))
            records.append((len(sched.running), kinds["token_states"], out.recomputed_tokens))
    summary = _summary(totals, batches, steps, sched.pool.config.num_slots)
    summary["preemptions"] = sched.stats.preemptions
    summary["preempted_requests"] = len(preempted)
    summary["recomputed_tokens"] = sched.stats.recomputed_tokens  # K/V computed again on resume
    summary["recomputed_while_queued"] = in_window
    summary["head_blocked_steps"] = blocked  # why paging's free share stays free
    summary["queued_steps"] = records
    return summary


def _summary(totals: dict, batches: list[int], steps: int, num_slots: int) -> dict:
    samples = max(1, len(batches))
    out = {name: 100.0 * totals[name] / (samples * num_slots) for name in CATEGORIES}
    out.update(
        mean_batch=float(np.mean(batches)) if batches else 0.0,
        max_batch=max(batches, default=0),
        loaded_steps=len(batches),
        steps=steps,
        preemptions=0,
    )
    return out


def _notes(data: dict) -> list[str]:
    """The paper's figures, how this run differs, and its own figures per workload."""
    notes = [
        "paper (Kwon et al. 2023, Fig. 2): 20.4 / 26.8 / 38.2 / 96.3 % of KV memory holds "
        "token states for max / pow2 / oracle / vLLM",
        "differences: here every request is queued at once and ranges are placed first fit; "
        "the paper placed them with a buddy allocator, whose rounding lowers its pow2 and "
        "oracle shares (notebook 06 shows the buddy run), and averaged a serving run",
    ]
    for workload, d in data.items():
        notes.append(
            f"{workload} here: "
            + " / ".join(f"{d[s]['token_states']:.1f}" for s in SYSTEMS)
            + f" %; mean batch {d['paged']['mean_batch']:.1f} paged vs "
            f"{d['max']['mean_batch']:.1f} max, {d['oracle']['mean_batch']:.1f} oracle"
        )
    return notes


def run(
    *,
    quick: bool = False,
    seed: int = 0,
    requests: int | None = None,
    num_slots: int = PAPER_SLOTS,
    max_seq_len: int = 2048,
    page_size: int = 16,
    max_num_seqs: int = 256,
    workloads: str = "sharegpt,alpaca",
    arrival_rate: float | None = None,
) -> Report:
    if arrival_rate is not None:  # requests arrive over time: the serving run
        from pagedkv.bench import serving

        return serving.run(
            quick=quick,
            seed=seed,
            arrival_rate=arrival_rate,
            requests=serving.REQUESTS if requests is None else requests,
            workload=workloads.split(",")[0],
            num_slots=num_slots,
            page_size=page_size,
            max_num_seqs=max_num_seqs,
        )
    requests = 300 if quick else 1000 if requests is None else requests
    if max_seq_len > num_slots or num_slots % page_size:
        raise SystemExit("need max_seq_len <= num_slots and num_slots a multiple of page_size")
    names = workloads.split(",")
    if any(w not in ("sharegpt", "alpaca") for w in names):
        raise SystemExit(f"--workloads must name sharegpt and/or alpaca, got {workloads}")
    data = _measure(names, requests, seed, num_slots, max_seq_len, page_size, max_num_seqs)
    return Report(
        plotter=figure,
        title=(
            f"bench memory: {requests} requests per workload, {num_slots:,} token slots, "
            f"max_seq_len {max_seq_len}, max_num_seqs {max_num_seqs}; % of slots, "
            "averaged over steps with requests waiting"
        ),
        columns=[
            "workload",
            "system",
            "token %",
            "reserved %",
            "internal %",
            "external %",
            "free %",
            "mean batch",
            "steps",
            "paper (sharegpt) token %",
        ],
        rows=_rows(data, page_size),
        digits={"mean batch": 1},
        notes=_notes(data),
        data=data,
    )


def _measure(
    names: list[str],
    requests: int,
    seed: int,
    num_slots: int,
    max_seq_len: int,
    page_size: int,
    max_num_seqs: int,
) -> dict[str, dict[str, dict]]:
    """workload -> system -> its summary: every system serves the same trace per workload."""
    data: dict[str, dict[str, dict]] = {}
    jobs = [(w, s) for w in names for s in SYSTEMS]
    for workload, system in tqdm(jobs, desc="memory", disable=None):
        trace = generate(workload, requests, seed)
        if system == "paged":
            result = simulate_paged(trace, num_slots, page_size, max_num_seqs, max_seq_len)
        else:
            result = simulate_contiguous(trace, num_slots, system, max_seq_len, max_num_seqs)
        data.setdefault(workload, {})[system] = result
    return data


def _rows(data: dict[str, dict[str, dict]], page_size: int) -> list[list[object]]:
    """One table row per workload and system, the paper's token share last: the paper's Fig. 2
    is ShareGPT's, so other workloads' rows leave it empty ("-")."""
    rows: list[list[object]] = []
    for workload, systems in data.items():
        for system, result in systems.items():
            label = f"paged (page {page_size})" if system == "paged" else f"contiguous {system}"
            categories = [round(result[c], 1) for c in CATEGORIES]
            paper = PAPER[system] if workload == "sharegpt" else "-"
            rows.append(
                [workload, label, *categories, round(result["mean_batch"], 1), result["steps"], paper]
            )
    return rows


def figure(report: Report):
    """Stacked bars: each system's KV memory by category, one panel per workload."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from pagedkv.viz.palette import BENCH_SLOT_COLORS

    # Okabe-Ito; free is the pools' FREE grey, outlined so that a thin share still shows
    # external is reddish purple, far from internal's orange. 9 x 2.9 in: at projector size
    # (11 in wide) the figure is about 390 px tall, so the box's title and the x labels fit
    # on one 1280 x 720 screen with it
    colors = BENCH_SLOT_COLORS
    fig = Figure(figsize=(9, 2.9))
    FigureCanvasAgg(fig)
    for i, (workload, systems) in enumerate(report.data.items()):
        ax = fig.add_subplot(1, len(report.data), i + 1)
        names = list(systems)
        bottom = np.zeros(len(names))
        for category, color in zip(CATEGORIES, colors, strict=True):
            values = np.array([systems[s][category] for s in names])
            # free is outlined; an empty one is a line on the frame's top edge, unseen
            outlined = category == "free"
            ax.bar(
                names,
                values,
                bottom=bottom,
                color=color,
                label=SHORT_NAMES.get(category, category.replace("_", " ")),  # as the table
                edgecolor="#555555" if outlined else "none",
                linewidth=0.8 if outlined else 0.0,
            )
            bottom += values
        for x, s in enumerate(names):
            ax.text(
                x,
                systems[s]["token_states"] / 2,
                f"{systems[s]['token_states']:.1f}%",  # as the table prints it
                ha="center",
                va="center",
                color="white",
                fontsize=9,
                gid="token_states",
            )
        ax.set_title(f"{workload}-like requests")
        headroom = _label_slivers(ax, systems)
        ax.set_ylim(0, 100 + headroom)
        ax.set_yticks(range(0, 101, 20))
        ax.set_ylabel("% of KV memory" if i == 0 else "")
    fig.axes[-1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.suptitle("Where KV memory goes: contiguous reservations vs pages")
    fig.tight_layout()
    return fig


SLIVER_PCT = 5.0  # a share below this is too thin to read off its bar: its value is written above
SHORT_NAMES = {"reserved": "reserved", "internal_fragmentation": "internal",
               "external_fragmentation": "external", "free": "free"}  # fmt: skip


def slivers(shares: dict) -> list[str]:
    """The thin non-token shares of one bar (0 < share < SLIVER_PCT, as printed to one
    decimal), as labels: {"internal_fragmentation": 2.0, "free": 1.4, ...} ->
    ["internal 2.0%", "free 1.4%"]."""
    return [
        f"{short} {shares[category]:.1f}%"
        for category, short in SHORT_NAMES.items()
        if 0.05 <= shares[category] < SLIVER_PCT
    ]


def _label_slivers(ax, systems: dict) -> float:
    """Write each bar's thin shares above it, one per line; return the headroom (in % of the
    y axis) the labels need above 100, 0 when no bar has one."""
    lines = 0
    for x, system in enumerate(systems):
        labels = slivers(systems[system])
        if labels:
            ax.text(x, 101, "\n".join(labels), ha="center", va="bottom", fontsize=9, gid="sliver")
            lines = max(lines, len(labels))
    return 15.0 * lines + 2.0 if lines else 0.0
