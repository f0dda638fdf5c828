"""bench threads: one coarse lock vs a read-write lock around the manager, 1-8 threads.

N threads share one `LockedManager` and together run a fixed number of operations, each
thread on its own sequences: writes are `add` (a 48-token prompt, half of them sharing a
32-token prefix), `append_slot` and `free`, each under one hold of `exclusive()` (the write
lock, as a request takes it); reads are `block_table` and `sequence` (a copy).
Two mixes: read-heavy (90 % reads) and write-heavy (20 % reads). The total is the same at
every thread count, so operations/s compare directly. Every run ends with
`check_invariants()`. The notes also count **hand-offs**: how often the write lock went to
another thread than its last holder. An `RLock` (C code) is taken by a waiting thread as
soon as it is released, without the GIL; a `ReadWriteLock` (Python code) needs the GIL to
be taken, which the releasing thread still holds, so that thread usually takes it again.

There is no "no lock" baseline: an uncontended RLock's acquire + release (C code, well
under a microsecond) costs no more than Python's cheapest no-op context manager, so on one
thread the coarse lock is the floor, and differences from a lock-free run would be noise.
"""

from __future__ import annotations

import argparse
import json
import random
from importlib import resources

import numpy as np

from pagedkv.bench import Report, format_table, time_threads
from pagedkv.core.config import CacheConfig
from pagedkv.core.plumbing.words import count
from pagedkv.core.pool import KVCachePool, OutOfPagesError
from pagedkv.core.sequence import SequenceManager
from pagedkv.service.concurrency import CoarseLock, LockedManager, ReadWriteLock

HELP = "thread scaling: coarse lock vs read-write lock at 1, 2, 4, 8 threads (operations/s)"
MIXES = {"read-heavy": 0.9, "write-heavy": 0.2}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ops", type=int, default=30_000, help="operations per run, all threads together")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--repeat", type=int, default=5, help="best of this many runs")


def _worker(
    target: LockedManager, index: int, ops: int, read_fraction: float, seed: int, holders: list[int]
) -> None:
    rng = random.Random(seed * 1000 + index)
    shared = [rng.randrange(256) for _ in range(32)]
    live: list[str] = []
    made = 0
    for _ in range(ops):
        if live and rng.random() < read_fraction:
            seq_id = live[rng.randrange(len(live))]
            target.block_table(seq_id) if rng.random() < 0.5 else target.sequence(seq_id)
            continue
        r = rng.random()
        # One write lock per operation, as a request holds it (bookkeeping only: no K/V).
        with target.exclusive() as m:
            holders.append(index)  # who held the write lock, in order
            if not live or (r < 0.25 and len(live) < 16):
                prefix = shared if rng.random() < 0.5 else [rng.randrange(256) for _ in range(32)]
                seq_id, made = f"t{index}.{made}", made + 1
                try:
                    m.add(seq_id, prefix + [rng.randrange(256) for _ in range(16)])
                except OutOfPagesError:
                    if live:
                        m.free(live.pop(0))
                    continue
                live.append(seq_id)
            elif r < 0.85:
                try:
                    m.append_slot(live[rng.randrange(len(live))], rng.randrange(256))
                except OutOfPagesError:
                    m.free(live.pop(0))
            else:
                m.free(live.pop(rng.randrange(len(live))))


DESIGNS: dict[str, type[CoarseLock | ReadWriteLock]] = {"coarse": CoarseLock, "rwlock": ReadWriteLock}


def measure(
    design: str, threads: int, ops: int, read_fraction: float = 0.2, seed: int = 0
) -> tuple[float, int]:
    """Operations/s of `threads` threads sharing `ops` operations under one lock design
    ("coarse" or "rwlock"), and the hand-offs: how often the write lock went to another
    thread than its last holder. The run ends with check_invariants()."""
    config = CacheConfig.bookkeeping(4096, 16)
    target = LockedManager(SequenceManager(KVCachePool(config)), DESIGNS[design]())
    holders: list[int] = []
    share = ops // threads
    seconds = time_threads(lambda i: _worker(target, i, share, read_fraction, seed, holders), threads)
    target.check_invariants()
    handoffs = sum(a != b for a, b in zip(holders, holders[1:]))
    return share * threads / seconds, handoffs


def compare(
    cases: list[tuple[str, str, int]], ops: int, repeat: int, seed: int = 0
) -> dict[tuple[str, str, int], tuple[float, int]]:
    """Best operations/s of each (design, mix, threads) case over `repeat` rounds, with that
    run's hand-offs; each round runs every case once, so load drift on a shared machine hits
    all designs alike."""
    best = dict.fromkeys(cases, (0.0, 0))
    for _ in range(repeat):
        for design, mix, n in cases:
            best[design, mix, n] = max(best[design, mix, n], measure(design, n, ops, MIXES[mix], seed))
    return best


def run(
    *,
    quick: bool = False,
    seed: int = 0,
    ops: int = 30_000,
    threads: tuple[int, ...] = (1, 2, 4, 8),
    repeat: int = 5,
) -> Report:
    if quick:
        ops, repeat = 1_500, 1
    cases = [(design, mix, n) for mix in MIXES for design in DESIGNS for n in threads]
    best = compare(cases, ops, repeat, seed)
    data = {f"{d}/{m}/{n}": rate for (d, m, n), (rate, _) in best.items()}
    rows = [
        [
            design,
            mix,
            n,
            data[f"{design}/{mix}/{n}"],
            data[f"{design}/{mix}/{n}"] / data[f"coarse/{mix}/{threads[0]}"],
        ]
        for design, mix, n in cases
    ]
    notes = []
    for mix in MIXES:
        for n in threads:
            ratio = data[f"coarse/{mix}/{n}"] / data[f"rwlock/{mix}/{n}"]
            hands = f"hand-offs {best['coarse', mix, n][1]} vs {best['rwlock', mix, n][1]}"
            notes.append(f"{mix}, {count(n, 'thread')}: coarse / rwlock = {ratio:.2f}x; {hands}")
    return Report(
        plotter=figure,
        title=(f"bench threads: {ops} operations per run, 4096 pages of 16 (best of {repeat})"),
        columns=["design", "mix", "threads", "ops/s", f"vs coarse, {threads[0]} thread(s)"],
        rows=rows,
        notes=notes,
        data=data,
    )


LOCKS = ("coarse", "read-write")  # DESIGNS in order, as the recorded runs' table names them
RUNS_FILE = "data/threads_runs.json"  # three recorded runs, hand-offs included (notebook 07b)


def recorded_runs() -> list[dict[tuple[str, str, int], tuple[int, int]]]:
    """The recorded runs of pagedkv/data/threads_runs.json (`bench threads --ops 6000
    --repeat 3`, three times on one 2-core machine): per run, (design, mix, threads) ->
    (operations/s, hand-offs)."""
    text = resources.files("pagedkv").joinpath(RUNS_FILE).read_text(encoding="utf-8")
    runs = []
    for run in json.loads(text)["runs"]:
        cases = {}
        for key, (rate, handoffs) in run.items():
            design, mix, n = key.split("/")
            cases[design, mix, int(n)] = (rate, handoffs)
        runs.append(cases)
    return runs


def spread(runs: list[dict], design: str, mix: str, n: int, field: int) -> tuple[int, int]:
    """Lowest and highest over the runs of one case's operations/s (field 0) or hand-offs (1)."""
    values = [run[design, mix, n][field] for run in runs]
    return min(values), max(values)


def leads(runs: list[dict]) -> list[tuple[str, int, str, float]]:
    """(mix, threads, lock ahead, gap %) for each case where one lock's ops/s range lies
    wholly above the other's; the gap is between the nearest ends, in % of the lower one."""
    found = []
    names = list(DESIGNS)
    for mix in MIXES:
        for n in sorted({k for _, m, k in runs[0] if m == mix}):
            a, b = (spread(runs, design, mix, n, 0) for design in names)
            for ahead, top, bottom in ((names[0], a, b), (names[1], b, a)):
                if top[0] > bottom[1]:
                    found.append((mix, n, ahead, 100 * (top[0] - bottom[1]) / bottom[1]))
    return found


def runs_table(runs: list[dict]) -> str:
    """The recorded runs as one table: per mix and thread count, each lock's operations/s
    (rounded to the hundred) and write-lock hand-offs, lowest-highest over the runs."""

    def cell(design: str, mix: str, n: int, field: int) -> str:
        low, high = (round(v, -2) if field == 0 else v for v in spread(runs, design, mix, n, field))
        return f"{low:,}" if low == high else f"{low:,}\u2013{high:,}"

    threads = sorted({n for _, _, n in runs[0]})
    rows = [
        [mix, n, *(cell(d, mix, n, f) for f in (0, 1) for d in DESIGNS)] for mix in MIXES for n in threads
    ]
    columns = ["mix", "threads", *(f"{what} {lock}" for what in ("ops/s", "hand-offs") for lock in LOCKS)]
    title = f"Recorded, not run here: lowest\u2013highest of {len(runs)} runs on one 2-core machine"
    return title + "\n" + format_table(columns, rows)


def figure(report: Report):
    """Operations/s by thread count, coarse vs read-write lock, one panel per mix."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from pagedkv.viz.palette import BENCH_LOCK_COLORS

    fig = Figure(figsize=(9, 3.4))
    FigureCanvasAgg(fig)
    threads = sorted({int(key.rsplit("/", 1)[1]) for key in report.data if "coarse" in key})
    x = np.arange(len(threads))
    for i, mix in enumerate(MIXES):
        ax = fig.add_subplot(1, len(MIXES), i + 1)
        for k, (design, label) in enumerate(zip(DESIGNS, LOCKS, strict=True)):
            color = BENCH_LOCK_COLORS[design]
            rates = [report.data[f"{design}/{mix}/{n}"] for n in threads]
            ax.bar(x + 0.4 * k, rates, width=0.4, color=color, label=f"{label} lock")
        ax.set_xticks(x + 0.2, [str(n) for n in threads])
        ax.set_xlabel("threads")
        ax.set_title(f"{mix} ({int(100 * MIXES[mix])} % reads)")
        if i == 0:
            ax.set_ylabel("operations / s")
    # One legend above both panels, where it covers no bar.
    fig.legend(*ax.get_legend_handles_labels(), loc="upper center", ncol=2, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    return fig


def runs_figure(runs: list[dict]):
    """The recorded runs' operations/s as range bars (lowest to highest over the runs)
    against the thread count, coarse vs read-write lock, one panel per mix (notebook 07b).
    Each panel's y-axis spans its own data, not from 0, so a range is tall enough to compare;
    a dashed line in each lock's colour marks its lowest 1-thread rate."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    from pagedkv.viz.palette import BENCH_LOCK_COLORS

    fig = Figure(figsize=(9, 4.4))
    FigureCanvasAgg(fig)
    threads = sorted({n for _, _, n in runs[0]})
    x = np.arange(len(threads))
    for i, mix in enumerate(MIXES):
        ax = fig.add_subplot(1, len(MIXES), i + 1)  # its own scale: the mixes differ 7-fold
        for k, (design, label) in enumerate(zip(DESIGNS, LOCKS, strict=True)):
            color = BENCH_LOCK_COLORS[design]
            lows, highs = zip(*(spread(runs, design, mix, n, 0) for n in threads), strict=True)
            bar = f"{label} lock: lowest–highest of {len(runs)} runs"
            ax.vlines(x + 0.3 * k - 0.15, lows, highs, color=color, linewidth=9, label=bar)
            ax.axhline(lows[0], color=color, linestyle="--", linewidth=1.2, label=f"{label}: 1-thread lowest")
        values = [v for d in DESIGNS for n in threads for v in spread(runs, d, mix, n, 0)]
        margin = 0.08 * (max(values) - min(values))
        ax.set_ylim(min(values) - margin, max(values) + margin)  # around the data, not from 0
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1000:g}k"))
        ax.set_xticks(x, [str(n) for n in threads], fontsize=12)
        ax.tick_params(axis="y", labelsize=12)
        ax.set_xlabel("threads", fontsize=12)
        ax.set_title(f"{mix} ({int(100 * MIXES[mix])} % reads)", fontsize=13)
        if i == 0:
            ax.set_ylabel("operations / s (axis not from 0)", fontsize=12)
    fig.legend(*ax.get_legend_handles_labels(), loc="upper center", ncol=2, frameon=False, fontsize=12)
    fig.tight_layout(rect=(0, 0, 1, 0.82))
    return fig
