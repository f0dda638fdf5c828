"""Bounded logs: a condition that repeats is logged once per interval, with a count.

A server under attack or overload meets the same condition thousands of times a second
(a stalled connection cut off, a request refused as busy, the accept loop failing for lack
of file descriptors). Logging each one fills the disk and buries everything else, so:

- `RateLimitedLog.warning(condition, msg, *args)` logs a condition at most once per
  `interval` seconds; the next line says how many were left out meanwhile,
- `RepeatFilter` does the same for other libraries' loggers (uvicorn's and asyncio's):
  a record whose message text (with its arguments) repeats within the interval is dropped,
  and its traceback is never formatted.

nginx and HAProxy rate-limit their error logs the same way in spirit (one line per event
kind, with counters in metrics). Leaves out: per-client accounting.
"""

from __future__ import annotations

import logging
import threading
import time

INTERVAL = 10.0  # seconds between two lines about the same condition


class RateLimitedLog:
    """One logger; each named condition logged at most once per `interval` seconds."""

    def __init__(self, name: str, interval: float = INTERVAL) -> None:
        self.logger, self.interval = logging.getLogger(name), interval
        self._last: dict[str, float] = {}  # condition -> monotonic time of its last line
        self._skipped: dict[str, int] = {}  # condition -> lines left out since
        self._lock = threading.Lock()

    def warning(self, condition: str, msg: str, *args: object) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(condition, -self.interval) < self.interval:
                self._skipped[condition] = self._skipped.get(condition, 0) + 1
                return
            self._last[condition] = now
            skipped = self._skipped.pop(condition, 0)
        if skipped:
            msg += f" (and {skipped} more in the last {self.interval:.0f} s)"
        self.logger.warning(msg, *args)


class RepeatFilter(logging.Filter):
    """Drop a record whose text was already logged less than `interval` seconds ago."""

    def __init__(self, interval: float = INTERVAL, max_keys: int = 256) -> None:
        super().__init__()
        self.interval, self.max_keys = interval, max_keys
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        key = f"{record.name}:{record.levelno}:{record.getMessage()[:200]}"
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(key, -self.interval) < self.interval:
                return False
            if len(self._last) >= self.max_keys:  # bounded memory, too
                self._last.clear()
            self._last[key] = now
        return True


def install(loggers: tuple[str, ...] = ("uvicorn", "uvicorn.error", "asyncio", "pagedkv")) -> None:
    """Put one RepeatFilter on each of `loggers` (and on their handlers' records)."""
    shared = RepeatFilter()
    for name in loggers:
        logging.getLogger(name).addFilter(shared)
