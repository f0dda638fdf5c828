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
"""

from __future__ import annotations

import argparse
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


def _time_help() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pagedkv", "serve", "--help"], check=True, capture_output=True)
    return time.perf_counter() - start


def _time_health(*args: str) -> float:
    from pagedkv.service.serve import ServerProcess

    start = time.perf_counter()
    with ServerProcess(*args, poll=0.005) as server:
        took = time.perf_counter() - start
        assert server.stop() == 0
    return took


def run(*, quick: bool = False, seed: int = 0, operations: int = 10_000, repeat: int = 3) -> Report:
    if quick:
        operations, repeat = 1_000, 1
    directory = tempfile.mkdtemp(prefix="pagedkv-bench-startup-")
    try:
        records = _build_store(f"{directory}/full", operations)
        measured = {
            "serve --help": min(_time_help() for _ in range(repeat)),
            "/health, empty WAL": min(_time_health("--wal", f"{directory}/empty{k}") for k in range(repeat)),
            "/health, recovered WAL": min(
                _time_health(
                    "--wal", f"{directory}/full", "--fsync", "never", "--checkpoint-every", "1000000000"
                )
                for _ in range(repeat)
            ),
        }
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    rows: list[list[object]] = [
        [name, seconds, TARGETS[name], "yes" if seconds <= TARGETS[name] else "NO"]
        for name, seconds in measured.items()
    ]
    return Report(
        title=f"bench startup: best of {repeat} cold starts; recovered WAL = {operations} operations",
        columns=["start", "seconds", "target (s)", "met"],
        rows=rows,
        notes=[f"the recovered WAL holds {records} records (no checkpoint: all replayed)"],
        data={"seconds": measured, "operations": operations, "records": records},
    )
