"""Checkpoints: the whole bookkeeping state of a manager in one CRC-checked file.

A checkpoint lets the write-ahead log start over: once the state at record `seq` is safely
on disk, records up to `seq` are redundant. `export_state` reads the state through the
pool's and manager's public, read-only API (pages, the order CACHED pages were released
in, counters, clock, block tables, copy-on-write record) into plain JSON data;
`restore_state` loads it into a fresh pool with `restore_pool` (restore.py) and puts the
sequences back. K/V are not in the file: they live in the memory-mapped K/V file, flushed
before a checkpoint is written.

File layout: `PKVCKP2\\n`, crc32 (u32) of the rest, seq (u64), then the state as JSON.
Written with `atomic_write` (temp file, fsync, rename, fsync the directory), so a crash
leaves the previous checkpoint or the new one.

PostgreSQL's checkpoints do the same job differently: they flush dirty data pages and log
a checkpoint record, and redo starts there. Leaves out: incremental (delta) checkpoints.
"""

from __future__ import annotations

import json
import struct
import zlib
from array import array
from collections.abc import Hashable
from pathlib import Path

from pagedkv.core.hashing import encode_extra_key
from pagedkv.core.sequence import Sequence, SequenceManager
from pagedkv.service.restore import restore_pool
from pagedkv.service.wal import WALCorruptionError, atomic_write

MAGIC = b"PKVCKP2\n"  # 2: the release order replaced the eviction order


def key_to_json(extra_key: object) -> object:
    """An extra key (None, str, int or bytes) as a JSON value that keeps its type."""
    encode_extra_key(extra_key)  # validates the type
    return {"bytes": extra_key.hex()} if isinstance(extra_key, bytes) else extra_key


def key_from_json(value: object) -> object:
    return bytes.fromhex(value["bytes"]) if isinstance(value, dict) else value


def export_state(manager: SequenceManager) -> dict:
    """The manager's and its pool's bookkeeping as JSON-ready data."""
    pool = manager.pool
    pages = []
    for page_id in range(pool.num_pages):
        page = pool.page(page_id)
        digest = page.block_hash
        indexed = digest is not None and pool.get_cached_block(digest) == page_id
        pages.append(
            [
                int(page.state),
                page.ref_count,
                list(page.token_ids),
                digest.hex() if digest is not None else None,
                indexed,
                page.last_access,
            ]
        )
    sequences: list[list[object]] = [
        [
            s.seq_id,
            list(s.token_ids),
            list(s.block_table),
            s.num_prompt_tokens,
            s.num_cached_tokens,
            s.num_computed_tokens,
            key_to_json(s.extra_key),
            s.parent,
        ]
        for s in manager.sequences.values()
    ]
    return {
        "clock": pool.clock,
        "stats": pool.stats.as_dict(),
        "pages": pages,  # per page: state, ref_count, token_ids, block hash, indexed, last_access
        "release_order": pool.eviction.release_order(),  # CACHED pages, oldest release first
        "sequences": sequences,  # oldest first
        "cow_log": [list(pair) for pair in manager.cow_log],
        # idempotency keys committed so far (durable managers; idempotency.py)
        "idempotency": manager.idempotency.export() if hasattr(manager, "idempotency") else [],
        "owners": dict(getattr(manager, "owners", {})),  # seq id -> client (quota.py)
        # [page, computed slots, crc32 of its K/V] of pages not FREE (kv_checksums.py)
        "kv_crc": [
            [page, *entry]
            for page, entry in sorted(getattr(manager, "kv_crc", {}).items())
            if pages[page][0] != 0  # 0: FREE
        ],
    }


def restore_state(manager: SequenceManager, state: dict) -> None:
    """Load `export_state` output into a manager over a fresh pool, then check every rule."""
    pool = manager.pool
    if len(manager):
        raise ValueError("restore needs a manager without sequences over a fresh pool")
    restore_pool(
        pool,
        [
            (st, ref, tokens, bytes.fromhex(h) if h is not None else None, indexed, access)
            for st, ref, tokens, h, indexed, access in state["pages"]
        ],
        state["release_order"],
        state["stats"],
        state["clock"],
    )
    sequences: dict[Hashable, Sequence] = {}
    for seq_id, tokens, table, prompt, cached, computed, key, parent in state["sequences"]:
        sequences[seq_id] = Sequence(
            seq_id=seq_id,
            tokens=array("q", tokens),
            block_table=table,
            page_size=manager.page_size,
            num_prompt_tokens=prompt,
            num_cached_tokens=cached,
            num_computed_tokens=computed,
            extra_key=key_from_json(key),
            parent=parent,
        )
    manager.sequences.update(sequences)
    manager.cow_log[:] = [(src, dst) for src, dst in state["cow_log"]]
    if hasattr(manager, "idempotency"):
        manager.idempotency.restore(state.get("idempotency", []))
    if hasattr(manager, "owners"):
        manager.owners.update(state.get("owners", {}))
    if hasattr(manager, "kv_crc"):
        manager.kv_crc.update((page, [slots, crc]) for page, slots, crc in state.get("kv_crc", []))
    manager.check_invariants()


def write_checkpoint(path: Path, seq: int, state: dict) -> None:
    body = struct.pack("<Q", seq) + json.dumps(state, separators=(",", ":")).encode()
    atomic_write(path, MAGIC + struct.pack("<I", zlib.crc32(body)) + body)


def read_checkpoint(path: Path) -> tuple[int, dict]:
    """(seq, state) of a checkpoint file; WALCorruptionError if it is damaged."""
    data = path.read_bytes()
    if data[: len(MAGIC)] != MAGIC or len(data) < len(MAGIC) + 12:
        raise WALCorruptionError(path, 0, "not a pagedkv checkpoint")
    (crc,) = struct.unpack_from("<I", data, len(MAGIC))
    body = data[len(MAGIC) + 4 :]
    if zlib.crc32(body) != crc:
        raise WALCorruptionError(path, len(MAGIC), "checkpoint CRC mismatch")
    (seq,) = struct.unpack_from("<Q", body)
    return seq, json.loads(body[8:])
