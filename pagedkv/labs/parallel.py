"""Independent runs of a lab on several cores, with the same results as one after another.

A benchmark grid (every system at every rate, every router at every replica count) is a list
of runs that share nothing but their input. `run_all(fn, jobs, shared, workers)` computes
`fn(job, *shared)` for each job and returns the results in job order; with `workers > 1` the
jobs go to that many processes (at most one per core), and `shared` (the trace, the options)
is sent once to each process rather than once per job. Each run is the same computation
wherever it runs, so the results do not depend on `workers`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed

from tqdm import tqdm

_TASK: tuple = ()  # (fn, shared) of a worker process, set by `_start`
# Worker processes of a benchmark's `--quick` run (the notebooks run those): one per core up
# to this many. One process takes about twice as long, with the same results.
QUICK_WORKERS = 2


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def run_all(
    fn: Callable,
    jobs: Sequence,
    shared: tuple = (),
    workers: int = 1,
    longest_first: Callable | None = None,
    desc: str = "runs",
) -> list:
    """`[fn(job, *shared) for job in jobs]`, in up to `workers` processes. `longest_first(job)`
    is a sort key: the jobs it puts first are started first, so the long ones do not end up
    last on one core. `fn` must be a module-level function (a process is handed it by name)."""
    workers = min(workers, cores(), len(jobs))
    with tqdm(total=len(jobs), desc=desc, disable=None) as bar:
        if workers <= 1:
            results = []
            for job in jobs:
                results.append(fn(job, *shared))
                bar.update()
            return results
        order = (
            sorted(range(len(jobs)), key=lambda i: longest_first(jobs[i]))
            if longest_first
            else range(len(jobs))
        )
        with ProcessPoolExecutor(workers, initializer=_start, initargs=(fn, shared)) as pool:
            futures = {pool.submit(_call, jobs[i]): i for i in order}
            done: dict[int, object] = {}
            for future in as_completed(futures):
                done[futures[future]] = future.result()
                bar.update()
    return [done[i] for i in range(len(jobs))]


def _start(fn: Callable, shared: tuple) -> None:
    global _TASK
    _TASK = (fn, shared)


def _call(job: object) -> object:
    fn, shared = _TASK
    return fn(job, *shared)
