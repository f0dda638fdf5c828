"""Who owns which sequence (quota.py) is in the write-ahead log: commit records carry it,
checkpoints keep it, a free forgets it, and recovery rebuilds it exactly; read_log's
one-call decoding and the record-by-record reader agree on every log."""

from __future__ import annotations

import struct
import zlib

import pytest

from pagedkv import CacheConfig
from pagedkv.service import DurableSequenceManager, WALCorruptionError, read_log, recover
from pagedkv.service.wal import MAGIC, encode_record


def _store(tmp_path) -> DurableSequenceManager:
    config = CacheConfig(num_pages=16, page_size=4, num_layers=1, num_kv_heads=1, head_dim=2)
    return DurableSequenceManager.create(tmp_path / "s", config, "never")


def _made(m: DurableSequenceManager, seq_id: str, owner: str, parent: str | None = None) -> None:
    with m.transaction():
        if parent is None:
            m.add(seq_id, [1, 2, 3, 4, 5])
        else:
            m.fork(parent, seq_id)
        m.commit(owners={seq_id: owner})


@pytest.mark.parametrize("checkpoint", [False, True])
def test_owners_survive_recovery_and_a_free_forgets_its_owner(tmp_path, checkpoint):
    m = _store(tmp_path)
    _made(m, "a1", "alice")
    _made(m, "b1", "bob")
    if checkpoint:
        m.checkpoint()
    _made(m, "a2", "alice", parent="a1")
    with m.transaction():
        m.free("b1")
        m.commit()
    assert m.owners == {"a1": "alice", "a2": "alice"}
    m.close()
    recovered = recover(tmp_path / "s", "never")
    assert recovered.owners == {"a1": "alice", "a2": "alice"}
    assert set(recovered.sequences) == {"a1", "a2"}
    recovered.close()


def test_a_commit_without_owners_logs_none(tmp_path):
    m = _store(tmp_path)
    with m.transaction():
        m.add("x", [1, 2])
        m.commit()
    m.close()
    commits = [r.payload for r in read_log(tmp_path / "s" / "wal.log")[0] if r.payload["op"] == "commit"]
    assert commits == [{"op": "commit"}]


def test_read_log_falls_back_to_one_record_at_a_time_for_a_non_object_payload(tmp_path):
    """A frame whose CRC holds but whose payload is not a JSON object is damage: the one-call
    decoder hands the file to the record-by-record reader, which refuses it as before."""
    path = tmp_path / "wal.log"
    good = encode_record(1, {"op": "begin"})
    path.write_bytes(MAGIC + good + _framed(2, b"[1, 2]") + encode_record(3, {"op": "commit"}))
    with pytest.raises(WALCorruptionError, match=f"byte offset {len(MAGIC) + len(good)}"):
        read_log(path)
    path.write_bytes(MAGIC + good + _framed(2, b"[1, 2]"))  # at the end: a torn tail
    records, end = read_log(path)
    assert [r.seq for r in records] == [1] and end == len(MAGIC) + len(good)


def _framed(seq: int, body: bytes) -> bytes:
    tail = struct.pack("<IQ", len(body), seq) + body
    return struct.pack("<I", zlib.crc32(tail)) + tail
