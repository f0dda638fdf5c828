"""bench startup: how soon the service answers, from a cold process.

Measures, each the best of `--repeat` cold starts in fresh child processes:

- `python -m pagedkv serve --help`: the command line's own start-up (imports only),
- `/health` after a start with an empty write-ahead log: from the process start to the
  first 200,
- `/health` after recovering a write-ahead log of `--operations` operations (keyed
  creates, appends and frees through the engine; no checkpoint, so every record is
  replayed): the restart after a crash.

Targets (issue 24): `--help` <= 0.5 s, empty start <= 1 s, 10,000-operation recovery <= 2 s.
The store is built in this process through `ServiceEngine` (the same code path the HTTP
routes call), with fsync "never" so building it stays quick.

Beside each wall time, the CPU seconds (user + system) the child had used by then — for a
server, read from /proc when its first `/health` answered — and the load average: on a
shared machine the wall time grows with the load, the CPU time much less.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from pagedkv.bench import Report

HELP = "start-up: serve --help, /health after an empty start and after recovering a WAL"
TARGETS = {"serve --help": 0.5, "/health, empty WAL": 1.0, "/health, recovered WAL": 2.0}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--operations", type=int, default=10_000, help="operations in the recovered WAL")
    parser.add_argument("--repeat", type=int, default=3, help="cold starts per measurement (best counts)")


def _build_store(path: str, operations: int) -> int:
    """A store whose log holds `operations` keyed operations; returns its record count."""
    from pagedkv.service.engine import ServiceEngine

    engine = ServiceEngine(256, 16, path, "never", checkpoint_every=10**9)
    done = 0
    while done < operations:
        seq = f"s{done}"
        engine.create(list(b"a shared system prompt, " + str(done).encode()), seq, key=f"c{done}")
        done += 1
        for i in range(min(8, operations - done)):
            engine.append(seq, [i + 1], key=f"a{done}")
            done += 1
        if done < operations and done % 50:  # keep some sequences live across the restart
            engine.free(seq, key=f"f{done}")
            done += 1
    records = engine.durable.last_seq if engine.durable is not None else 0
    engine.close()
    return records


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _time_help() -> tuple[float, float]:
    """(wall seconds, CPU seconds) of `python -m pagedkv serve --help`."""
    start, cpu = time.perf_counter(), _children_cpu()
    subprocess.run([sys.executable, "-m", "pagedkv", "serve", "--help"], check=True, capture_output=True)
    return time.perf_counter() - start, _children_cpu() - cpu


def _process_cpu(pid: int) -> float:
    """CPU seconds (user + system) process `pid` has used so far (Linux /proc; NaN elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def _time_health(*args: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the server) from its start to its first /health 200."""
    from pagedkv.service.serve import ServerProcess

    start = time.perf_counter()
    with ServerProcess(*args, poll=0.005) as server:
        took, cpu = time.perf_counter() - start, _process_cpu(server.process.pid)
        assert server.stop() == 0
    return took, cpu


def _best(runs: list[tuple[float, float]]) -> tuple[float, float]:
    """The run with the least wall time, and the least CPU time of all runs."""
    return min(wall for wall, _ in runs), min(cpu for _, cpu in runs)


def run(*, quick: bool = False, seed: int = 0, operations: int = 10_000, repeat: int = 3) -> Report:
    if quick:
        operations, repeat = 1_000, 1
    directory = tempfile.mkdtemp(prefix="pagedkv-bench-startup-")
    try:
        records = _build_store(f"{directory}/full", operations)
        full = ("--wal", f"{directory}/full", "--fsync", "never", "--checkpoint-every", "1000000000")
        empty = [_time_health("--wal", f"{directory}/empty{k}") for k in range(repeat)]
        timed = {
            "serve --help": _best([_time_help() for _ in range(repeat)]),
            "/health, empty WAL": _best(empty),
            "/health, recovered WAL": _best([_time_health(*full) for _ in range(repeat)]),
        }
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    measured = {name: wall for name, (wall, _) in timed.items()}
    rows: list[list[object]] = [
        [name, wall, cpu, TARGETS[name], "yes" if wall <= TARGETS[name] else "NO"]
        for name, (wall, cpu) in timed.items()
    ]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return Report(
        title=f"bench startup: best of {repeat} cold starts; recovered WAL = {operations} operations",
        columns=["start", "seconds", "CPU s", "target (s)", "met"],
        rows=rows,
        notes=[
            f"the recovered WAL holds {records} records (no checkpoint: all replayed)",
            f"load average (1 min) at the end: {load:.2f} on {os.cpu_count()} CPUs",
            *(
                ["PYTHONDONTWRITEBYTECODE is set: a module without a cached .pyc is compiled at every start"]
                if os.environ.get("PYTHONDONTWRITEBYTECODE")
                else []
            ),
        ],
        data={
            "seconds": measured,
            "cpu_seconds": {name: cpu for name, (_, cpu) in timed.items()},
            "load_average": load,
            "operations": operations,
            "records": records,
        },
    )
