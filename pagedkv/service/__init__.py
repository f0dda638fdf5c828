"""The service layer: durability, thread safety, metrics and an HTTP API around the core.

The core (pool, sequence, model, ...) imports nothing from here; only the command line
(`pagedkv/cli.py`) imports `serve`, which itself imports FastAPI and uvicorn only when the
server starts. `durable`, `recovery` and `concurrency` need only numpy, `gate` and `health`
only the standard library; `metrics`, `engine`, `server`, `bodies` and `guard` need the
`serve` extra (prometheus_client, FastAPI, uvicorn) and are imported by name:
`from pagedkv.service.server import create_app`.

The names below are imported on first use (PEP 562), so `python -m pagedkv serve --help`
and `pagedkv.service.serve` load none of the durability code they do not run.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pagedkv.service.concurrency import CoarseLock, LockedManager, ReadWriteLock
    from pagedkv.service.durable import DurableSequenceManager
    from pagedkv.service.recovery import open_store, recover
    from pagedkv.service.wal import FsyncPolicy, WALCorruptionError, WriteAheadLog, read_log

_HOME = {  # name -> module that defines it
    "CoarseLock": "concurrency",
    "LockedManager": "concurrency",
    "ReadWriteLock": "concurrency",
    "DurableSequenceManager": "durable",
    "open_store": "recovery",
    "recover": "recovery",
    "FsyncPolicy": "wal",
    "WALCorruptionError": "wal",
    "WriteAheadLog": "wal",
    "read_log": "wal",
}


def __getattr__(name: str) -> object:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"pagedkv.service.{_HOME[name]}"), name)


__all__ = [
    "CoarseLock",
    "DurableSequenceManager",
    "FsyncPolicy",
    "LockedManager",
    "ReadWriteLock",
    "WALCorruptionError",
    "WriteAheadLog",
    "open_store",
    "read_log",
    "recover",
]
