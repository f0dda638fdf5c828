"""bench wal: what durability costs per operation, for each fsync policy.

One bookkeeping trace — admit a 64-token prompt (every other one sharing a 32-token
prefix), append 8 tokens, free the oldest once 16 are live (the last 16 stay live) — runs
on a plain in-memory manager and on a `DurableSequenceManager` under fsync "never", "batch 64", "batch 8" and
"always", side by side. Reported: operations/s, microseconds per operation, the slowdown
against memory, and fsyncs. Then recovery: the time `recover` takes to replay the "never"
store's log (records/s), and to load the same state from a checkpoint instead.
Each timed run ends by fsyncing what is left unsynced, as a clean close does, so the
"never" row counts one fsync.

The store lives in a temporary directory on the file system of `--dir` (default: the
system temp dir); fsync costs are that disk's.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path

from pagedkv.bench import Report
from pagedkv.core.config import CacheConfig
from pagedkv.core.plumbing.validation import check_int
from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.service.durable import DurableSequenceManager
from pagedkv.service.recovery import recover

HELP = "write-ahead log cost per operation by fsync policy, and recovery speed"
POLICIES = ("never", "batch 64", "batch 8", "always")
SEQUENCES = 300  # sequences in a default run
LIVE = 16  # sequences live at once: the oldest is freed when one more is admitted
CONFIG = CacheConfig(num_pages=1024, page_size=16, num_layers=1, num_kv_heads=1, head_dim=8)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sequences",
        type=int,
        default=SEQUENCES,
        help="sequences admitted and grown (all but the last 16 are freed)",
    )
    parser.add_argument("--dir", default=None, help="where to put the temporary stores")


def _trace(manager: SequenceManager, sequences: int, seed: int) -> int:
    """Admit, grow and free `sequences` sequences (`LIVE` live at once; the last `LIVE` are
    never freed); returns operations done."""
    rng = random.Random(seed)
    shared = [rng.randrange(32_000) for _ in range(32)]
    live, ops = [], 0
    for i in range(sequences):
        prefix = shared if i % 2 else [rng.randrange(32_000) for _ in range(32)]
        manager.add(i, prefix + [rng.randrange(32_000) for _ in range(32)])
        live.append(i)
        for _ in range(8):
            manager.append_slot(i, rng.randrange(32_000))
        ops += 9
        if len(live) > LIVE:
            manager.free(live.pop(0))
            ops += 1
    return ops


def count_operations(sequences: int = SEQUENCES, seed: int = 0) -> int:
    """The operations (one log record each) the benchmark times: its trace run once on an
    in-memory manager, untimed. Example: count_operations(300) -> 2984 (300 adds, 2,400
    appends, 284 frees: the last 16 sequences stay live)."""
    check_int("sequences", sequences, 1)
    return _trace(SequenceManager(KVCachePool(CONFIG)), sequences, seed)


def _time_recovery(store: Path, records: int) -> dict:
    """Seconds to recover a store by replaying its log, then from a checkpoint."""
    start = time.perf_counter()
    recovered = recover(store)
    replay = time.perf_counter() - start
    recovered.checkpoint()
    recovered.close()
    start = time.perf_counter()
    recover(store).close()
    load = time.perf_counter() - start
    return {
        "records": records,
        "replay_s": replay,
        "records_per_s": records / replay,
        "checkpoint_load_s": load,
    }


def run(
    *,
    quick: bool = False,
    seed: int = 0,
    sequences: int = SEQUENCES,
    dir: str | None = None,
) -> Report:
    if quick:
        sequences = 40
    config = CONFIG
    root = Path(tempfile.mkdtemp(prefix="pagedkv-bench-wal-", dir=dir))
    rows, data = [], {}
    try:
        start = time.perf_counter()
        ops = _trace(SequenceManager(KVCachePool(config)), sequences, seed)
        memory = time.perf_counter() - start
        rows.append(["in memory (no log)", ops, ops / memory, 1e6 * memory / ops, 1.0, 0])
        data["memory"] = {"ops_per_s": ops / memory}
        for policy in POLICIES:
            manager = DurableSequenceManager.create(root / policy.replace(" ", ""), config, policy)
            start = time.perf_counter()
            _trace(manager, sequences, seed)
            manager.log.sync()
            seconds = time.perf_counter() - start
            fsyncs, records = manager.log.fsyncs, manager.last_seq
            manager.close()
            per_op = 1e6 * seconds / ops
            rows.append([f"fsync {policy}", ops, ops / seconds, per_op, seconds / memory, fsyncs])
            data[policy] = {
                "ops_per_s": ops / seconds,
                "us_per_op": 1e6 * seconds / ops,
                "fsyncs": fsyncs,
                "records": records,
                "slowdown": seconds / memory,
            }
        data["recovery"] = _time_recovery(root / "never", records)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    always, never, rec = data["always"], data["never"], data["recovery"]
    return Report(
        title=(
            f"bench wal: {sequences} sequences x (add 64 tokens + 8 appends), "
            f"{max(sequences - LIVE, 0)} freed (the last {min(sequences, LIVE)} stay live), "
            f"{ops} operations, pages of 16, one record per operation"
        ),
        columns=["mode", "ops", "ops/s", "us/op", "vs memory", "fsyncs"],
        rows=rows,
        notes=[
            f"fsync always costs {always['us_per_op'] - never['us_per_op']:.0f} us more per "
            "operation than "
            f"never ({always['ops_per_s'] / never['ops_per_s']:.3f}x the throughput)",
            f"recovery replays {records:,} records in {rec['replay_s']:.2f} s "
            f"({rec['records_per_s']:,.0f} records/s); "
            f"from a checkpoint of the same state: {rec['checkpoint_load_s']:.3f} s",
        ],
        data=data,
    )
