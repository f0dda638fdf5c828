"""The write-ahead log file: numbered, length-prefixed, CRC-checked records.

Layout: an 8-byte header `PKVWAL1\\n`, then one record per manager operation:

    crc32   u32   of everything after it in the record (length, seq, payload)
    length  u32   payload bytes
    seq     u64   1, 2, 3, ... with no gaps; numbering continues across checkpoints
    payload       the operation as compact JSON (see durable.py)

Every record reaches the kernel in one `write()` before its operation takes effect, so a
process that is killed (SIGKILL, the OOM killer) loses nothing it acknowledged, whatever the
fsync policy: the page cache outlives the process. The policy decides what outlives the
machine (power loss, kernel panic):

- `always`:  fsync after every record — or, inside a transaction (durable.py), once at its
  commit, which makes the records before it durable too. Nothing acknowledged is lost;
  each operation (each request, for the service) waits for the disk's fsync, whose time
  depends on the disk (`python -m pagedkv bench wal` measures it).
- `batch N`: fsync every N records. At most the last N - 1 acknowledged operations are lost;
  the flush is paid once per N operations.
- `never`:   the kernel writes back when it chooses (about 30 s on Linux by default).

A crash drill: with `PAGEDKV_DIE_AFTER_RECORD=N` in its environment, a process SIGKILLs
itself right after writing record N whole (`ServerProcess(..., die_after_record=N)` sets it
for a server), so a test or notebook kills a server at an exact record, not at a moment a
busy machine decides.

Reading: a record that fails its checks (short, bad CRC, wrong sequence number) and has no
valid record after it is a torn write — the crash hit while it was being written — and is
dropped. One that has a valid record after it is corruption, and reading stops with
`WALCorruptionError` naming its offset: skipping it would silently drop operations.

The same design as PostgreSQL's WAL and SQLite's WAL mode (records with checksums, the
first bad record ends the log). Leaves out: group commit across threads, log segments,
O_DIRECT, and compression.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from pagedkv.core.plumbing.validation import check_instance, check_int

MAGIC = b"PKVWAL1\n"
_HEADER = struct.Struct("<IIQ")  # crc32, payload length, sequence number
HEADER_SIZE = _HEADER.size  # a record's bytes before its JSON
DIE_AFTER_ENV = "PAGEDKV_DIE_AFTER_RECORD"  # the crash drill (see above)
MAX_PAYLOAD = 64 << 20  # a record longer than this is treated as damage, not data


class WALCorruptionError(Exception):
    """The log (or a checkpoint) is damaged where valid data follows; recovery refuses to guess."""

    def __init__(self, path: Path | str, offset: int, reason: str) -> None:
        super().__init__(f"{path}: corrupt record at byte offset {offset}: {reason}")
        self.path, self.offset, self.reason = str(path), offset, reason


@dataclass(frozen=True)
class FsyncPolicy:
    """When the log calls fsync: "always", "batch N" (every N records) or "never"."""

    mode: str = "always"
    every: int = 1  # records per fsync in batch mode

    def __post_init__(self) -> None:
        check_instance("fsync mode", self.mode, str)
        if self.mode not in ("always", "batch", "never"):
            raise ValueError(f"fsync mode must be 'always', 'batch N' or 'never', got {self.mode!r}")
        check_int("fsync batch size", self.every, 1)

    @classmethod
    def parse(cls, text: str | FsyncPolicy) -> FsyncPolicy:
        """ "always" | "never" | "batch N" (or "batch:N")."""
        if isinstance(text, FsyncPolicy):
            return text
        words = str(text).replace(":", " ").split()
        if len(words) == 2 and words[0] == "batch" and words[1].isdigit():
            return cls("batch", int(words[1]))
        if len(words) == 1 and words[0] in ("always", "never"):
            return cls(words[0])
        raise ValueError(f"fsync must be 'always', 'never' or 'batch N' (N >= 1), got {text!r}")

    def __str__(self) -> str:
        return f"batch {self.every}" if self.mode == "batch" else self.mode


class Record(NamedTuple):
    offset: int  # byte offset of the record in the file
    seq: int
    payload: dict
    end: int  # offset just past the record


def encode_record(seq: int, payload: dict) -> bytes:
    body = json.dumps(payload, separators=(",", ":")).encode()
    tail = struct.pack("<IQ", len(body), seq) + body
    return struct.pack("<I", zlib.crc32(tail)) + tail


def _parse_at(data: bytes, offset: int) -> Record | None:
    """The record starting at `offset` if it is complete and its CRC holds, else None."""
    if len(data) - offset < _HEADER.size:
        return None
    crc, length, seq = _HEADER.unpack_from(data, offset)
    end = offset + _HEADER.size + length
    if length > MAX_PAYLOAD or end > len(data) or zlib.crc32(data[offset + 4 : end]) != crc:
        return None
    try:
        payload = json.loads(data[offset + _HEADER.size : end])
    except ValueError:
        return None
    return Record(offset, seq, payload, end) if isinstance(payload, dict) else None


def read_log(path: Path | str) -> tuple[list[Record], int]:
    """All intact records of a log and the offset where the intact part ends.

    Bytes after that offset are a torn final record (dropped). Raises WALCorruptionError
    when a damaged record has a valid record after it, or the sequence numbers jump.

    Frames (length, CRC, sequence number) are checked one by one; the payloads of all
    intact frames are then decoded by one `json.loads` of a JSON array (a third of the time
    of one call per record, which matters at start-up). A payload that is not a JSON object
    sends the whole file through the record-by-record reader (`_read_one_by_one`)."""
    data = Path(path).read_bytes()
    if data[: len(MAGIC)] != MAGIC:
        raise WALCorruptionError(path, 0, f"not a pagedkv WAL (header {data[:8]!r})")
    view = memoryview(data)
    frames: list[tuple[int, int, int]] = []  # (offset, seq, end) of each intact frame
    offset = len(MAGIC)
    while offset < len(data):
        frame = _frame_at(view, offset)
        if frame is None:
            _check_torn(path, data, offset)  # raises unless nothing valid follows
            break
        if frames and frame[1] != frames[-1][1] + 1:
            raise WALCorruptionError(path, offset, f"sequence number {frame[1]} follows {frames[-1][1]}")
        frames.append(frame)
        offset = frame[2]
    try:
        payloads = json.loads(b"[" + b",".join(view[o + _HEADER.size : e] for o, _, e in frames) + b"]")
    except ValueError:
        payloads = None
    if payloads is None or not all(type(p) is dict for p in payloads):
        return _read_one_by_one(path, data)
    return [Record(o, seq, p, e) for (o, seq, e), p in zip(frames, payloads, strict=True)], offset


def _frame_at(view: memoryview, offset: int) -> tuple[int, int, int] | None:
    """(offset, seq, end) of the frame at `offset` if it is complete and its CRC holds."""
    if len(view) - offset < _HEADER.size:
        return None
    crc, length, seq = _HEADER.unpack_from(view, offset)
    end = offset + _HEADER.size + length
    if length > MAX_PAYLOAD or end > len(view) or zlib.crc32(view[offset + 4 : end]) != crc:
        return None
    return offset, seq, end


def _check_torn(path: Path | str, data: bytes, offset: int) -> None:
    """A damaged record at `offset` is a torn tail only if no valid record follows it."""
    later = _next_valid(data, offset)
    if later is not None:
        raise WALCorruptionError(
            path,
            offset,
            f"damaged record; a valid record (seq {later.seq}) follows at "
            f"offset {later.offset}, so this is not a torn record",
        )


def _read_one_by_one(path: Path | str, data: bytes) -> tuple[list[Record], int]:
    """`read_log` parsing each record on its own (a frame whose payload is not an object)."""
    records: list[Record] = []
    offset = len(MAGIC)
    while offset < len(data):
        record = _parse_at(data, offset)
        if record is not None and records and record.seq != records[-1].seq + 1:
            raise WALCorruptionError(path, offset, f"sequence number {record.seq} follows {records[-1].seq}")
        if record is None:
            _check_torn(path, data, offset)
            break  # a torn final record: the crash hit while it was being written
        records.append(record)
        offset = record.end
    return records, offset


def _next_valid(data: bytes, offset: int) -> Record | None:
    """The first intact record starting after `offset` (scans byte by byte: error path only)."""
    for start in range(offset + 1, len(data) - _HEADER.size + 1):
        record = _parse_at(data, start)
        if record is not None:
            return record
    return None


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new file in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` all at once: temp file, fsync, rename, fsync the directory.
    A crash leaves either the old file or the new one, never a mix."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def lock_store(directory: Path) -> int:
    """flock() the store in `directory` for this process; the returned fd holds the lock."""
    fd = os.open(directory / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RuntimeError(f"{directory} is open in another process (or another manager)") from None
    return fd


class WriteAheadLog:
    """Appends records to a log file under an fsync policy."""

    def __init__(self, path: Path | str, next_seq: int, fsync: FsyncPolicy | str = "always") -> None:
        """Open an existing log (intact part ending at its current size) for appending."""
        self.path = Path(path)
        self.policy = FsyncPolicy.parse(fsync)
        self.next_seq = next_seq  # sequence number of the next record
        self.fsyncs = 0  # calls to fsync since opening (for benchmarks and metrics)
        self._unsynced = 0
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        drill = os.environ.get(DIE_AFTER_ENV, "0")  # "0": no crash drill
        if not drill.isdigit():
            raise ValueError(f"${DIE_AFTER_ENV} must be a record number (digits), got {drill!r}")
        self.die_after = int(drill)

    @classmethod
    def create(
        cls, path: Path | str, next_seq: int = 1, fsync: FsyncPolicy | str = "always"
    ) -> WriteAheadLog:
        """Start an empty log atomically (replacing any old one) and open it."""
        atomic_write(Path(path), MAGIC)
        return cls(path, next_seq, fsync)

    @property
    def last_seq(self) -> int:
        return self.next_seq - 1

    def append(self, payload: dict, sync: bool = True) -> int:
        """Write one record (one write() call), fsync as the policy says; return its seq.

        `sync=False` lets an "always" log leave the fsync to a later record (a transaction's
        commit: one fsync makes every record before it durable too)."""
        seq = self.next_seq
        data = encode_record(seq, payload)
        self._write(data)
        if seq == self.die_after:  # the crash drill: killed with record `seq` whole on disk
            os.kill(os.getpid(), signal.SIGKILL)
        self.next_seq += 1
        self._unsynced += 1
        if (self.policy.mode == "always" and sync) or (
            self.policy.mode == "batch" and self._unsynced >= self.policy.every
        ):
            self.sync()
        return seq

    def _write(self, data: bytes) -> None:
        written = os.write(self._fd, data)
        if written != len(data):  # a full disk; the short record is a torn tail
            raise OSError(f"{self.path}: short write ({written} of {len(data)} bytes)")

    def sync(self) -> None:
        """fsync now (records written so far survive a power loss)."""
        if self._unsynced:
            os.fsync(self._fd)
            self.fsyncs += 1
            self._unsynced = 0

    @property
    def size(self) -> int:
        """Bytes in the log file (header included)."""
        return os.fstat(self._fd).st_size

    def reset(self) -> None:
        """Atomically replace the log with an empty one that continues the numbering (after
        a checkpoint has made every record so far redundant)."""
        self.compact(self.size)

    def compact(self, offset: int) -> None:
        """Atomically replace the log with its records from byte `offset` on (those written
        after a checkpoint that covers everything before `offset`)."""
        self.sync()
        with open(self.path, "rb") as f:
            f.seek(offset)
            tail = f.read()
        os.close(self._fd)
        atomic_write(self.path, MAGIC + tail)
        self._unsynced = 0
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)

    def close(self) -> None:
        if self._fd >= 0:
            self.sync()
            os.close(self._fd)
            self._fd = -1

    def __repr__(self) -> str:
        path, policy = str(self.path), str(self.policy)
        return f"WriteAheadLog({path!r}, next_seq={self.next_seq}, fsync={policy!r})"
