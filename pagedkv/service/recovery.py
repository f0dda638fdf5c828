"""Crash recovery: rebuild a DurableSequenceManager from its directory.

`recover(path)` loads the checkpoint, replays the intact log records in order through the
same validate-plan-log-apply path as live operations (the "log" then checks that each
replayed operation produces exactly the stored record: log and code agree on every page,
or recovery stops), drops a torn final record, and returns a manager in the exact state
after the last durable record: block tables, ref counts, page states, prefix index, LRU
order, counters, clock, copy-on-write record, and — in kv.bin — the K/V of every computed
token. Damage with valid records after it stops recovery with `WALCorruptionError` naming
the byte offset.

Transactions (durable.py) are applied whole or not at all: records after the last
`commit` that belong to an unfinished transaction (`begin` without `commit`: the crash cut
a request off) are rolled back — not replayed, and cut from the log. Such a request may have
written K/V into pages it evicted from the prefix cache. Every CACHED page its records were
given comes back FREE (`_drop_overwritten`), without a look at its K/V or their CRC: the
committed records' CRC of a page never overwritten would still match, but a CRC-32 match
guards against accidents, it does not prove that nobody wrote the page. So recovery serves
no K/V a cut-off writer may have touched, at the cost of computing those pages' tokens
again. What recovery discarded — torn
bytes, rolled-back records and bytes, and the pages it dropped — is in `manager.recovery`
(the service logs it and exports it as metrics).

Last, each page that is not FREE is checked against the CRC of its K/V that the log and
checkpoint hold (kv_checksums.py): after a power loss under fsync "batch N" or "never",
kv.bin may lack K/V a surviving record vouches for, or hold K/V written for a record that was
lost. A page that fails is never served: a CACHED one turns FREE, and the sequences holding
an ACTIVE one are computed again from it (`kv_checksum_failed_pages` in the report).

Replay runs on a private copy-on-write view of kv.bin (`np.memmap` mode "c"): a logged
copy-on-write cannot be replayed against the file, because its source page may since have
been reused. Only the last record's copy may be missing from the file (the crash came
between record and copy), and that one is redone in the file.

PostgreSQL's redo does the same from its last checkpoint. Leaves out: parallel replay, and
recovering from a damaged checkpoint (it is written atomically, so damage there is real
corruption and recovery refuses).
"""

from __future__ import annotations

import gc
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Literal, cast

import numpy as np

from pagedkv.core.config import CacheConfig
from pagedkv.core.pool import KVCachePool
from pagedkv.service.checkpoint import export_state, key_from_json, read_checkpoint, restore_state
from pagedkv.service.durable import CHECKPOINT, CONFIG, KV, LOG, DurableSequenceManager
from pagedkv.service.idempotency import DEFAULT_MAX_KEYS
from pagedkv.service.kv_checksums import drop_failed, failed_pages, free_cached
from pagedkv.service.wal import FsyncPolicy, Record, WALCorruptionError, WriteAheadLog, lock_store, read_log


class StoreFileError(Exception):
    """A store file is missing (`missing`) or unusable; the message names file and problem."""

    def __init__(self, path: Path, problem: str, missing: bool = False) -> None:
        super().__init__(f"{path}: {problem}")
        self.path, self.problem, self.missing = str(path), problem, missing


def _read_config(directory: Path) -> CacheConfig:
    """The store's CacheConfig, checking that its log and K/V file are there and whole."""
    path = directory / CONFIG
    try:
        config = CacheConfig(**json.loads(path.read_text()))
    except (ValueError, TypeError) as exc:  # not JSON, or not a CacheConfig
        raise StoreFileError(path, f"not a valid store config ({exc})") from None
    for name in (LOG, KV):
        if not (directory / name).is_file():
            raise StoreFileError(directory / name, "missing (the store is incomplete)", True)
    expected = int(np.prod(config.kv_shape)) * np.dtype(config.dtype).itemsize
    size = (directory / KV).stat().st_size
    if size != expected:
        raise StoreFileError(directory / KV, f"holds {size} bytes; the config needs exactly {expected}")
    return config


class _Replay:
    """Stands in for the log during recovery: each replayed operation must produce exactly
    the record the log holds, except its K/V checksums (`kv_crc`), which it takes from the
    record: kv.bin holds the K/V as of the crash, not as of the record (checked at the end)."""

    policy = FsyncPolicy("never")

    def __init__(self, path: Path, last_seq: int) -> None:
        self.path, self.last_seq = path, last_seq
        self.expected: Record | None = None  # set by _replay_all before each operation

    def append(self, payload: dict, sync: bool = True) -> int:
        record = self.expected
        assert record is not None, "_replay_all sets the record first"
        if "kv_crc" in payload:  # a log written before checksums has none: nothing to check
            payload.pop("kv_crc")
            if "kv_crc" in record.payload:
                payload["kv_crc"] = record.payload["kv_crc"]
        if payload != record.payload:
            raise WALCorruptionError(
                self.path,
                record.offset,
                f"replaying record {record.seq} gives {payload}, the log holds {record.payload}",
            )
        self.last_seq = record.seq
        return record.seq

    def sync(self) -> None:
        pass


def _apply(manager: DurableSequenceManager, record: Record) -> None:
    """Replay one record through the operation it describes."""
    p = record.payload
    op = p.get("op")
    if op == "add":
        manager.add(p["seq_id"], p["tokens"], key_from_json(p["extra_key"]))
    elif op == "append":
        manager.append_slot(p["seq_id"], p["token"])
    elif op == "fork":
        manager.fork(p["parent"], p["child"])
    elif op == "free":
        manager.free(p["seq_id"])
    elif op == "computed":
        manager.set_computed(p["seq_id"], p["n"])
    elif op == "reset":
        manager.reset_prefix_cache()
    elif op == "begin":
        manager.log_begin()
    elif op == "commit":
        manager.commit(p.get("key"), p.get("request", ""), p.get("answer"), p.get("owners"))
    else:
        raise ValueError(f"unknown operation {op!r}")


def _split_committed(path: Path, records: list[Record]) -> tuple[list[Record], list[Record]]:
    """(records of finished transactions, records of the one a crash left unfinished)."""
    open_at = None
    for i, record in enumerate(records):
        op = record.payload.get("op")
        if op == "begin":
            if open_at is not None:
                raise WALCorruptionError(
                    path, record.offset, f"record {record.seq} begins a transaction inside another"
                )
            open_at = i
        elif op == "commit":
            open_at = None
    if open_at is None:
        return records, []
    return records[:open_at], records[open_at:]


def _drop_overwritten(state: dict, rolled_back: list[Record]) -> list[int]:
    """Turn FREE the CACHED pages a rolled-back transaction was given (it may have written
    their K/V), whatever their K/V hold now: their CRC is not checked; returns their ids."""
    return free_cached(state, [p for r in rolled_back for p in r.payload.get("alloc") or ()])


def _replay_all(
    scratch: DurableSequenceManager, replay: _Replay, records: list[Record], log_path: Path
) -> None:
    """Replay `records` in order through `scratch`, whose log is `replay`; WALCorruptionError
    naming the first that does not replay."""
    for record in records:
        replay.expected = record
        try:
            _apply(scratch, record)
        except WALCorruptionError:
            raise
        except Exception as exc:
            raise WALCorruptionError(
                log_path, record.offset, f"record {record.seq} cannot be replayed: {exc}"
            ) from exc
        if scratch.last_seq != record.seq:  # the operation declined (e.g. a refused reset)
            raise WALCorruptionError(
                log_path, record.offset, f"record {record.seq} was not reproduced by replay"
            )


def _open_kv(directory: Path, config: CacheConfig, mode: Literal["c", "r+"]) -> np.memmap:
    return np.memmap(directory / KV, dtype=config.dtype, mode=mode, shape=config.kv_shape)


def _truncate(path: Path, size: int) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)


def recover(
    path: Path | str, fsync: FsyncPolicy | str = "always", max_keys: int = DEFAULT_MAX_KEYS
) -> DurableSequenceManager:
    """Rebuild the manager stored in directory `path` as of its last durable record, keeping
    the newest `max_keys` idempotency keys (the bound the live service uses).

    A sequence may come back with tokens whose record was written but whose K/V were not
    (num_computed_tokens < num_tokens: the crash came before the forward pass), in pages
    already indexed for prefix hits. Compute them (`TinyLM.forward`) before freeing the
    sequence or admitting anything, as `ServiceEngine` does.

    Raises WALCorruptionError (naming the file and byte offset) for damage with data after
    it, StoreFileError for a missing or unusable log, K/V file or config, and
    FileNotFoundError when `path` holds no store."""
    # NOTE: replay makes hundreds of thousands of small objects and keeps them (records,
    # payloads, the rebuilt state); the cyclic garbage collector would walk them again at
    # each of its passes and find no garbage (a third of the time of a 40,000-record
    # replay). It is paused while recovering, as a bulk load would do.
    paused = gc.isenabled()
    gc.disable()
    try:
        return _recover(Path(path), fsync, max_keys)
    finally:
        if paused:
            gc.enable()


def _recover(directory: Path, fsync: FsyncPolicy | str, max_keys: int) -> DurableSequenceManager:
    if not (directory / CONFIG).exists():
        raise FileNotFoundError(f"{directory} holds no pagedkv store (no {CONFIG})")
    lock_fd = lock_store(directory)
    try:
        config = _read_config(directory)
        log_path = directory / LOG
        base_seq, state, records, end = _read_durable(directory)
        records, rolled_back = _split_committed(log_path, records)
        replay = _Replay(log_path, base_seq)
        scratch = DurableSequenceManager(
            KVCachePool(config, kv_cache=_open_kv(directory, config, "c")),
            # Operations use only append, sync, last_seq and policy of their log, which
            # _Replay has; the scratch manager is never checkpointed nor closed.
            cast(WriteAheadLog, replay),
            max_keys=max_keys,
        )
        if state is not None:
            restore_state(scratch, state)
        _replay_all(scratch, replay, records, log_path)
        torn = log_path.stat().st_size - end
        keep = rolled_back[0].offset if rolled_back else end
        if keep < log_path.stat().st_size:  # cut off what is not replayed: new records follow
            _truncate(log_path, keep)
        kv = _open_kv(directory, config, "r+")
        log = WriteAheadLog(log_path, scratch.last_seq + 1, fsync)
        manager = DurableSequenceManager(KVCachePool(config, kv_cache=kv), log, directory, lock_fd, max_keys)
        state = export_state(scratch)
        dropped = _drop_overwritten(state, rolled_back)
        _redo_last_copy(state, kv, records[-1].payload if records else {})
        failed = failed_pages(state, kv)
        drop_failed(state, failed, config.page_size)
        restore_state(manager, state)
    except BaseException:
        os.close(lock_fd)
        raise
    manager.recovery = {
        "checkpoint_seq": base_seq,
        "records_replayed": len(records),
        "torn_bytes": torn,  # a damaged or torn final record, dropped
        "discarded_records": len(rolled_back),  # the unfinished transaction's records
        "discarded_bytes": end - keep,
        "dropped_cached_pages": dropped,
        "kv_checksum_failed_pages": failed,  # K/V differ from their logged CRC: not served
    }
    return manager


def _read_durable(directory: Path) -> tuple[int, dict | None, list[Record], int]:
    """(checkpoint's last record number, its state or None, the log's records after it, the
    byte offset where the log's intact records end); WALCorruptionError when records between
    the checkpoint and the log are missing."""
    base_seq, state = 0, None
    if (directory / CHECKPOINT).exists():
        base_seq, state = read_checkpoint(directory / CHECKPOINT)
    log_path = directory / LOG
    records, end = read_log(log_path)
    records = [r for r in records if r.seq > base_seq]
    if records and records[0].seq != base_seq + 1 and state is None:
        raise StoreFileError(
            directory / CHECKPOINT,
            f"missing: the log starts at record {records[0].seq}, so records 1-"
            f"{records[0].seq - 1} were compacted into a checkpoint that is gone",
            missing=True,
        )
    if records and records[0].seq != base_seq + 1:
        raise WALCorruptionError(
            log_path,
            records[0].offset,
            f"first record is {records[0].seq} but the checkpoint ends at {base_seq}: records are missing",
        )
    return base_seq, state, records, end


def _redo_last_copy(state: dict, kv: np.memmap, last: dict) -> None:
    """Copy-on-write again when the last record is one: the crash may have come between the
    record and its copy of the K/V."""
    if last.get("cow"):
        src, dst = last["cow"]
        n = len(state["pages"][dst][2]) - 1  # the copy's tokens, but the appended one
        kv[:, :, dst, :n] = kv[:, :, src, :n]
        kv.flush()


def discarded_lines(recovery: dict) -> list[str]:
    """One line per thing recovery discarded (none when it discarded nothing).

    Example: {"torn_bytes": 11, ...} -> ["dropped a damaged or torn final record (11 bytes)"]."""
    lines = []
    if recovery.get("torn_bytes"):
        lines.append(f"dropped a damaged or torn final record ({recovery['torn_bytes']} bytes)")
    if recovery.get("discarded_records"):
        lines.append(
            f"rolled back a transaction a crash cut off ({recovery['discarded_records']} "
            f"records, {recovery['discarded_bytes']} bytes; "
            f"{len(recovery['dropped_cached_pages'])} cached pages dropped)"
        )
    if recovery.get("kv_checksum_failed_pages"):
        lines.append(
            f"{len(recovery['kv_checksum_failed_pages'])} pages whose K/V differ from their "
            "logged checksum (a power loss?): cached ones dropped, active ones to compute again"
        )
    return lines


def open_store(
    path: Path | str,
    config: CacheConfig,
    fsync: FsyncPolicy | str = "always",
    max_keys: int = DEFAULT_MAX_KEYS,
) -> DurableSequenceManager:
    """Recover the store in `path` if there is one (its config must equal `config`), else
    create it; either keeps the newest `max_keys` idempotency keys."""
    if not (Path(path) / CONFIG).exists():
        return DurableSequenceManager.create(path, config, fsync, max_keys)
    manager = recover(path, fsync, max_keys)
    if manager.pool.config != config:
        stored = asdict(manager.pool.config)
        manager.close()
        diff = {k: (v, getattr(config, k)) for k, v in stored.items() if getattr(config, k) != v}
        raise ValueError(f"{path} was created with another config (stored, asked): {diff}")
    return manager
