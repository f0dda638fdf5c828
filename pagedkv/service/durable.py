"""A SequenceManager that survives crashes: validate, plan, log, then act.

`DurableSequenceManager` is a `SequenceManager` whose every state change — `add`,
`append_slot`, `fork`, `free`, `set_computed`, `reset_prefix_cache` — goes through four
steps: validate the arguments (the manager's own checks, so errors are the same), *plan*
the effects (which pages the prefix lookup hits, which FREE pages are taken, which CACHED
pages are evicted, which page a copy-on-write fills), append one record holding the call
and its effects to the write-ahead log (wal.py), and only then apply it. A failed call
logs nothing. The K/V store is a file-backed `np.memmap`, so K/V survive with the log;
`recover` (recovery.py) rebuilds the manager from them.

The record comes first because of K/V: a copy-on-write may overwrite a page the state on disk
still calls a CACHED prefix. Record first, recovery replays the eviction and the copy; the K/V
checksums (kv_checksums.py) only drop pages, for when log and kv.bin reach disk out of step.

A directory holds one durable manager:

    config.json      CacheConfig (written last at creation: its presence marks a store)
    kv.bin           the K/V store, [layers, 2, num_pages, page_size, kv_heads, head_dim]
    wal.log          records since the last checkpoint
    checkpoint.bin   state at some record seq (checkpoint.py), absent before the first
    lock             flock()ed while a process has the store open

With fsync "always", K/V are flushed (msync) before a record that vouches for them (a
`set_computed`, or the record after a copy-on-write; inside a transaction, its commit), so
the guarantees hold across power loss. With "batch N" or "never" they hold across process
crashes; a power loss may lose the last records and K/V, so a `computed` record carries its
pages' CRCs (kv_checksums.py) and recovery serves no page whose K/V in kv.bin differ.

Transactions. A request of the HTTP service is many operations (a generate of n tokens is
n `append` and n `computed` records); `transaction()` makes them one unit: a `begin` record
first, a `commit` record last (with the request's idempotency key and answer, idempotency.py,
and the client owning each sequence it made, quota.py: `owners`, which a free forgets).
Recovery applies committed transactions only: one cut off by a crash is dropped from the
log, so the store comes back as it was before the request. Records outside any transaction
(direct use of the manager) are each their own. An exception inside a transaction after its
first record leaves memory ahead of what recovery would rebuild, so the manager refuses
every later operation (`StoreNeedsRecoveryError`) until the process restarts and recovers.

Like a database's redo log (ARIES redo, PostgreSQL WAL) with logical records. Leaves out:
undo records (a cut-off transaction is dropped at recovery, never undone in memory) and
multi-process sharing of one store (the lock refuses a second opener).
"""

from __future__ import annotations

import json
import os
from collections.abc import Hashable, Iterator
from collections.abc import Sequence as SequenceLike
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

import numpy as np

from pagedkv.core.config import CacheConfig
from pagedkv.core.plumbing.validation import check_int, check_seq_id, check_token
from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.service.checkpoint import export_state, key_to_json, write_checkpoint
from pagedkv.service.idempotency import DEFAULT_MAX_KEYS, IdempotencyKeys
from pagedkv.service.kv_checksums import computed_entries, copy_entries, note
from pagedkv.service.wal import FsyncPolicy, WriteAheadLog, atomic_write, fsync_dir, lock_store

CONFIG, KV, LOG, CHECKPOINT, LOCK = "config.json", "kv.bin", "wal.log", "checkpoint.bin", "lock"
COW_LOG_KEEP = 256  # copy-on-write pairs a long-running store keeps (the newest)


class StoreNeedsRecoveryError(RuntimeError):
    """A transaction failed half-way: memory is ahead of the log; restart to recover."""


class DurableSequenceManager(SequenceManager):
    """A SequenceManager that writes each operation to a write-ahead log before applying it."""

    def __init__(
        self,
        pool: KVCachePool,
        log: WriteAheadLog,
        directory: Path | None = None,
        lock_fd: int = -1,
        max_keys: int = DEFAULT_MAX_KEYS,
    ) -> None:
        super().__init__(pool)
        self.log = log
        self.directory = directory
        self.recovery: dict[str, object] = {}  # what recover() found (empty for a new store)
        # Committed keys (idempotency.py), bounded from the start: recovery replays commits
        # and restores checkpoints into this store, so a later bound would forget keys.
        self.idempotency = IdempotencyKeys(max_keys)
        self.owners: dict[Hashable, str] = {}  # seq id -> client (commit records; quota.py)
        self.kv_crc: dict[int, list] = {}  # page -> [computed slots, crc32 as 8 hex digits] (kv_checksums.py)
        self.broken: str | None = None  # why later operations are refused (see module doc)
        self._txn = "none"  # "none" | "pending" (begin not yet logged) | "open"
        self._lock_fd = lock_fd
        self._flush_kv = isinstance(pool.kv_cache, np.memmap) and log.policy.mode == "always"
        self._kv_dirty = False  # a copy-on-write wrote K/V not yet flushed

    @classmethod
    def create(
        cls,
        path: Path | str,
        config: CacheConfig,
        fsync: FsyncPolicy | str = "always",
        max_keys: int = DEFAULT_MAX_KEYS,
    ) -> DurableSequenceManager:
        """Start a new store in directory `path` (refuses one that already holds a store)."""
        directory = Path(path)
        directory.mkdir(parents=True, exist_ok=True)
        if (directory / CONFIG).exists():
            raise FileExistsError(f"{directory} already holds a pagedkv store; use recover()")
        lock_fd = lock_store(directory)
        try:
            kv = np.memmap(directory / KV, dtype=config.dtype, mode="w+", shape=config.kv_shape)
            kv.flush()
            log = WriteAheadLog.create(directory / LOG, 1, fsync)
            atomic_write(directory / CONFIG, json.dumps(asdict(config)).encode())
            fsync_dir(directory)
        except BaseException:
            os.close(lock_fd)
            raise
        return cls(KVCachePool(config, kv_cache=kv), log, directory, lock_fd, max_keys)

    @property
    def last_seq(self) -> int:
        """Sequence number of the last record (0 before the first)."""
        return self.log.last_seq

    # ---- operations: validate, plan, log, apply --------------------------------------------

    def add(
        self,
        seq_id: Hashable,
        prompt_token_ids: SequenceLike[int] | np.ndarray,
        extra_key: object = None,
    ) -> int:
        plan = self.plan_add(seq_id, prompt_token_ids, extra_key)
        free, evict = self.pool.peek_allocation(plan.num_new_pages, plan.revived)
        self._log(
            {
                "op": "add",
                "seq_id": seq_id,
                "tokens": plan.token_ids,
                "extra_key": key_to_json(extra_key),
                "hits": plan.hits,
                "alloc": free + evict,
                "evict": evict,
                "clock": self.pool.clock + 1,
            }
        )
        num_cached = self._admit(plan)
        note(self.kv_crc, free + evict, ())  # pages handed out: their K/V will change
        self._verify(self.sequences[seq_id].block_table == plan.hits + free + evict, "add", seq_id)
        return num_cached

    def append_slot(self, seq_id: Hashable, token_id: int) -> int:
        seq = self.get(seq_id)
        token_id = check_token("token_id", token_id)
        free, evict = self.pool.peek_allocation(self.pages_needed_to_append(seq_id))
        alloc = free + evict
        cow = [seq.block_table[-1], alloc[0]] if alloc and seq.num_tokens % self.page_size else None
        payload = {
            "op": "append",
            "seq_id": seq_id,
            "token": token_id,
            "alloc": alloc,
            "evict": evict,
            "cow": cow,
            "clock": self.pool.clock + 1,
        }
        if cow:  # the copy's K/V will be its source's: their CRC (kv_checksums.py)
            payload["kv_crc"] = copy_entries(self._kv_file(), cow, seq.num_tokens % self.page_size)
        self._log(payload)
        slot = super().append_slot(seq_id, token_id)
        note(self.kv_crc, alloc, payload.get("kv_crc", ()))
        if cow:
            self._kv_dirty = True
            self._verify(self.cow_log[-1] == tuple(cow), "append", seq_id)
        self._verify(not alloc or self.sequences[seq_id].block_table[-1] == alloc[0], "append", seq_id)
        return slot

    def fork(self, parent_id: Hashable, child_id: Hashable) -> None:
        self.get(parent_id)
        check_seq_id("child_id", child_id)
        if child_id in self.sequences:
            raise ValueError(f"child_id {child_id!r} is already a live sequence")
        self._log({"op": "fork", "parent": parent_id, "child": child_id, "clock": self.pool.clock + 1})
        super().fork(parent_id, child_id)

    def free(self, seq_id: Hashable) -> None:
        self.get(seq_id)
        self._log({"op": "free", "seq_id": seq_id, "clock": self.pool.clock + 1})
        super().free(seq_id)
        self.owners.pop(seq_id, None)

    def set_computed(self, seq_id: Hashable, num_computed_tokens: int) -> None:
        seq = self.get(seq_id)
        n = check_int("num_computed_tokens", num_computed_tokens, 0, seq.num_tokens)
        # The K/V this record vouches for were written just before (TinyLM.forward).
        old, kv = seq.num_computed_tokens, self._kv_file()
        crcs = computed_entries(kv, seq.block_table, old, n, self.page_size)
        payload = {"op": "computed", "seq_id": seq_id, "n": int(n), "clock": self.pool.clock, "kv_crc": crcs}
        self._log(payload, kv_written=True)  # replay puts the logged kv_crc in the payload
        super().set_computed(seq_id, n)
        note(self.kv_crc, (), payload.get("kv_crc", ()))

    def reset_prefix_cache(self) -> bool:
        """The pool's `reset_prefix_cache`, logged (call this one, not the pool's)."""
        if self.pool.num_active_pages:
            return False
        self._log({"op": "reset", "clock": self.pool.clock + 1})
        return self.pool.reset_prefix_cache()

    # ---- transactions ------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Make the operations inside one unit for recovery; end it with `commit()`.

        Nothing is logged for a transaction that logs no operation and commits no key."""
        if self._txn != "none":
            raise RuntimeError("transactions do not nest")
        self._check_usable()
        self._txn = "pending"
        try:
            yield
            if self._txn == "open":
                raise RuntimeError("transaction() ended without commit()")
        except BaseException as exc:
            if self._txn == "open":
                self.broken = f"a transaction failed after its first record ({exc!r})"
            raise
        finally:
            self._txn = "none"

    def log_begin(self) -> None:
        """Log the `begin` record now (recovery replays it; live code lets `_log` do it)."""
        self._txn = "open"
        self.log.append({"op": "begin"}, sync=False)  # durable with the commit

    def commit(
        self,
        key: str | None = None,
        request: str = "",
        answer: dict | None = None,
        owners: dict | None = None,
    ) -> None:
        """Log the `commit` record (idempotency key and answer, owners of new sequences; each
        if any) and store the key and owners."""
        if self._txn != "open" and key is None:
            self._txn = "none"
            return  # nothing was logged: nothing to commit
        if key is not None and not isinstance(answer, dict):
            raise TypeError(f"a commit with a key needs its answer as a dict, got {answer!r}")
        payload: dict = {"op": "commit"}
        if key is not None:
            payload.update(key=key, request=request, answer=answer)
        if owners:
            payload["owners"] = owners
        self._log(payload)
        self.owners.update(owners or {})
        self._txn = "none"
        if key is not None:
            assert answer is not None  # checked before logging
            self.idempotency.store(key, request, answer)
        # `cow_log` is a record for display (snapshots); unbounded, it would grow every
        # checkpoint forever. Trimmed here, at each commit, so replay trims it identically.
        del self.cow_log[:-COW_LOG_KEEP]

    def _check_usable(self) -> None:
        if self.broken is not None:
            raise StoreNeedsRecoveryError(f"{self.broken}; restart the process to recover")

    def _log(self, payload: dict, kv_written: bool = False) -> None:
        self._check_usable()
        if self._txn == "pending":
            self.log_begin()
        # Inside a transaction the disk work waits for the commit (one msync, one fsync per
        # request): a power loss before it loses the whole transaction, which recovery would
        # drop anyway. Except for records that overwrite pages another state may still cache
        # (evictions, copy-on-write): those reach the disk before their page is written.
        deferred = (
            self._txn == "open"
            and payload["op"] != "commit"
            and not payload.get("evict")
            and not payload.get("cow")
        )
        if self._flush_kv and (kv_written or self._kv_dirty):
            if deferred:
                self._kv_dirty = True
            else:  # K/V reach the disk before the record vouching for them
                self._kv_file().flush()
                self._kv_dirty = False
        self.log.append(payload, sync=not deferred)

    def _kv_file(self) -> np.memmap:
        kv = self.pool.kv_cache
        if not isinstance(kv, np.memmap):  # create() and recover() always give one
            raise TypeError(f"a durable manager's K/V must be an np.memmap, got {type(kv).__name__}")
        return kv

    def _verify(self, ok: bool, op: str, seq_id: Hashable) -> None:
        if not ok:  # the plan and the manager disagree: the log no longer describes memory
            raise RuntimeError(f"{op}({seq_id!r}) did not do what record {self.last_seq} says")

    # ---- checkpoints and shutdown ---------------------------------------------------------

    @property
    def checkpoint_path(self) -> Path:
        """Where this store's checkpoint goes (recovery's scratch manager has no directory)."""
        if self.directory is None:
            raise RuntimeError("this manager has no store directory to checkpoint into")
        return self.directory / CHECKPOINT

    def checkpoint(self) -> int:
        """Compact: flush K/V, write the state atomically, then drop the covered records.
        Returns the sequence number the checkpoint covers. (The service runs the three
        steps itself, holding its lock for the first and last only: checkpointer.py.)"""
        seq, state, offset = self.prepare_checkpoint()
        write_checkpoint(self.checkpoint_path, seq, state)
        self.trim_log(offset)  # a crash before this leaves records <= seq, which recovery skips
        return seq

    def prepare_checkpoint(self) -> tuple[int, dict, int]:
        """(last record seq, a copy of the state, log size) — with the lock held, between
        transactions. The K/V the state vouches for are flushed first."""
        if self._txn != "none":
            raise RuntimeError("cannot checkpoint inside a transaction")
        self._kv_file().flush()
        self.log.sync()
        return self.log.last_seq, export_state(self), self.log.size

    def trim_log(self, offset: int) -> None:
        """Keep only the log's records from byte `offset` on (after a checkpoint was written)."""
        self.log.compact(offset)

    def close(self) -> None:
        """fsync the log, flush K/V and release the directory lock."""
        self.log.close()
        self._kv_file().flush()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def __enter__(self) -> DurableSequenceManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
