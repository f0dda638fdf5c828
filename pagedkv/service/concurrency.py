"""Thread safety: one lock around the manager and its pool, and the alternative it beat.

What is shared. A `SequenceManager` and its `KVCachePool` hold one web of state: the
sequences and their block tables, every page's state / ref count / tokens / hash, the FREE
heap, the eviction order, the prefix index, the counters, the logical clock, the K/V store
and, for a `DurableSequenceManager`, the log file. Every operation touches the global parts:
each one ticks the clock; `add` walks the index, revives pages out of the eviction order and
pops the FREE heap; `free` pushes pages back onto both. The core's mutators change several
structures in one call and assume nobody else runs meanwhile.

The design kept: `LockedManager`, one re-entrant lock (`CoarseLock`).
- It protects all of the state above, K/V included, and the WAL: an operation's record is
  written, and the operation applied, under the same hold, so log order is memory order.
- Changes happen only inside `exclusive()`, which holds the lock across a whole request:
  the manager's operations *and* the K/V computation that must follow them (admit +
  prefill, append + decode step, through `TinyLM.forward`). A page is indexed the moment
  it fills (sequence.py), so a lock released between an `append_slot` and its forward pass
  would let another thread's `add` hit a page whose K/V are not written yet. That is why
  the wrapper has no per-call write methods: each would release the lock at that point.
- Reads (`snapshot`, `sequence`, `block_table`, `counts`, `check_invariants`) hold it for
  their whole duration and return copies. Reads may nest (a scrape reading counts under
  its own read): a thread that holds a read never queues for another.
- Lock order: this lock first, then the locks inside prometheus_client's metric objects (a
  histogram observed while holding it; a scrape takes it inside the registry's collect,
  which holds no registry lock while collectors run). Nothing takes them the other way round.

Why not per-page locks plus a read-write lock on the eviction structure? A wrapper can only
lock around whole public operations — the pool's mutators are not built to be interleaved —
and since every operation touches the clock, the FREE heap or the eviction order, every
operation would still need the global lock: per-page locks would only add acquisitions. The
one finer design a wrapper *can* implement is a read-write lock (`ReadWriteLock`): reads
share, writes exclude. `python -m pagedkv bench threads` measures both at 1, 2, 4 and 8
threads (notebook 07b prints three recorded runs): neither gains with more threads that you can count on,
and on a shared machine their operations/s swing from run to run enough to put either one
ahead. What reproduces is the hand-off count (the benchmark counts them): on the write-heavy
mix the read-write lock changes threads several times less often, not because writes share
(they never do) but because the thread that released it still holds the GIL and usually
takes it again, which is less fair to the other threads. The work is pure Python, so the GIL
runs one thread at a time anyway and shared reads gain no parallelism, while a read-write
lock built from a Condition costs several lock operations per acquisition. No measured gain
is a reason for the more complex lock. (Each
write hold also ends by publishing `counts()`, whose token usage reads every page: in the
bookkeeping-only benchmark that, not the lock, is most of a write's time.)

Reads that must never wait — a liveness probe, a metrics scrape — do not take the lock at
all: every `exclusive()` hold ends by publishing a fresh `counts()` dict (`published`), a
new object each time, so a reader sees one whole instant, at most one request old.

vLLM sidesteps the question the same way: one engine-core loop owns the KV cache manager
and requests reach it through a queue; its frontend reads stats the engine core published.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterator
from contextlib import contextmanager

from pagedkv.core.observe.snapshot import PoolSnapshot
from pagedkv.core.plumbing.validation import check_instance
from pagedkv.core.sequence import Sequence, SequenceManager
from pagedkv.service.limits import ShuttingDownError


class CoarseLock:
    """One re-entrant mutex for reads and writes alike."""

    def __init__(self) -> None:
        self._lock = threading.RLock()

    def read(self) -> threading.RLock:
        return self._lock

    write = read


class ReadWriteLock:
    """Many readers or one writer; a waiting writer holds back new readers (no starvation).

    The writer may re-enter (write or read) from its own thread, and a reader may read
    again; a reader must not ask to write."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0  # threads holding a read
        self._writer: int | None = None  # thread id of the writer
        self._depth = 0  # re-entries of the writer
        self._waiting_writers = 0
        self._local = threading.local()  # .reads: this thread's nested reads

    @contextmanager
    def read(self) -> Iterator[None]:
        held = getattr(self._local, "reads", 0)
        if held or self._writer == threading.get_ident():
            # Already inside: queuing behind a waiting writer, who waits for this very
            # thread to leave, would hang both.
            self._local.reads = held + 1
            try:
                yield
            finally:
                self._local.reads = held
            return
        with self._cond:
            while self._writer is not None or self._waiting_writers:
                self._cond.wait()
            self._readers += 1
        self._local.reads = 1
        try:
            yield
        finally:
            self._local.reads = 0
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        me = threading.get_ident()
        with self._cond:
            if self._writer == me:
                self._depth += 1
            else:
                self._waiting_writers += 1
                while self._writer is not None or self._readers:
                    self._cond.wait()
                self._waiting_writers -= 1
                self._writer, self._depth = me, 1
        try:
            yield
        finally:
            with self._cond:
                self._depth -= 1
                if not self._depth:
                    self._writer = None
                    self._cond.notify_all()


class LockedManager:
    """A SequenceManager (plain or durable) and its pool, shared by many threads.

    Change it inside `exclusive()` only, computing K/V before leaving (see the module
    docstring); read it through the methods below, which return copies."""

    def __init__(self, manager: SequenceManager, lock: CoarseLock | ReadWriteLock | None = None) -> None:
        check_instance("manager", manager, SequenceManager)
        self._manager = manager
        self.pool = manager.pool  # read its attributes only through this wrapper's methods
        self.lock = lock if lock is not None else CoarseLock()
        # counts() as of the end of the last exclusive() hold: read it without the lock.
        self.published: dict[str, float] = self.counts()
        self.refusing: str | None = None  # set by refuse(): why exclusive() says no

    def refuse(self, reason: str | None) -> None:
        """From now on, `exclusive()` raises ShuttingDownError(reason) once it gets the lock
        (requests waiting for it leave at once instead of running); None accepts again."""
        self.refusing = reason

    @contextmanager
    def exclusive(self) -> Iterator[SequenceManager]:
        """Hold the write lock for one whole request; yields the bare manager. On the way
        out, publishes the counts (`published`). Raises ShuttingDownError after `refuse`."""
        with self.lock.write():
            if self.refusing is not None:
                raise ShuttingDownError(self.refusing)
            try:
                yield self._manager
            finally:
                self.published = self.counts()

    # ---- reads (read lock); results are copies, safe to use after the lock is released --

    def sequence(self, seq_id: Hashable) -> Sequence:
        """A copy of the live sequence (raises UnknownSequenceError)."""
        with self.lock.read():
            seq = self._manager.get(seq_id)
            return seq.copy()

    def block_table(self, seq_id: Hashable) -> list[int]:
        with self.lock.read():
            return self._manager.block_table(seq_id)

    def __contains__(self, seq_id: object) -> bool:
        with self.lock.read():
            return seq_id in self._manager

    def __len__(self) -> int:
        with self.lock.read():
            return len(self._manager)

    def snapshot(self) -> PoolSnapshot:
        with self.lock.read():
            return self._manager.snapshot()

    def check_invariants(self) -> None:
        with self.lock.read():
            self._manager.check_invariants()

    def counts(self) -> dict[str, float]:
        """Page counts, usage, counters, clock and live sequences, read at one instant."""
        pool = self.pool
        with self.lock.read():
            return {
                "num_free_pages": pool.num_free_pages,
                "num_cached_pages": pool.num_cached_pages,
                "num_active_pages": pool.num_active_pages,
                "usage": pool.usage,
                "token_usage": pool.token_usage,
                "clock": pool.clock,
                "num_sequences": len(self._manager),
                **pool.stats.as_dict(),
            }

    def __repr__(self) -> str:
        return f"LockedManager({type(self.lock).__name__}, {self.pool!r})"
