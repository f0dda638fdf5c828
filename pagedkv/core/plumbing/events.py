"""Page events: what happened to which page, delivered once the operation is complete.

Every verb of the pool that changes a page records an `Event` (allocate, evict,
prefix_hit, fork, cow, cache, free, reset) stamped with the logical clock. The events of
one operation are held back and delivered together by `publish()` at its end, so a
listener that raises, or reads the pool, never sees it half changed. The dashboard's
event log, the heatmap's highlights, the scenario recorder and the Prometheus metrics
all listen here.

vLLM v1 publishes the same kind of facts as KV-cache events (`BlockStored`,
`BlockRemoved`, `AllBlocksCleared`) through its `KVEventBatch` publisher, batched per
engine step.

Leaves out: queueing across processes (vLLM can publish over ZMQ) and replay; a listener
added late does not hear earlier events.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import NamedTuple

from pagedkv.core.plumbing.validation import check_callable


class Event(NamedTuple):
    """One thing that happened to a page, for event logs, plots and metrics."""

    clock: int
    kind: str  # allocate | evict | prefix_hit | fork | cow | cache | free | reset (the
    # Scheduler sends preempt | resume with page_id -1 to its own listeners)
    page_id: int
    seq_id: Hashable | None = None
    detail: str = ""


class EventStream:
    """Listeners, and the events of the operation in progress."""

    def __init__(self) -> None:
        self.listeners: list[Callable[[Event], None]] = []
        self.pending: list[Event] = []  # events of the operation in progress (read it, do not change it)

    def add_listener(self, callback: Callable[[Event], None]) -> None:
        """Call `callback(event)` for every event from now on."""
        self.listeners.append(check_callable("callback", callback))

    def remove_listener(self, callback: Callable[[Event], None]) -> None:
        """Stop calling `callback` (ValueError if it was never added)."""
        self.listeners.remove(callback)

    def emit(
        self, clock: int, kind: str, page_id: int, seq_id: Hashable | None = None, detail: str = ""
    ) -> None:
        """Hold an event back until `publish()` (dropped at once when nobody listens)."""
        if self.listeners:
            self.pending.append(Event(clock, kind, page_id, seq_id, detail))

    def publish(self) -> None:
        """Deliver the held-back events, in order, to every listener."""
        if not self.pending:
            return
        events, self.pending = self.pending, []
        for event in events:
            for callback in self.listeners:
                callback(event)
