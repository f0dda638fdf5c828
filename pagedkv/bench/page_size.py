"""bench page-size: what the page size trades, across pool capacities.

ShareGPT-like requests that all start with one shared system prompt run through the
`Scheduler` in bookkeeping-only mode with prefix caching on, for every page size and pool
capacity (in token slots, so pools of different page sizes hold the same memory):

- **slot utilisation**: of the slots in ACTIVE pages, the share holding a token (the rest
  is the unfilled tail of each sequence's last page: internal fragmentation, which grows
  with the page size);
- **prefix hit rate**: prompt tokens served from cached pages; only *full* pages are
  shared, so a system prompt shorter than a page is never reused, and the last partial
  page of the shared prefix never is;
- **batch** and **preemptions**: what the memory sustains;
- **bookkeeping throughput**: scheduled tokens per second of `step()` time (small pages
  mean more allocations and more hashing per token).

vLLM picks 16 (its default block size): the paper (Sec. 7.2) finds 16-128 best on
ShareGPT, and smaller blocks hurt its GPU kernel's parallelism, which numpy does not model.
"""

from __future__ import annotations

import argparse
import textwrap
import time

from tqdm import tqdm

from pagedkv.bench import Report
from pagedkv.core.config import CacheConfig
from pagedkv.core.plumbing.validation import check_int
from pagedkv.core.plumbing.words import count
from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.engine.scheduler import Scheduler
from pagedkv.labs.workloads import sharegpt_like, with_system_prompt

HELP = "page-size sweep (1..256) x pool capacity: utilisation, prefix hit rate, throughput"
SAMPLE_EVERY = 8  # steps between utilisation samples (reading every page is O(pool))


class SplitLookups(SequenceManager):
    """A SequenceManager that counts prefix lookups in two kinds: a request's first
    admission, and its re-admissions after a preemption (an id it has admitted before).
    `lookups[kind]` is [prompt tokens looked up, of those served from cached pages]."""

    def __init__(self, pool: KVCachePool) -> None:
        super().__init__(pool)
        self.admitted: set = set()
        self.lookups = {"first": [0, 0], "again": [0, 0]}

    def add(self, seq_id, prompt_token_ids, extra_key=None) -> int:
        hits = super().add(seq_id, prompt_token_ids, extra_key)
        counts = self.lookups["again" if seq_id in self.admitted else "first"]
        counts[0] += len(prompt_token_ids)
        counts[1] += hits
        self.admitted.add(seq_id)
        return hits


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--page-sizes", default="1,2,4,8,16,32,64,128,256")
    parser.add_argument("--capacities", default="8192,32768", help="pool sizes in token slots")
    parser.add_argument("--system-prompt", type=int, default=200, help="shared prefix tokens")
    parser.add_argument("--max-num-seqs", type=int, default=128)


def simulate(requests, slots: int, page_size: int, max_num_seqs: int) -> dict:
    config = CacheConfig.bookkeeping(slots // page_size, page_size)
    pool = KVCachePool(config)
    manager = SplitLookups(pool)
    sched = Scheduler(manager, max_num_seqs=max_num_seqs, max_num_batched_tokens=4096)
    sched.add_requests(requests)
    seconds, steps, used, held, batch = 0.0, 0, 0, 0, 0  # used, held, batch: summed over samples
    peak = (0, 0)  # (most requests running at once, the first step with that many)
    while sched.has_unfinished:
        start = time.perf_counter()
        sched.step()
        seconds += time.perf_counter() - start
        steps += 1
        peak = max(peak, (len(sched.running), -steps))
        if steps % SAMPLE_EVERY == 0 and pool.num_active_pages:
            used += round(pool.token_usage * config.num_slots)
            held += pool.num_active_pages * page_size
            batch += len(sched.running)
    samples = max(1, steps // SAMPLE_EVERY)
    tokens = sched.stats.prefill_tokens + sched.stats.decode_tokens
    return {
        "capacity": slots,
        "page_size": page_size,
        "num_pages": config.num_pages,
        "slot_utilisation_pct": 100.0 * used / max(1, held),
        "prefix_hit_rate_pct": 100.0 * pool.stats.hit_rate,
        "mean_batch": batch / samples,
        "max_batch": peak[0],  # most requests running at once
        "max_batch_step": -peak[1],  # the first step that ran that many
        "preemptions": sched.stats.preemptions,
        "steps": steps,
        "tokens_per_s": tokens / seconds,
        "evictions": pool.stats.evictions,
        "tokens": tokens,  # prefill + decode tokens scheduled (recomputed ones again)
        "prefill_tokens": sched.stats.prefill_tokens,  # computed: prefix hits excluded
        "decode_tokens": sched.stats.decode_tokens,
        "prompt_tokens": sum(r.prompt_len for r in requests),  # of the trace, each once
        "allocations": pool.stats.allocations,  # pages handed out: the per-page work
        "active_slots_per_running": held / max(1, batch),  # slots of ACTIVE pages per running request
        "empty_slots_per_running": (held - used) / max(1, batch),  # of those, holding no token
        "first_lookups": manager.lookups["first"],  # [tokens looked up, tokens hit]
        "readmission_lookups": manager.lookups["again"],
        # each kind's hits over its own lookups: the first reads sharing between requests alone
        "first_hit_rate_pct": _rate(manager.lookups["first"]),
        "readmission_hit_rate_pct": _rate(manager.lookups["again"]),
    }


def _rate(lookups: list[int]) -> float:
    """Tokens hit as a percentage of tokens looked up ([looked up, hit]); 0.0 with no lookup."""
    return 100.0 * lookups[1] / lookups[0] if lookups[0] else 0.0


def one_run(
    page_size: int = 16, slots: int = 8192, requests: int = 40, system_prompt: int = 200, seed: int = 0
) -> dict:
    """One point of the sweep: `requests` ShareGPT-like requests after a shared
    `system_prompt`-token prompt, in a pool of `slots` token slots (whole pages of
    `page_size`), max_num_seqs 128, as `run` simulates it. Every value but `tokens_per_s`
    is deterministic. Small enough to run in about a second for pages of 4 to 256.
    Example: one_run(256)["first_lookups"][1] -> 0 (no 256-token page of the prompt is full)."""
    check_int("page_size", page_size, 1, 1024)
    check_int("slots", slots, page_size, 1 << 20)
    check_int("requests", requests, 1, 1000)
    check_int("system_prompt", system_prompt, 0, 4096)
    trace = with_system_prompt(sharegpt_like(requests, seed), system_prompt)
    check_fits(trace, slots, page_size)
    point = simulate(trace, slots, page_size, 128)
    point.update(requests=requests, system_prompt=system_prompt)
    return point


class PoolTooSmallError(ValueError):
    """`check_fits`'s refusal: the pool cannot hold some request; `need_slots` is the
    smallest pool, in slots of whole pages, that holds the longest request, `longest` that
    request's tokens at its longest, and `pool_slots` the slots of the pool's whole pages."""

    def __init__(self, message: str, need_slots: int, longest: int = 0, pool_slots: int = 0) -> None:
        super().__init__(message)
        self.need_slots, self.longest, self.pool_slots = need_slots, longest, pool_slots


def try_page_size(page_size: int = 16, slots: int = 8192) -> dict | None:
    """`one_run(page_size, slots)` for a try-it cell: print `describe` of the point and
    return it; or, when the values are refused (a pool too small for the longest request,
    a value out of range or not an int), print what was asked, why it cannot run and what
    to try, and return None: one message, no traceback. Code that wants the error calls
    `one_run`, which raises it (PoolTooSmallError is a ValueError).
    Example: try_page_size(16, 1000) prints "cannot run: page = 16, slots = 1000 ..." -> None."""
    try:
        point = one_run(page_size, slots)
    except PoolTooSmallError as err:
        why = (
            f"The pool holds {err.pool_slots // page_size:,} pages of {page_size} = "
            f"{err.pool_slots:,} token slots, but the longest request grows to {err.longest:,} "
            f"tokens ({err.need_slots // page_size:,} pages of {page_size})"
        )
        hint = f"slots = {err.need_slots:,} or more"
    except (ValueError, TypeError) as err:
        why, hint = (
            str(err),
            "a whole number of tokens per page from 1 to 1,024, and slots of at least a page",
        )
    else:
        print(describe(point))
        return point
    print(f"cannot run: page = {page_size!r}, slots = {slots!r}.")
    print(textwrap.fill(f"{why}.", 90))
    print(f"Try {hint}, then run the cell again.")
    return None


def check_fits(requests, slots: int, page_size: int) -> None:
    """Raise PoolTooSmallError (a ValueError), naming the first request (in queue order)
    that cannot fit, if the pool of `slots` token slots, rounded down to whole pages of
    `page_size`, is too small to hold a request at its longest: prompt + max_new_tokens - 1
    tokens (the scheduler's rule: the last sampled token never gets a slot). The message
    also gives the longest request of all and the pool it needs (`need_slots`)."""
    pages = slots // page_size
    longest = [r.prompt_len + r.max_new_tokens - 1 for r in requests]
    first = next((i for i, n in enumerate(longest) if -(-n // page_size) > pages), None)
    if first is None:
        return
    top = max(longest)
    need = -(-top // page_size)
    raise PoolTooSmallError(
        f"request {requests[first].req_id!r}, the first that cannot fit, grows to "
        f"{longest[first]:,} tokens: more than the pool's {pages:,} pages x {page_size} = "
        f"{pages * page_size:,} slots ({slots:,} slots rounded down to whole pages). The "
        f"longest request grows to {top:,} tokens = {need:,} pages of {page_size}: "
        f"slots must be at least {need * page_size:,}",
        need * page_size,
        top,
        pages * page_size,
    )


def describe(point: dict) -> str:
    """The deterministic numbers of a `one_run` point as a few lines of text."""
    lookups = zip(point["first_lookups"], point["readmission_lookups"], strict=True)
    looked_up, hit = (first + again for first, again in lookups)  # tokens, and tokens hit
    page, pages = point["page_size"], point["num_pages"]
    shared = point["system_prompt"] // page * page  # whole pages of the shared prompt
    return "\n".join(
        [
            f"pages of {count(page, 'token')}, {pages:,} pages = {pages * page:,} token slots;",
            f"{point['requests']} requests after a {point['system_prompt']}-token system prompt",
            f"slot util {point['slot_utilisation_pct']:.1f}% "
            f"(empty slots per running request: {point['empty_slots_per_running']:.0f})",
            f"system prompt shared: {shared} tokens; prefix hits (first admissions and re-admissions):",
            f"  {hit:,} of {looked_up:,} tokens looked up = {hit / max(1, looked_up):.1%}",
            f"mean running {point['mean_batch']:.1f}, preemptions {point['preemptions']},",
            f"page allocations {point['allocations']:,} "
            f"({1000 * point['allocations'] / point['tokens']:.1f} per 1,000 tokens computed)",
        ]
    )


def run(
    *,
    quick: bool = False,
    seed: int = 0,
    requests: int = 300,
    page_sizes: str = "1,2,4,8,16,32,64,128,256",
    capacities: str = "8192,32768",
    system_prompt: int = 200,
    max_num_seqs: int = 128,
) -> Report:
    if quick:
        requests, page_sizes, capacities = 40, "1,16,256", "8192"
    sizes = [int(s) for s in page_sizes.split(",")]
    pool_sizes = [int(c) for c in capacities.split(",")]
    trace = with_system_prompt(sharegpt_like(requests, seed), system_prompt)
    jobs = [(c, s) for c in pool_sizes for s in sizes]
    results = [simulate(trace, c, s, max_num_seqs) for c, s in tqdm(jobs, desc="page-size", disable=None)]
    rows = [
        [
            r["capacity"],
            r["page_size"],
            r["num_pages"],
            round(r["slot_utilisation_pct"], 1),
            round(r["prefix_hit_rate_pct"], 1),
            round(r["mean_batch"], 1),
            r["preemptions"],
            r["steps"],
            r["tokens_per_s"],
        ]
        for r in results
    ]
    return Report(
        plotter=figure,
        title=(
            f"bench page-size: {requests} ShareGPT-like requests after a shared "
            f"{system_prompt}-token system prompt, max_num_seqs {max_num_seqs}, "
            "bookkeeping only"
        ),
        columns=[
            "slots",
            "page size",
            "pages",
            "slot util %",
            "prefix hit %",
            "mean batch",
            "preemptions",
            "steps",
            "tokens/s",
        ],
        rows=rows,
        notes=[
            "slot util = tokens / slots of ACTIVE pages; prefix hits need full pages, so a "
            f"{system_prompt}-token system prompt shares floor({system_prompt} / "
            "page size) pages",
            "tokens/s is wall time of Scheduler.step (noisy on a shared machine); the other "
            "columns are deterministic",
        ],
        data={"points": results},
    )


def _panel_value(point: dict, key: str) -> float:
    """One point's value in a figure panel: a field, or pages allocated per 1,000 tokens."""
    if key == "allocs_per_1k":
        return 1000 * point["allocations"] / point["tokens"]
    return point[key]


def figure(report: Report, timing: bool = True):
    """Utilisation, hit rate, allocations per 1,000 tokens and (with `timing`, wall clock)
    throughput against page size, one line per capacity. Without `timing` the figure is the
    same on every run."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    panels = [
        ("slot_utilisation_pct", "slot utilisation (%)"),
        ("prefix_hit_rate_pct", "prefix hits, all (%)\n(first + re-admission)"),
        ("allocs_per_1k", "allocs / 1k tokens (log)"),
    ]
    if timing:
        panels.append(("tokens_per_s", "bookkeeping tokens / s"))
    from pagedkv.viz.palette import BENCH_MODE_COLORS, BENCH_SERIES_COLOR

    fig = Figure(figsize=(3.4 * len(panels), 3.4), layout="constrained")
    FigureCanvasAgg(fig)
    points = report.data["points"]
    capacities = sorted({p["capacity"] for p in points})
    # one pool (notebook 06): the house's dark grey for a series of no kind; more: magenta, teal too
    colors = dict(zip(capacities, [BENCH_SERIES_COLOR, *BENCH_MODE_COLORS.values()], strict=False))
    for i, (key, label) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        for capacity, color in colors.items():
            sel = [p for p in points if p["capacity"] == capacity]
            ax.plot(
                [p["page_size"] for p in sel],
                [_panel_value(p, key) for p in sel],
                "o-",
                color=color,
                label=f"pool of {capacity:,} slots",
            )
        ax.set_xscale("log", base=2)
        sizes = sorted({p["page_size"] for p in points})
        ax.set_xticks(sizes, [str(s) for s in sizes])
        ax.minorticks_off()
        if key == "prefix_hit_rate_pct":  # from 0: a drop reads as large as it is
            ax.set_ylim(0, 100)
        elif key == "slot_utilisation_pct":  # from the ten below the lowest: the fall shows
            low = min(p[key] for p in points)
            ax.set_ylim(max(0, 10 * (low // 10) - 10), 100)
        elif key == "allocs_per_1k":
            ax.set_yscale("log")
        ax.set_xlabel("page size (tokens)")
        ax.set_title(label, fontsize=10)
    if len(colors) == 1:  # one pool: named in a title, a legend of one line adds nothing
        fig.suptitle(f"pool of {capacities[0]:,} slots", fontsize=10)
        return fig
    # one legend above the panels: every panel draws the same pools
    fig.legend(
        *fig.axes[0].get_legend_handles_labels(), loc="outside upper center", ncols=len(colors), fontsize=8
    )
    return fig
