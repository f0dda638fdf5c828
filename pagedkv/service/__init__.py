"""The service layer: durability, thread safety, metrics and an HTTP API around the core.

The core (pool, sequence, model, ...) imports nothing from here; only the command line
(`pagedkv/cli.py`) imports `serve`, which itself imports FastAPI and uvicorn only when the
server starts. `durable`, `recovery` and `concurrency` need only numpy; `metrics`, `engine`,
`server` and `protocol` need the `serve` extra (prometheus_client, FastAPI, uvicorn) and
are imported by name: `from pagedkv.service.server import create_app`.
"""

from pagedkv.service.concurrency import CoarseLock, LockedManager, ReadWriteLock
from pagedkv.service.durable import DurableSequenceManager
from pagedkv.service.recovery import open_store, recover
from pagedkv.service.wal import FsyncPolicy, WALCorruptionError, WriteAheadLog, read_log

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
