"""Thread safety: many threads hammer one LockedManager; afterwards the pool must add up.

The oracle is bookkeeping the threads keep themselves: every successful creation (add,
fork child) and free of each id. Ids are shared between threads, so calls collide (a
duplicate add, a free of a sequence another thread just freed) and those raise; an id is
live at the end exactly when its successful creations outnumber its frees. Pages are
checked from the snapshot, independently of check_invariants: each in one state, ref
counts equal block-table membership, FREE pages empty and unowned. The GIL switch interval
is cut to 10 microseconds so that threads interleave inside operations.
"""

from __future__ import annotations

import random
import sys
import threading
from collections import Counter

import numpy as np
import pytest

from pagedkv import (
    CacheConfig,
    KVCachePool,
    OutOfPagesError,
    PageState,
    SequenceManager,
    UnknownSequenceError,
)
from pagedkv.service import DurableSequenceManager, recover
from pagedkv.service.concurrency import CoarseLock, LockedManager, ReadWriteLock

CONFIG = CacheConfig(num_pages=48, page_size=4, num_layers=1, num_kv_heads=1, head_dim=2)
IDS = [f"s{i}" for i in range(24)]
EXPECTED_ERRORS = (OutOfPagesError, UnknownSequenceError, ValueError)


@pytest.fixture(autouse=True)
def fast_thread_switching():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


def _worker(
    locked: LockedManager, seed: int, ops: int, created: Counter, freed: Counter, errors: list
) -> None:
    rng = random.Random(seed)
    shared = [rng.randrange(4) for _ in range(8)]
    for _ in range(ops):
        seq_id, r = rng.choice(IDS), rng.random()
        try:
            if r < 0.3:
                prompt = shared[: rng.randrange(9)] + [rng.randrange(4) for _ in range(rng.randrange(1, 6))]
                with locked.exclusive() as m:
                    m.add(seq_id, prompt)
                created[seq_id] += 1
            elif r < 0.6:
                with locked.exclusive() as m:
                    m.append_slot(seq_id, rng.randrange(4))
            elif r < 0.7:
                child = rng.choice(IDS)
                with locked.exclusive() as m:
                    m.fork(seq_id, child)
                created[child] += 1
            elif r < 0.85:
                with locked.exclusive() as m:
                    m.free(seq_id)
                freed[seq_id] += 1
            elif r < 0.95:
                seq = locked.sequence(seq_id)  # a consistent copy, even while others write
                assert len(seq.block_table) == -(-seq.num_tokens // CONFIG.page_size)
            else:
                locked.snapshot()
        except EXPECTED_ERRORS:
            pass
        except Exception as exc:  # anything else is a race the lock failed to prevent
            errors.append(repr(exc))


def _hammer(locked: LockedManager, seed: int, threads: int = 6, ops: int = 400) -> tuple[Counter, Counter]:
    # Each thread counts in its own Counters (`c[k] += 1` is not atomic across threads).
    tallies = [(Counter(), Counter(), []) for _ in range(threads)]
    workers = [
        threading.Thread(target=_worker, args=(locked, seed * 100 + i, ops, *tallies[i]))
        for i in range(threads)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert [e for _, _, errors in tallies for e in errors] == []
    return sum((c for c, _, _ in tallies), Counter()), sum((f for _, f, _ in tallies), Counter())


def assert_pool_adds_up(locked: LockedManager, created: Counter, freed: Counter) -> None:
    locked.check_invariants()
    snap = locked.snapshot()
    live = {s for s in IDS if created[s] - freed[s] == 1}
    assert all(created[s] - freed[s] in (0, 1) for s in IDS)
    assert set(snap.seq_ids) == live
    holders = np.zeros(snap.num_pages, dtype=int)
    for table in snap.block_tables.values():
        assert len(set(table)) == len(table)
        holders[list(table)] += 1
    assert np.array_equal(snap.ref_count, holders)  # no page lost, none held without a count
    states = snap.state
    assert np.all(np.isin(states, [PageState.FREE, PageState.ACTIVE, PageState.CACHED]))
    assert np.all((holders > 0) == (states == PageState.ACTIVE))
    assert np.all(snap.fill[states == PageState.FREE] == 0)
    assert np.count_nonzero(states == PageState.CACHED) == np.count_nonzero(snap.lru_rank >= 0)


@pytest.mark.parametrize("design", [CoarseLock, ReadWriteLock])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_threads_hammering_one_manager_leave_a_consistent_pool(design, seed):
    locked = LockedManager(SequenceManager(KVCachePool(CONFIG)), design())
    created, freed = _hammer(locked, seed)
    assert sum(created.values()) > 50 and sum(freed.values()) > 50  # the run did real work
    assert_pool_adds_up(locked, created, freed)


@pytest.mark.parametrize("seed", [4, 5])
def test_concurrent_durable_manager_logs_in_memory_order(tmp_path, seed):
    """Under threads, the log's record order must be the order operations hit memory:
    recovery replays it to the very same state."""
    manager = DurableSequenceManager.create(tmp_path / "s", CONFIG, "never")
    locked = LockedManager(manager)
    created, freed = _hammer(locked, seed)
    assert_pool_adds_up(locked, created, freed)
    snap = locked.snapshot()
    manager.close()
    recovered = recover(tmp_path / "s")
    assert recovered.snapshot() == snap
    recovered.close()


def test_read_write_lock_shares_reads_and_excludes_writes():
    lock = ReadWriteLock()
    reading, release_reader, writer_in = threading.Event(), threading.Event(), threading.Event()

    def reader():
        with lock.read():
            reading.set()
            release_reader.wait(5)

    def writer():
        with lock.write():
            writer_in.set()

    t = threading.Thread(target=reader)
    t.start()
    assert reading.wait(5)
    second = threading.Event()
    threading.Thread(target=lambda: (lock.read().__enter__(), second.set())).start()
    assert second.wait(5)  # a second reader got in while the first holds the lock
    w = threading.Thread(target=writer)
    w.start()
    assert not writer_in.wait(0.2)  # readers hold it: the writer waits
    release_reader.set()
    t.join()


def test_write_lock_is_reentrant_and_lets_its_owner_read():
    lock = ReadWriteLock()
    with lock.write():
        with lock.write():
            with lock.read():
                pass
    # Released completely: a writer in another thread gets in at once.
    got_in = threading.Event()

    def other_writer():
        with lock.write():
            got_in.set()

    threading.Thread(target=other_writer, daemon=True).start()
    assert got_in.wait(5), "the write lock was still held"


def test_nested_reads_go_through_while_a_writer_waits():
    """A reader that reads again (a scrape reading counts under its own read) must not queue
    behind a writer that arrived in between: the writer waits for it, it would wait for the
    writer, and both would hang."""
    lock = ReadWriteLock()
    outer, writer_queued, nested_done, writer_in = (threading.Event() for _ in range(4))

    def reader():
        with lock.read():
            outer.set()
            assert writer_queued.wait(5)
            with lock.read():
                with lock.read():
                    nested_done.set()

    def writer():
        with lock.write():
            writer_in.set()

    r = threading.Thread(target=reader, daemon=True)
    r.start()
    assert outer.wait(5)
    w = threading.Thread(target=writer, daemon=True)
    w.start()
    while not lock._waiting_writers:  # the writer has queued behind the reader
        pass
    assert not writer_in.is_set()
    writer_queued.set()
    assert nested_done.wait(5), "the nested read queued behind the waiting writer: deadlock"
    r.join(5)
    assert writer_in.wait(5)  # and the writer got in once the reader left


def test_a_waiting_writer_holds_back_new_readers():
    lock = ReadWriteLock()
    holding, release = threading.Event(), threading.Event()
    order = []

    def first_reader():
        with lock.read():
            holding.set()
            release.wait(5)

    def writer():
        with lock.write():
            order.append("writer")

    def late_reader():
        with lock.read():
            order.append("late reader")

    threading.Thread(target=first_reader).start()
    assert holding.wait(5)
    w = threading.Thread(target=writer)
    w.start()
    while not lock._waiting_writers:  # the writer is queued
        pass
    r = threading.Thread(target=late_reader)
    r.start()
    release.set()
    w.join(5)
    r.join(5)
    assert order == ["writer", "late reader"]


def test_reads_return_copies():
    locked = LockedManager(SequenceManager(KVCachePool(CONFIG)))
    with locked.exclusive() as m:
        m.add("a", [1, 2, 3, 4, 5])
    seq = locked.sequence("a")
    seq.token_ids.append(9)
    seq.block_table.append(47)
    assert locked.sequence("a").token_ids == [1, 2, 3, 4, 5]
    assert locked.block_table("a") == [0, 1]
    with pytest.raises(TypeError, match="manager"):
        LockedManager(KVCachePool(CONFIG))


@pytest.mark.slow
def test_bench_threads_quick_run_measures_both_designs_at_every_thread_count(tmp_path):
    from pagedkv.bench import threads

    report = threads.run(quick=True)
    assert set(report.data) == {
        f"{design}/{mix}/{n}"
        for design in ("coarse", "rwlock")
        for mix in threads.MIXES
        for n in (1, 2, 4, 8)
    }
    assert all(rate > 0 for rate in report.data.values())  # each run ended with check_invariants()
    threads.figure(report).savefig(tmp_path / "threads.png")
    assert (tmp_path / "threads.png").stat().st_size > 0


def test_recorded_thread_runs_cover_every_case_and_print_their_ranges():
    """The runs notebook 07b prints (pagedkv/data/threads_runs.json): every case the benchmark
    measures, no hand-off at 1 thread (one thread never hands off), and the table's ranges are
    each case's lowest and highest over the runs, worked out here by hand for one case."""
    from pagedkv.bench import threads

    runs = threads.recorded_runs()
    cases = {(d, m, n) for d in threads.DESIGNS for m in threads.MIXES for n in (1, 2, 4, 8)}
    assert len(runs) == 3 and all(set(run) == cases for run in runs)
    assert all(run[d, m, 1][1] == 0 for run in runs for d in threads.DESIGNS for m in threads.MIXES)
    rates = sorted(run["coarse", "write-heavy", 8][0] for run in runs)
    handoffs = sorted(run["coarse", "write-heavy", 8][1] for run in runs)
    assert threads.spread(runs, "coarse", "write-heavy", 8, 0) == (rates[0], rates[-1])
    lines = threads.runs_table(runs).splitlines()
    row = next(line for line in lines if line.split()[:2] == ["write-heavy", "8"])
    assert f"{round(rates[0], -2):,}\u2013{round(rates[-1], -2):,}" in row
    assert f"{handoffs[0]}\u2013{handoffs[-1]}" in row


def test_leads_names_the_lock_whose_range_lies_wholly_above_and_the_gap():
    """`leads` keeps only cases where one lock's lowest exceeds the other's highest, naming
    that lock and the gap between the nearest ends in % of the lower; overlaps are left out."""
    from pagedkv.bench import threads

    def run(coarse: int, rwlock: int) -> dict:
        return {
            ("coarse", "read-heavy", 1): (coarse, 0),
            ("rwlock", "read-heavy", 1): (rwlock, 0),
            ("coarse", "read-heavy", 2): (100, 5),
            ("rwlock", "read-heavy", 2): (100, 1),
        }

    runs = [run(110, 90), run(120, 100)]  # 1 thread: coarse 110-120 over rwlock 90-100
    assert threads.leads(runs) == [("read-heavy", 1, "coarse", 10.0)]
    assert threads.leads([run(90, 110), run(100, 120)]) == [("read-heavy", 1, "rwlock", 10.0)]
    assert threads.leads([run(100, 95), run(90, 105)]) == []  # 90-100 and 95-105 overlap
