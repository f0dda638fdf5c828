"""Checkpoints off the request path: a background thread compacts the write-ahead log.

A checkpoint has three steps (`DurableSequenceManager.prepare_checkpoint`,
`write_checkpoint`, `trim_log`). Only the first and the last need the engine lock, and
both are short: the first copies the bookkeeping into plain lists (the metadata's
copy-on-write: later requests change the live structures, not the copy) and notes where
the log ends; the last rewrites the log keeping only the records written since (usually a
few). The slow part — encoding the state, fsync, rename — runs without the lock while
requests go on. A crash at any point leaves either the old checkpoint and the whole log,
or the new checkpoint and a log whose covered records recovery skips.

After each request the engine calls `poke()`; when the log has grown by `every` records
since the last checkpoint, the thread wakes up and writes one. No client request ever
waits for a checkpoint's disk writes.

PostgreSQL's checkpointer process plays the same part. Leaves out: incremental (delta)
checkpoints: each one holds the whole state.
"""

from __future__ import annotations

import logging
import threading

from pagedkv.core.plumbing.validation import check_int
from pagedkv.service.checkpoint import write_checkpoint
from pagedkv.service.concurrency import LockedManager
from pagedkv.service.durable import DurableSequenceManager

log = logging.getLogger("pagedkv.service")


class Checkpointer:
    """Writes a checkpoint in a daemon thread whenever `every` records have accumulated."""

    def __init__(self, durable: DurableSequenceManager, locked: LockedManager, every: int) -> None:
        self.durable, self.locked = durable, locked
        self.every = check_int("checkpoint_every", every, 1)
        covered = durable.recovery.get("checkpoint_seq", 0)
        assert isinstance(covered, int)  # recover() records an int
        self.checkpointed = covered  # record seq covered
        self.count = 0  # checkpoints written since start
        self._one_at_a_time = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="pagedkv-checkpointer", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        """Called after each request: wake the thread when the log has grown enough."""
        if self.durable.log.last_seq - self.checkpointed >= self.every:
            self._wake.set()

    def run(self) -> int:
        """Write a checkpoint now (in the caller's thread); returns the record seq it covers."""
        with self._one_at_a_time:
            with self.locked.exclusive():
                seq, state, offset = self.durable.prepare_checkpoint()
            write_checkpoint(self.durable.checkpoint_path, seq, state)
            with self.locked.exclusive():
                self.durable.trim_log(offset)
            self.checkpointed, self.count = seq, self.count + 1
            return seq

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stopping:
                return
            try:
                self.run()
            except Exception:  # a full disk: keep serving; the log just grows until fixed
                log.exception("background checkpoint failed")
