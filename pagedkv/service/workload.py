"""A seeded random workload over a SequenceManager, and a process that runs it until killed.

The crash tests, notebook 07 and `bench wal` drive the durable manager with it: prompts that
share prefixes (so pages are hit, cached and evicted), TinyLM prefill and decode through the
paged cache (so K/V are real and must survive), forks (so pages are shared and copied on
write), frees and, optionally, checkpoints. Everything follows from the seed, so the same
workload on a plain in-memory manager is the oracle a recovered state must equal:
`reference(seed, n)` is that manager after exactly the n operations a log would hold.

`crash_during(server, path, body, key)` does the same to an HTTP server: it restarts it with
the log's crash drill (wal.py) set a given number of records ahead, sends one request, and
the server kills itself (SIGKILL) right after that record: always inside the request, at
the same record on every machine, however busy.

`python -m pagedkv.service.workload DIR --seed S` runs it on a new store in DIR; with
`--die-at SEQ --torn-bytes B` the process writes the first B bytes of record SEQ and then
SIGKILLs itself (a deterministic crash in the middle of a write).

Databases test recovery the same way (kill at random points, compare with a model run).
Leaves out: crashes of the machine itself (power loss), which a process cannot simulate.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Hashable
from collections.abc import Sequence as SequenceLike
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pagedkv.core.config import CacheConfig
from pagedkv.core.page import PageState
from pagedkv.core.pool import KVCachePool, OutOfPagesError
from pagedkv.core.sequence import SequenceManager
from pagedkv.model.tinylm import TinyLM
from pagedkv.service.durable import DurableSequenceManager
from pagedkv.service.kv_checksums import still_matching
from pagedkv.service.wal import HEADER_SIZE, WriteAheadLog

if TYPE_CHECKING:
    from pagedkv.service.serve import ServerProcess

ALPHABET = list(b"abcdefgh ")  # few letters: prompts collide on prefixes often
NUM_PAGES, PAGE_SIZE = 24, 4  # small enough that the pool fills, evicts and refuses


def workload_config(model: TinyLM) -> CacheConfig:
    return model.cache_config(NUM_PAGES, PAGE_SIZE)


def run_workload(
    manager: SequenceManager,
    model: TinyLM,
    seed: int,
    steps: int,
    checkpoint_every: int = 0,
    started: list[int] | None = None,
) -> None:
    """`steps` random steps: admit + prefill, decode a few sequences, fork, or free. Each
    step's number (from 1) is appended to `started`, if given, as the step begins."""
    rng = np.random.default_rng(seed)
    prefixes = [rng.choice(ALPHABET, size=int(rng.integers(4, 14))).tolist() for _ in range(3)]
    next_id = 0
    for step in range(steps):
        if started is not None:
            started.append(step + 1)
        live = list(manager.sequences)
        r = rng.random()
        if not live or r < 0.3:
            suffix = rng.choice(ALPHABET, size=int(rng.integers(1, 10))).tolist()
            seq_id, next_id = f"s{next_id}", next_id + 1
            try:
                manager.add(seq_id, prefixes[int(rng.integers(3))] + suffix)
            except OutOfPagesError:
                manager.free(live[0])  # make room: the oldest sequence finishes
            else:
                model.forward(manager, [seq_id])
        elif r < 0.65:
            _decode_a_few(manager, model, rng, live)
        elif r < 0.78:
            manager.fork(live[int(rng.integers(len(live)))], f"s{next_id}")
            next_id += 1
        else:
            manager.free(live[int(rng.integers(len(live)))])
        if checkpoint_every and step % checkpoint_every == checkpoint_every - 1:
            assert isinstance(manager, DurableSequenceManager), "checkpoints need a durable store"
            manager.checkpoint()


def _decode_a_few(
    manager: SequenceManager, model: TinyLM, rng: np.random.Generator, live: list[Hashable]
) -> None:
    """One decode step of 1-3 random live sequences, stopping at the first one out of pages."""
    picks = rng.choice(len(live), size=min(len(live), int(rng.integers(1, 4))), replace=False)
    grown = []
    for i in picks:
        try:
            manager.append_slot(live[i], int(rng.choice(ALPHABET)))
        except OutOfPagesError:
            break
        grown.append(live[i])
    if grown:
        model.forward(manager, grown)


class _Stop(Exception):
    pass


class _BudgetManager(SequenceManager):
    """A plain manager that allows exactly `budget` successful logged-kind operations."""

    def __init__(self, pool: KVCachePool, budget: int) -> None:
        super().__init__(pool)
        self.budget, self.done = budget, 0

    def _counted(self, op, *args):
        if self.done == self.budget:
            raise _Stop
        result = op(*args)
        self.done += 1
        return result

    def add(self, *args):
        return self._counted(super().add, *args)

    def append_slot(self, *args):
        return self._counted(super().append_slot, *args)

    def fork(self, *args):
        return self._counted(super().fork, *args)

    def free(self, *args):
        return self._counted(super().free, *args)

    def set_computed(self, *args):
        return self._counted(super().set_computed, *args)

    def checkpoint(self) -> None:
        """A checkpoint changes no state and takes no record."""


def reference(seed: int, num_records: int, steps: int = 10**9) -> SequenceManager:
    """The workload on an in-memory pool, stopped after exactly `num_records` operations."""
    model = TinyLM(seed=0)
    manager = _BudgetManager(KVCachePool(workload_config(model)), num_records)
    try:
        run_workload(manager, model, seed, steps)
    except _Stop:
        pass
    return manager


def step_of_record(seed: int, seq: int) -> int:
    """The workload step (counted from 1) that writes record `seq`: the step a child killed
    while writing that record died in."""
    model = TinyLM(seed=0)
    manager = _BudgetManager(KVCachePool(workload_config(model)), seq - 1)
    started: list[int] = []
    try:
        run_workload(manager, model, seed, 10**9, started=started)
    except _Stop:
        return started[-1]
    raise ValueError(f"the workload of seed {seed} never writes record {seq}")


def computed_kv(manager: SequenceManager) -> dict:
    """seq id -> K/V of its computed tokens, [layers, 2, num_computed_tokens, kv_heads, head_dim]:
    what a recovered cache must hold (tokens logged but not yet computed have no K/V)."""
    kv, size = manager.pool.kv_cache, manager.page_size
    out = {}
    for seq_id, seq in manager.sequences.items():
        slots = seq.slot_mapping(0, seq.num_computed_tokens)
        out[seq_id] = kv[:, :, slots // size, slots % size]
    return out


class _DyingLog(WriteAheadLog):
    """Writes `torn_bytes` of record `die_at`, then SIGKILLs its own process."""

    die_at, torn_bytes = 0, 0

    def _write(self, data: bytes) -> None:
        if self.next_seq == self.die_at:
            os.write(self._fd, data[: self.torn_bytes])
            os.kill(os.getpid(), signal.SIGKILL)
        super()._write(data)


def workload_command(directory: Path | str, seed: int, *options: str) -> list[str]:
    """The command line that runs the workload on a new store in `directory` until it ends
    (or, without --steps, until killed)."""
    return [
        sys.executable,
        "-m",
        "pagedkv.service.workload",
        str(directory),
        "--seed",
        str(seed),
        *options,
    ]


def run_in_subprocess(directory: Path | str, seed: int, *options: str, timeout: float = 60) -> int:
    """Run the workload in a child process and wait; its return code (-9 when it was
    SIGKILLed, e.g. by --die-at)."""
    cmd = workload_command(directory, seed, *options)
    return subprocess.run(cmd, capture_output=True, timeout=timeout).returncode


def damage_record(store: Path, copy: Path, offset: int) -> Path:
    """Copy `store` to `copy` and overwrite one byte of the record at `offset`, a few bytes
    into its JSON (past the header): damage in the middle of the log, such as a power loss can
    leave (notebook 07, 1c). The copy's folder."""
    shutil.copytree(store, copy)
    with open(Path(copy) / "wal.log", "r+b") as log:
        log.seek(offset + HEADER_SIZE + 4)
        log.write(b"#")
    return Path(copy)


def crash_during(
    server: ServerProcess, path: str, body: dict, key: str, records: int = 20, timeout: float = 30
) -> bool:
    """Crash `server` inside one request: stop it (SIGTERM, graceful), start it again on the
    same store with the crash drill set `records` records past its last one, POST `body` to
    `path` with Idempotency-Key `key`, and wait until the drill kills it (kill -9 right after
    the request's `records`-th log record, so exactly that many of its records are on disk
    and no `commit`). True if the request got no answer (the crash cut it off); False if it
    wrote fewer records than that and was answered."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    from pagedkv.service.launcher import ServerProcess

    text = httpx.get(f"{server.url}/metrics", headers=server.headers, timeout=timeout).text
    last = next(
        int(sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "pagedkv_wal_records_total"
    )
    server.stop()
    drill = ServerProcess(*server.args, token=server.token, die_after_record=last + records)
    try:
        httpx.post(
            f"{drill.url}{path}",
            json=body,
            timeout=timeout,
            headers={**drill.headers, "Idempotency-Key": key},
        )
        answered = True
    except httpx.HTTPError:  # the connection died with the server
        answered = False
    drill.stop(signal.SIGKILL)  # reaps it (already dead unless the request committed first)
    return not answered


def crash_after_eviction(store: Path, records: int = 10) -> dict:
    """Notebook 07b's drill: a server on `store` with 8 pages of 4 tokens. `old`
    (16 tokens, 4 pages) is admitted and freed, so its pages stay CACHED; `story` (16 tokens)
    takes the other 4. A 12-token generate of `story` is cut off `records` records in
    (`crash_during`): with no FREE page left, its appends evict `old`'s CACHED pages and
    overwrite their K/V. The server restarts; `old`'s prompt is sent again.
    Returns the pages the cut-off records evicted (read from the log before the restart),
    the recovery's count of dropped CACHED pages, which of the evicted pages are FREE after
    it, which of them still match in kv.bin, after recovery, the CRC the committed records
    hold (`crc_still_matches`: a checksum alone would have kept them), and the tokens the
    new prompt found cached."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    from pagedkv.service.launcher import ServerProcess
    from pagedkv.service.wal import read_log

    args = ("--num-pages", "8", "--page-size", "4", "--wal", str(store))
    prompt = {"seq_id": "old", "text": "An older prompt!"}
    server = ServerProcess(*args)
    old = httpx.post(f"{server.url}/sequences", json=prompt).json()["block_table"]
    httpx.delete(f"{server.url}/sequences/old")
    httpx.post(f"{server.url}/sequences", json={"seq_id": "story", "text": "Once upon a time"})
    body = {"max_new_tokens": 12}
    crash_during(server, "/sequences/story/generate", body, key="evict", records=records)
    logged, _ = read_log(store / "wal.log")
    evicted = [page for r in logged[-records:] for page in r.payload.get("evict") or []]
    with ServerProcess(*args) as again:
        scrape = httpx.get(f"{again.url}/metrics").text
        dropped = next(
            int(sample.value)
            for family in text_string_to_metric_families(scrape)
            for sample in family.samples
            if sample.name == "pagedkv_recovery_dropped_cached_pages"
        )
        state = httpx.get(f"{again.url}/snapshot").json()["state"]  # page -> PageState
        config = CacheConfig(**json.loads((store / "config.json").read_text()))
        kv = np.memmap(store / "kv.bin", dtype=config.dtype, mode="r", shape=config.kv_shape)
        committed = [r.payload for r in logged[:-records]]
        matching = still_matching(kv, committed, evicted)
        del kv  # read before the new prompt below writes any K/V
        readmit = httpx.post(f"{again.url}/sequences", json={**prompt, "seq_id": "again"}).json()
    return {
        "old_pages": old,
        "evicted": evicted,
        "dropped": dropped,
        "evicted_now_free": [page for page in evicted if state[page] == PageState.FREE],
        "crc_still_matches": matching,
        "hit_tokens": readmit["num_cached_tokens"],
    }


def main(argv: SequenceLike[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pagedkv.service.workload", description=__doc__)
    parser.add_argument("directory")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=10**9, help="stop after this many steps")
    parser.add_argument("--fsync", default="never", help="always | never | 'batch N'")
    parser.add_argument("--checkpoint-every", type=int, default=0, metavar="STEPS")
    parser.add_argument(
        "--die-at", type=int, default=0, metavar="SEQ", help="SIGKILL while writing record SEQ"
    )
    parser.add_argument("--torn-bytes", type=int, default=0, help="bytes of that record written first")
    args = parser.parse_args(argv)
    model = TinyLM(seed=0)
    manager = DurableSequenceManager.create(args.directory, workload_config(model), args.fsync)
    if args.die_at:
        manager.log.close()
        manager.log = _DyingLog(manager.log.path, manager.log.next_seq, args.fsync)
        manager.log.die_at, manager.log.torn_bytes = args.die_at, args.torn_bytes
    print("ready", flush=True)
    run_workload(manager, model, args.seed, args.steps, args.checkpoint_every)
    manager.close()
    print("done", manager.last_seq, flush=True)


if __name__ == "__main__":
    main()
