"""Write-ahead log: record format, fsync policies, log-before-apply, crash recovery.

The oracle everywhere is the plain in-memory SequenceManager: driven by the same calls (or
the same seeded workload, stopped after the same number of logged operations), its state
is what recovery must rebuild — snapshot (page states, ref counts, LRU ranks, index,
clock, counters, block tables, COW record), sequences, and K/V of every computed token.
"""

from __future__ import annotations

import os
import shutil
import signal
import struct
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pagedkv import CacheConfig, KVCachePool, PageState, SequenceManager
from pagedkv.model.tinylm import TinyLM
from pagedkv.service import (
    DurableSequenceManager,
    FsyncPolicy,
    WALCorruptionError,
    open_store,
    read_log,
    recover,
)
from pagedkv.service.checkpoint import read_checkpoint
from pagedkv.service.wal import MAGIC, WriteAheadLog, encode_record
from pagedkv.service.workload import (
    NUM_PAGES,
    PAGE_SIZE,
    damage_record,
    reference,
    run_in_subprocess,
    run_workload,
    step_of_record,
    workload_command,
    workload_config,
)

from .hypothesis_profiles import examples


def _sequences(manager: SequenceManager) -> dict:
    return {
        sid: (
            s.token_ids,
            s.block_table,
            s.num_prompt_tokens,
            s.num_cached_tokens,
            s.num_computed_tokens,
            s.extra_key,
            s.parent,
        )
        for sid, s in manager.sequences.items()
    }


def assert_same_state(recovered: SequenceManager, expected: SequenceManager, kv: bool = True) -> None:
    recovered.check_invariants()
    assert recovered.snapshot() == expected.snapshot()
    assert _sequences(recovered) == _sequences(expected)
    assert recovered.pool.eviction.order() == expected.pool.eviction.order()
    if not kv:
        return
    got, want, size = recovered.pool.kv_cache, expected.pool.kv_cache, recovered.page_size
    for seq in expected.sequences.values():  # K/V of every computed token
        for pos in range(seq.num_computed_tokens):
            page, offset = seq.block_table[pos // size], pos % size
            assert np.array_equal(got[:, :, page, offset], want[:, :, page, offset]), (
                seq.seq_id,
                pos,
            )
    cached = [p for p in range(expected.pool.num_pages) if expected.pool.page(p).state is PageState.CACHED]
    assert np.array_equal(got[:, :, cached], want[:, :, cached])


# ---- the log file ------------------------------------------------------------------------


def test_records_round_trip_and_fsync_policies(tmp_path):
    for policy, fsyncs in (("always", 10), ("batch 4", 2), ("never", 0)):
        log = WriteAheadLog.create(tmp_path / f"{policy}.log", 1, policy)
        for i in range(10):
            assert log.append({"op": "x", "i": i}) == i + 1
        assert log.fsyncs == fsyncs
        log.close()
        records, end = read_log(log.path)
        assert [r.payload["i"] for r in records] == list(range(10))
        assert [r.seq for r in records] == list(range(1, 11))
        assert end == os.path.getsize(log.path)
        # The layout the docstring promises: header, then crc | length | seq | JSON.
        data = log.path.read_bytes()
        assert data[:8] == MAGIC
        crc, length, seq = struct.unpack_from("<IIQ", data, 8)
        assert (length, seq) == (len(b'{"op":"x","i":0}'), 1)


@pytest.mark.parametrize("text", ["sometimes", "batch", "batch 0", "batch -1", "batch x", ""])
def test_fsync_policy_rejects_bad_text(text):
    with pytest.raises(ValueError, match="fsync"):
        FsyncPolicy.parse(text)


def test_fsync_policy_parses():
    assert FsyncPolicy.parse("batch 8") == FsyncPolicy("batch", 8) == FsyncPolicy.parse("batch:8")
    assert str(FsyncPolicy.parse("never")) == "never"


# ---- log before apply: the durable manager behaves exactly like the plain one ------------

IDS = st.sampled_from(["a", "b", "c", 7, "", True, 2.5])
TOKENS = st.one_of(
    st.lists(st.integers(0, 3), min_size=1, max_size=11),
    st.sampled_from([[], [-1], "abc", [1.5], None]),
)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), IDS, TOKENS, st.sampled_from([None, "salt", 3, b"k", 1.5])),
        st.tuples(st.just("append_slot"), IDS, st.sampled_from([0, 1, 2, -1, "x", 2**64])),
        st.tuples(st.just("fork"), IDS, IDS),
        st.tuples(st.just("free"), IDS),
        st.tuples(st.just("set_computed"), IDS, st.sampled_from([0, 1, 3, -1, 10**6, "x"])),
        st.tuples(st.just("reset_prefix_cache")),
    ),
    max_size=40,
)


def _call(target, op: tuple):
    method = getattr(
        target.pool
        if op[0] == "reset_prefix_cache" and not isinstance(target, DurableSequenceManager)
        else target,
        op[0],
    )
    try:
        return ("ok", method(*op[1:]))
    except Exception as exc:  # the exception type is part of the behaviour compared
        return ("raised", type(exc))


@settings(
    max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS, caching=st.booleans())
def test_durable_manager_matches_plain_and_logs_only_successes(tmp_path_factory, ops, caching):
    config = CacheConfig(
        num_pages=8,
        page_size=2,
        num_layers=1,
        num_kv_heads=1,
        head_dim=2,
        enable_prefix_caching=caching,
    )
    directory = tmp_path_factory.mktemp("store")
    plain = SequenceManager(KVCachePool(config))
    durable = DurableSequenceManager.create(directory, config, "never")
    successes = 0
    for op in ops:
        want, got = _call(plain, op), _call(durable, op)
        assert got == want, op
        if want[0] == "ok" and not (op[0] == "reset_prefix_cache" and want[1] is False):
            successes += 1
        durable.check_invariants()
    assert durable.snapshot() == plain.snapshot()
    assert durable.last_seq == successes  # one record per successful operation, none for failures
    durable.close()
    assert_same_state(recover(directory), plain, kv=False)


# ---- crashes: SIGKILL at random moments, over seeds and fsync policies -------------------


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10))
def test_sigkill_at_a_random_moment_recovers_the_durable_prefix(tmp_path, seed):
    rng = np.random.default_rng(1000 + seed)
    fsync = ["never", "batch 8", "always"][seed % 3]
    checkpoint_every = [0, 25][seed % 2]
    directory = tmp_path / "store"
    cmd = workload_command(directory, seed, "--fsync", fsync, "--checkpoint-every", str(checkpoint_every))
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as child:
        try:
            assert child.stdout.readline().strip() == "ready"
            time.sleep(float(rng.uniform(0.1, 0.5)))
        finally:
            child.send_signal(signal.SIGKILL)  # never leave the endless workload running
        assert child.wait(10) == -signal.SIGKILL
    manager = recover(directory)
    n = manager.last_seq
    assert n > 0
    assert_same_state(manager, reference(seed, n))
    manager.close()


@pytest.mark.slow
@pytest.mark.parametrize("die_at, torn_bytes", [(40, 1), (97, 11), (150, 23)])
def test_a_record_torn_by_the_crash_is_dropped(tmp_path, die_at, torn_bytes):
    assert (
        run_in_subprocess(
            tmp_path / "s",
            5,
            "--die-at",
            str(die_at),
            "--torn-bytes",
            str(torn_bytes),
            "--checkpoint-every",
            "30",
        )
        == -signal.SIGKILL
    )
    manager = recover(tmp_path / "s")
    assert manager.last_seq == die_at - 1
    assert manager.recovery["torn_bytes"] == torn_bytes
    assert (manager.recovery["checkpoint_seq"] > 0) == (die_at > 40)  # replay starts at a checkpoint
    assert_same_state(manager, reference(5, die_at - 1))
    # Recovery cut the torn bytes off, so the log continues cleanly.
    model = TinyLM(seed=0)
    manager.add("after", [1, 2, 3])
    model.forward(manager, ["after"])
    manager.close()
    again = recover(tmp_path / "s")
    assert again.recovery["torn_bytes"] == 0 and "after" in again.sequences
    again.close()


@pytest.mark.slow
def test_step_of_record_names_the_step_a_child_of_that_many_steps_ends_in(tmp_path):
    """Notebook 07 prints the step its child died in: a child stopped after 63 steps has
    written exactly the records of those steps, so its last record is step 63's."""
    assert run_in_subprocess(tmp_path / "s", 7, "--steps", "63", "--fsync", "never") == 0
    records, _ = read_log(tmp_path / "s" / "wal.log")
    last = records[-1].seq
    assert step_of_record(7, last) == 63 and step_of_record(7, last + 1) == 64
    assert step_of_record(7, 150) == 64  # the notebook's child, killed writing record 150


# ---- damaged logs: truncation and corruption at random offsets ---------------------------


@pytest.fixture(scope="module")
def finished_store(tmp_path_factory):
    """A store after 300 workload steps (no checkpoint), its records, and the reference
    state after every prefix of them."""
    directory = tmp_path_factory.mktemp("finished") / "s"
    model = TinyLM(seed=0)
    with DurableSequenceManager.create(directory, workload_config(model), "never") as manager:
        run_workload(manager, model, seed=11, steps=300)
    records, _ = read_log(directory / "wal.log")
    return directory, records


def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


def test_truncation_at_random_offsets_keeps_every_whole_record(finished_store, tmp_path):
    directory, records = finished_store
    size = os.path.getsize(directory / "wal.log")
    rng = np.random.default_rng(3)
    offsets = sorted({8, size - 1, *rng.integers(8, size, 12).tolist()})
    for k, offset in enumerate(offsets):
        store = _copy(directory, tmp_path / f"t{k}")
        os.truncate(store / "wal.log", offset)
        whole = sum(r.end <= offset for r in records)
        manager = recover(store)
        assert manager.last_seq == whole
        assert manager.recovery["torn_bytes"] == offset - (records[whole - 1].end if whole else 8)
        # K/V on disk are from later than the cut (as after a power loss that kept kv.bin
        # but not the log's tail): pages whose K/V changed since must not be served.
        _assert_serves_only_right_kv(manager, reference(11, whole))
        manager.close()


def _assert_serves_only_right_kv(recovered, expected) -> None:
    """Pages recovery dropped aside, the state is the reference's; and every K/V it would
    serve (computed tokens, CACHED pages) equals the reference's."""
    recovered.check_invariants()
    failed = set(recovered.recovery["kv_checksum_failed_pages"])
    got, want = recovered.snapshot(), expected.snapshot()
    kept = [p for p in range(want.num_pages) if p not in failed]
    assert np.array_equal(got.state[kept], want.state[kept])
    assert all(got.state[p] != PageState.CACHED for p in failed)
    assert list(recovered.sequences) == list(expected.sequences)
    for sid, seq in recovered.sequences.items():
        assert seq.token_ids == expected.sequences[sid].token_ids
        assert seq.block_table == expected.sequences[sid].block_table
        assert seq.num_computed_tokens <= expected.sequences[sid].num_computed_tokens
    kv, ref, size = recovered.pool.kv_cache, expected.pool.kv_cache, recovered.page_size
    for seq in recovered.sequences.values():
        for pos in range(seq.num_computed_tokens):
            page, offset = seq.block_table[pos // size], pos % size
            assert np.array_equal(kv[:, :, page, offset], ref[:, :, page, offset]), (seq.seq_id, pos)
    cached = [p for p in range(recovered.pool.num_pages) if recovered.pool.page(p).state is PageState.CACHED]
    assert np.array_equal(kv[:, :, cached], ref[:, :, cached])


def test_corruption_in_the_middle_names_its_offset(finished_store, tmp_path):
    directory, records = finished_store
    rng = np.random.default_rng(4)
    for k in range(12):
        victim = records[int(rng.integers(0, len(records) - 1))]  # never the last record
        offset = int(rng.integers(victim.offset, victim.end))
        store = _copy(directory, tmp_path / f"c{k}")
        with open(store / "wal.log", "r+b") as f:
            f.seek(offset)
            byte = f.read(1)
            f.seek(offset)
            f.write(bytes([byte[0] ^ 0xFF]))
        with pytest.raises(WALCorruptionError) as info:
            recover(store)
        assert info.value.offset == victim.offset
        assert f"offset {victim.offset}" in str(info.value)
        # The failed recovery changed nothing and released the store.
        assert (store / "wal.log").read_bytes() != (directory / "wal.log").read_bytes()
        with pytest.raises(WALCorruptionError):
            recover(store)


def test_damage_record_changes_one_byte_of_one_record_in_a_copy(finished_store, tmp_path):
    """Notebooks 07 and 07b damage record 123 with `damage_record`: the original store is
    untouched, the copy differs in one byte inside that record's JSON, and recovery of the
    copy stops at that record's offset."""
    directory, records = finished_store
    original = (directory / "wal.log").read_bytes()
    victim = records[len(records) // 2]
    copy = damage_record(directory, tmp_path / "damaged", victim.offset)
    damaged = (copy / "wal.log").read_bytes()
    assert (directory / "wal.log").read_bytes() == original
    diff = [i for i, (a, b) in enumerate(zip(original, damaged)) if a != b]
    assert len(damaged) == len(original) and diff == [victim.offset + 20] and diff[0] < victim.end
    with pytest.raises(WALCorruptionError) as info:
        recover(copy)
    assert info.value.offset == victim.offset


def test_corruption_of_the_last_record_is_a_torn_tail(finished_store, tmp_path):
    directory, records = finished_store
    store = _copy(directory, tmp_path / "s")
    with open(store / "wal.log", "r+b") as f:
        f.seek(records[-1].end - 2)
        f.write(b"\x00")
    manager = recover(store)
    assert manager.last_seq == len(records) - 1
    assert_same_state(manager, reference(11, len(records) - 1), kv=False)
    manager.close()


def test_bad_header_and_bad_sequence_numbers_are_errors(finished_store, tmp_path):
    directory, records = finished_store
    store = _copy(directory, tmp_path / "h")
    data = (store / "wal.log").read_bytes()
    (store / "wal.log").write_bytes(b"XXXXXXX\n" + data[8:])
    with pytest.raises(WALCorruptionError, match="offset 0"):
        recover(store)
    store = _copy(directory, tmp_path / "gap")  # a valid record whose number skips ahead
    with open(store / "wal.log", "ab") as f:
        f.write(encode_record(records[-1].seq + 2, {"op": "free", "seq_id": "x", "clock": 0}))
    with pytest.raises(WALCorruptionError, match="sequence number"):
        recover(store)
    # Intact records that the code cannot reproduce: the log and the code disagree.
    nxt = records[-1].seq + 1
    for k, (payload, reason) in enumerate(
        [
            ({"op": "free", "seq_id": "nobody", "clock": 0}, "cannot be replayed"),
            (
                {
                    "op": "add",
                    "seq_id": "new",
                    "tokens": [1],
                    "extra_key": None,
                    "hits": [],
                    "alloc": [999],
                    "evict": [],
                    "clock": 0,
                },
                "replaying record",
            ),
        ]
    ):
        store = _copy(directory, tmp_path / f"disagree{k}")
        size = os.path.getsize(store / "wal.log")
        with open(store / "wal.log", "ab") as f:
            f.write(encode_record(nxt, payload))
        with pytest.raises(WALCorruptionError, match=reason) as info:
            recover(store)
        assert info.value.offset == size


# ---- checkpoints ---------------------------------------------------------------------------


def test_checkpoint_compacts_and_recovery_resumes_from_it(tmp_path):
    model = TinyLM(seed=0)
    manager = DurableSequenceManager.create(tmp_path / "s", workload_config(model), "batch 16")
    run_workload(manager, model, seed=2, steps=120)
    seq = manager.checkpoint()
    assert seq == manager.last_seq > 0
    assert (tmp_path / "s" / "wal.log").read_bytes() == MAGIC  # every record is in the checkpoint
    manager.close()
    recovered = recover(tmp_path / "s")
    assert recovered.recovery == {
        "checkpoint_seq": seq,
        "records_replayed": 0,
        "torn_bytes": 0,
        "discarded_records": 0,
        "discarded_bytes": 0,
        "dropped_cached_pages": [],
        "kv_checksum_failed_pages": [],
    }
    assert_same_state(recovered, reference(2, seq))
    recovered.close()


def test_crash_between_checkpoint_and_log_reset_skips_covered_records(tmp_path):
    model = TinyLM(seed=0)
    manager = DurableSequenceManager.create(tmp_path / "s", workload_config(model), "never")
    run_workload(manager, model, seed=8, steps=100)
    manager.log.sync()
    old_log = (tmp_path / "s" / "wal.log").read_bytes()
    seq = manager.checkpoint()
    manager.close()
    (tmp_path / "s" / "wal.log").write_bytes(old_log)  # the rename of the empty log never happened
    recovered = recover(tmp_path / "s")
    assert recovered.recovery["records_replayed"] == 0 and recovered.last_seq == seq
    assert_same_state(recovered, reference(8, seq))
    recovered.close()


def test_missing_records_after_a_checkpoint_are_an_error(tmp_path):
    model = TinyLM(seed=0)
    manager = DurableSequenceManager.create(tmp_path / "s", workload_config(model), "never")
    for seed in (9, 90, 91):  # three rounds, each ending with a checkpoint
        run_workload(manager, model, seed=seed, steps=40)
        for seq_id in list(manager.sequences):
            manager.free(seq_id)
        manager.checkpoint()
        if seed == 9:
            older = (tmp_path / "s" / "checkpoint.bin").read_bytes()
    run_workload(manager, model, seed=92, steps=10)
    manager.close()
    (tmp_path / "s" / "checkpoint.bin").write_bytes(older)
    with pytest.raises(WALCorruptionError, match="records are missing"):
        recover(tmp_path / "s")
    data = bytearray(older)
    data[-3] ^= 0x01
    (tmp_path / "s" / "checkpoint.bin").write_bytes(bytes(data))
    with pytest.raises(WALCorruptionError, match="checkpoint CRC"):
        recover(tmp_path / "s")


# ---- the store -----------------------------------------------------------------------------


def test_kv_live_in_the_file_and_survive_a_clean_restart(tmp_path):
    model = TinyLM(seed=0)
    config = workload_config(model)
    with DurableSequenceManager.create(tmp_path / "s", config, "always") as manager:
        assert isinstance(manager.pool.kv_cache, np.memmap)
        run_workload(manager, model, seed=4, steps=80)
        kv = np.array(manager.pool.kv_cache)
        snap = manager.snapshot()
    on_disk = np.fromfile(tmp_path / "s" / "kv.bin", dtype=config.dtype).reshape(config.kv_shape)
    assert np.array_equal(on_disk, kv)
    with open_store(tmp_path / "s", config) as reopened:
        assert reopened.snapshot() == snap
        assert_same_state(reopened, reference(4, reopened.last_seq))


def test_one_opener_at_a_time_and_config_must_match(tmp_path):
    config = CacheConfig(num_pages=8, page_size=2, num_layers=1, num_kv_heads=1, head_dim=2)
    first = DurableSequenceManager.create(tmp_path / "s", config, "never")
    with pytest.raises(RuntimeError, match="open in another"):
        recover(tmp_path / "s")
    with pytest.raises(FileExistsError):
        DurableSequenceManager.create(tmp_path / "s", config)
    first.close()
    with pytest.raises(ValueError, match="num_pages"):
        open_store(
            tmp_path / "s",
            CacheConfig(num_pages=16, page_size=2, num_layers=1, num_kv_heads=1, head_dim=2),
        )
    with pytest.raises(FileNotFoundError):
        recover(tmp_path / "nothing")
    recover(tmp_path / "s").close()  # the failed open released the lock


def test_a_copy_on_write_cut_off_by_the_crash_is_redone(tmp_path):
    """The crash lands after the record of a copy-on-write append, before the copy."""
    model = TinyLM(seed=0)
    config = workload_config(model)
    plain = SequenceManager(KVCachePool(config))
    with DurableSequenceManager.create(tmp_path / "s", config, "always") as durable:
        for manager in (plain, durable):
            manager.add("p", model.encode("abcdef"))  # 6 tokens: page 1 is half full
            model.forward(manager, ["p"])
            manager.fork("p", "c")
            manager.append_slot("c", 7)  # the shared half page is copied, then written
        src, dst = durable.cow_log[-1]
        assert dst not in durable.block_table("p")
    kv = np.memmap(tmp_path / "s" / "kv.bin", dtype=config.dtype, mode="r+", shape=config.kv_shape)
    kv[:, :, dst] = 0.0  # the copy never reached the file
    kv.flush()
    del kv
    recovered = recover(tmp_path / "s")
    assert_same_state(recovered, plain)
    assert np.array_equal(recovered.pool.kv_cache[:, :, dst, :2], plain.pool.kv_cache[:, :, src, :2])
    recovered.close()


def test_the_service_checkpoints_every_n_records(tmp_path):
    from pagedkv.service.engine import ServiceEngine

    engine = ServiceEngine(num_pages=16, page_size=4, wal=tmp_path / "s", fsync="never", checkpoint_every=5)
    engine.create(list(b"abcdefg"), "a")  # records 1-4: begin, add, computed, commit
    engine.generate("a", 3)  # records 5-12: begin, (append, computed) x 3, commit
    for _ in range(500):  # the background thread writes the checkpoint after this request
        if engine.checkpointer.count:
            break
        time.sleep(0.01)
    assert read_checkpoint_seq(tmp_path / "s") == 12
    assert read_log(tmp_path / "s" / "wal.log")[0] == []
    engine.create(list(b"xyz"), "b")  # records 13-16
    snap = engine.locked.snapshot()
    engine.close()
    with recover(tmp_path / "s") as recovered:
        assert recovered.recovery["checkpoint_seq"] == 12 and recovered.last_seq == 16
        assert recovered.snapshot() == snap


def read_checkpoint_seq(directory) -> int:
    return read_checkpoint(directory / "checkpoint.bin")[0]


# ---- the service after a crash between a token's record and its K/V ---------------------

_CRASH_AFTER_APPEND = """
import os, signal, sys
from pagedkv.service.engine import ServiceEngine
engine = ServiceEngine(num_pages=16, page_size=4, wal=sys.argv[1], fsync="never")
engine.create([104, 105, 106], "A")  # records add, computed (3 tokens)
with engine.locked.exclusive() as m:
    m.append_slot("A", 107)  # record append: page 0 fills and is indexed for prefix hits ...
os.kill(os.getpid(), signal.SIGKILL)  # ... and the process dies before its K/V are computed
"""


@pytest.mark.slow
@pytest.mark.parametrize("then", ["hit", "free, then hit", "generate"])
def test_the_service_computes_logged_tokens_before_serving(tmp_path, then):
    from pagedkv.service.engine import ServiceEngine

    child = subprocess.run([sys.executable, "-c", _CRASH_AFTER_APPEND, str(tmp_path / "s")])
    assert child.returncode == -signal.SIGKILL
    with recover(tmp_path / "s") as crashed:  # the log holds A's 4th token, K/V do not
        seq = crashed.get("A")
        assert (seq.num_tokens, seq.num_computed_tokens) == (4, 3)
    model, prompt = TinyLM.pretrained(), [104, 105, 106, 107]  # the service's model
    oracle = SequenceManager(KVCachePool(model.cache_config(16, 4)))  # the same calls, no crash
    oracle.add("A", prompt[:3])
    model.forward(oracle, ["A"])
    oracle.append_slot("A", prompt[3])
    model.forward(oracle, ["A"])
    engine = ServiceEngine(num_pages=16, page_size=4, wal=tmp_path / "s")
    a = engine.sequence("A")
    assert a["num_computed_tokens"] == 4
    page = a["block_table"][0]
    assert np.array_equal(engine.pool.kv_cache[:, :, page], oracle.pool.kv_cache[:, :, 0])
    if then == "generate":
        assert engine.generate("A", 3)["new_token_ids"] == model.generate_reference(prompt, 3)
    else:
        if then == "free, then hit":
            engine.free("A")  # page 0 turns CACHED: it must hold real K/V
        b = engine.create(prompt + [108], "B")
        assert b["num_cached_tokens"] == 4
        assert engine.generate("B", 3)["new_token_ids"] == model.generate_reference(prompt + [108], 3)
    engine.check()
    engine.close()


@pytest.mark.parametrize("policy", ["lru", "mru"])
def test_a_checkpoint_holds_the_release_order_and_recovery_restores_it(tmp_path, policy):
    """The oracle is the pool's own event stream: pages enter the release order when they
    turn CACHED and leave it when a prefix hit revives them or they are evicted."""
    model = TinyLM(seed=0)
    config = model.cache_config(NUM_PAGES, PAGE_SIZE, eviction_policy=policy)
    released: dict[int, None] = {}  # page id -> None, oldest release first

    def track(event) -> None:
        if event.kind == "cache":
            released[event.page_id] = None
        elif event.kind in ("prefix_hit", "evict"):
            released.pop(event.page_id, None)

    manager = DurableSequenceManager.create(tmp_path / "s", config, "never")
    manager.pool.add_listener(track)
    run_workload(manager, model, seed=3, steps=120)
    assert len(released) >= 3  # several CACHED pages, so the order means something
    order = manager.pool.eviction.order()
    manager.checkpoint()
    manager.close()
    state = read_checkpoint(tmp_path / "s" / "checkpoint.bin")[1]
    assert state["release_order"] == list(released)
    with recover(tmp_path / "s") as recovered:
        assert recovered.pool.eviction.order() == order


def test_a_malformed_crash_drill_setting_is_refused_by_name(tmp_path, monkeypatch):
    from pagedkv.service.wal import DIE_AFTER_ENV, WriteAheadLog

    monkeypatch.setenv(DIE_AFTER_ENV, "twenty")
    with pytest.raises(
        ValueError, match=r"\$PAGEDKV_DIE_AFTER_RECORD must be a record number \(digits\), got 'twenty'"
    ):
        WriteAheadLog.create(tmp_path / "wal.log")
