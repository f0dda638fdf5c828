"""Damaged stores, restarted with the real server: recover exactly what was acknowledged, or
refuse with one line naming the file.

One store is built by a real server (keyed creates, generates, forks, appends and frees, a
checkpoint in the middle, more operations after it), then stopped. The oracle is what the
server answered before it stopped: its `/snapshot` and the final state of each sequence.
Each case damages a copy of the store the way a disk, an operator or a crash could, then
starts `serve --wal` on it: either it serves and answers the acknowledged snapshot, or it
exits 3 (a file missing) / 4 (a file damaged) with exactly one line on stderr that names the
damaged file.

A second store is stopped by kill -9 right after its last answer (a checkpoint behind it,
keyed operations after): a garbage tail, a complete but never renamed checkpoint.bin.tmp and
a duplicated record in the middle of the log (refused naming the log and the byte offset)
are tried on it too.
"""

from __future__ import annotations

import shutil

import httpx
import numpy as np
import pytest

from pagedkv.service.serve import ServerProcess
from pagedkv.service.wal import read_log

# Real servers on 127.0.0.1: part of `make test`, not of `make test-fast`.
pytestmark = pytest.mark.slow

ARGS = ("--fsync", "never", "--num-pages", "128", "--page-size", "4")


@pytest.fixture(scope="module")
def acked(tmp_path_factory):
    """(store directory, the snapshot the server answered last)."""
    store = tmp_path_factory.mktemp("damage") / "store"
    with (
        ServerProcess("--wal", str(store), *ARGS) as server,
        httpx.Client(base_url=server.url, timeout=30) as c,
    ):
        for phase in ("before", "after"):  # the checkpoint comes between the two phases
            for k in range(3):
                s = f"{phase}-{k}"
                key = {"Idempotency-Key": f"create-{s}"}
                assert (
                    c.post(
                        "/sequences", json={"seq_id": s, "text": f"shared prefix {k}"}, headers=key
                    ).status_code
                    == 201
                )
                assert c.post(f"/sequences/{s}/generate", json={"max_new_tokens": 5}).status_code == 200
                assert c.post(f"/sequences/{s}/fork", json={"child_id": f"{s}-f"}).status_code == 201
                assert c.post(f"/sequences/{s}-f/append", json={"token_ids": [1, 2, 3]}).status_code == 200
            assert c.delete(f"/sequences/{phase}-0").status_code == 204
            if phase == "before":
                assert c.post("/checkpoint").status_code == 200
        snapshot = c.get("/snapshot").json()
        assert server.stop() == 0
    assert (store / "checkpoint.bin").is_file() and read_log(store / "wal.log")[0][0].seq > 1
    return store, snapshot


def _restart(store) -> tuple[int | None, dict | None, str]:
    """(exit code or None if it serves, its /snapshot if it serves, its stderr)."""
    server = ServerProcess("--wal", str(store), *ARGS, wait=False)
    try:
        server.wait()
    except RuntimeError:
        code = server.process.wait(30)
        log = server.log_tail()
        server.stop()
        return code, None, log
    with httpx.Client(base_url=server.url, timeout=30) as c:
        snapshot = c.get("/snapshot").json()
        assert c.get("/invariants").json() == {"ok": True}
    log = server.log_tail()
    assert server.stop() == 0
    return None, snapshot, log


def _copy(acked, tmp_path):
    store = tmp_path / "store"
    shutil.copytree(acked[0], store, ignore=shutil.ignore_patterns("lock"))
    return store


def _flip(path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x10
    path.write_bytes(bytes(data))


def _refused(result, code: int, name: str) -> None:
    exit_code, snapshot, log = result
    lines = [line for line in log.splitlines() if line.strip()]
    assert exit_code == code and snapshot is None, result
    assert len(lines) == 1 and name in lines[0], lines


def test_undamaged_copy_recovers_the_acknowledged_state(acked, tmp_path):
    assert _restart(_copy(acked, tmp_path))[:2] == (None, acked[1])


def test_checkpoint_deleted_is_refused_naming_it(acked, tmp_path):
    store = _copy(acked, tmp_path)
    (store / "checkpoint.bin").unlink()
    _refused(_restart(store), 3, "checkpoint.bin")


@pytest.mark.parametrize("where", ["magic", "crc", "seq", "middle", "last byte"])
def test_checkpoint_bit_flip_is_refused_naming_it(acked, tmp_path, where):
    store = _copy(acked, tmp_path)
    path = store / "checkpoint.bin"
    size = path.stat().st_size
    _flip(path, {"magic": 2, "crc": 9, "seq": 13, "middle": size // 2, "last byte": size - 1}[where])
    _refused(_restart(store), 4, "checkpoint.bin")


@pytest.mark.parametrize("keep", [0, 5, 20, 0.5, -1])
def test_checkpoint_truncated_is_refused_naming_it(acked, tmp_path, keep):
    store = _copy(acked, tmp_path)
    path = store / "checkpoint.bin"
    data = path.read_bytes()
    n = int(len(data) * keep) if isinstance(keep, float) else keep % len(data)
    path.write_bytes(data[:n])
    _refused(_restart(store), 4, "checkpoint.bin")


@pytest.mark.parametrize("name", ["checkpoint.bin.tmp", "wal.log.tmp", "config.json.tmp"])
def test_a_stray_tmp_file_is_ignored(acked, tmp_path, name):
    """A crash inside atomic_write leaves a temp file that was never renamed: not committed."""
    store = _copy(acked, tmp_path)
    (store / name).write_bytes(np.random.default_rng(1).bytes(300))
    assert _restart(store)[:2] == (None, acked[1])


@pytest.mark.parametrize("size", [7, 100, 4096])
@pytest.mark.parametrize("kind", ["random", "zeros"])
def test_a_garbage_tail_is_dropped_and_logged(acked, tmp_path, size, kind):
    store = _copy(acked, tmp_path)
    garbage = np.random.default_rng(size).bytes(size) if kind == "random" else bytes(size)
    with open(store / "wal.log", "ab") as f:
        f.write(garbage)
    code, snapshot, log = _restart(store)
    assert (code, snapshot) == (None, acked[1])
    assert f"dropped a damaged or torn final record ({size} bytes)" in log
    assert _restart(store)[:2] == (None, acked[1])  # the tail is gone from the file too


@pytest.mark.parametrize("which", [0, -1])
def test_a_duplicated_record_is_refused_naming_the_log(acked, tmp_path, which):
    store = _copy(acked, tmp_path)
    path = store / "wal.log"
    data = path.read_bytes()
    record = read_log(path)[0][which]
    duplicate = data[record.offset : record.end]
    path.write_bytes(data[: record.end] + duplicate + data[record.end :])
    _refused(_restart(store), 4, "wal.log")


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    """(store directory, the snapshot acknowledged last) of a server stopped by kill -9 right
    after its last answer, a checkpoint behind it and keyed operations after that."""
    store = tmp_path_factory.mktemp("killed") / "store"
    with (
        ServerProcess("--wal", str(store), *ARGS) as server,
        httpx.Client(base_url=server.url, timeout=30) as c,
    ):
        for k in range(4):
            key = {"Idempotency-Key": f"k-{k}"}
            assert (
                c.post("/sequences", json={"seq_id": f"s{k}", "text": f"prefix {k}"}, headers=key).status_code
                == 201
            )
            assert c.post(f"/sequences/s{k}/generate", json={"max_new_tokens": 3}).status_code == 200
            if k == 1:
                assert c.post("/checkpoint").status_code == 200
        assert c.post("/sequences/s3/fork", json={"child_id": "s3-f"}).status_code == 201
        assert c.delete("/sequences/s0").status_code == 204
        snapshot = c.get("/snapshot").json()
        server.stop(9)
    return store, snapshot


def test_kill_9_then_a_garbage_tail_recovers_the_acknowledged_state(killed, tmp_path):
    store = _copy(killed, tmp_path)
    with open(store / "wal.log", "ab") as f:
        f.write(np.random.default_rng(7).bytes(4096))
    code, snapshot, log = _restart(store)
    assert (code, snapshot) == (None, killed[1])
    assert "dropped a damaged or torn final record (4096 bytes)" in log


def test_kill_9_then_a_valid_but_unrenamed_checkpoint_tmp_is_ignored(killed, tmp_path):
    """The crash came between writing the new checkpoint's temp file and renaming it: the
    log still holds every record, so the old checkpoint and the log are the truth."""
    store = _copy(killed, tmp_path)
    (store / "checkpoint.bin.tmp").write_bytes((store / "checkpoint.bin").read_bytes())
    assert _restart(store)[:2] == (None, killed[1])


def test_kill_9_then_a_duplicated_middle_record_is_refused_naming_log_and_offset(killed, tmp_path):
    store = _copy(killed, tmp_path)
    path = store / "wal.log"
    data = path.read_bytes()
    records = read_log(path)[0]
    record = records[len(records) // 2]
    path.write_bytes(data[: record.end] + data[record.offset : record.end] + data[record.end :])
    result = _restart(store)
    _refused(result, 4, "wal.log")
    assert f"byte offset {record.end}:" in result[2]


def test_a_garbage_tail_on_the_checkpoint_is_refused_naming_it(killed, tmp_path):
    store = _copy(killed, tmp_path)
    with open(store / "checkpoint.bin", "ab") as f:
        f.write(bytes(100))
    _refused(_restart(store), 4, "checkpoint.bin")
