"""The page lifecycle: every state a page can be in and every transition between them.

A page is FREE (empty, on the free list), ACTIVE (held by at least one block table) or
CACHED (no holder, but full and hashed: a later prompt can revive it, or the pool can evict
it). `TRANSITIONS` is the one table of how a page moves between those states; the lifecycle
diagram (`pagedkv.viz.plot_lifecycle`), the dashboard's highlight of the last step and the
invariant checker all read it, so the picture cannot drift from the rules.

vLLM v1 has the same three states without naming them: a `KVCacheBlock` with `ref_cnt > 0`
(ACTIVE), one in the free queue with a `block_hash` (CACHED, evicted when popped) and one
without (FREE). `step_transitions` replays a step's pool events to say which transitions it
took. Leaves out: the swap space (a swapped-out sequence's pages are released like any
other's; their copies live outside the pool).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from pagedkv.core.page import PageState

if TYPE_CHECKING:
    from pagedkv.core.observe.snapshot import PoolSnapshot
    from pagedkv.core.plumbing.events import Event

FREE, ACTIVE, CACHED = PageState.FREE, PageState.ACTIVE, PageState.CACHED
STATES = (FREE, ACTIVE, CACHED)
GLOSSARY = {
    FREE: "empty, on the free list: the next allocation takes the lowest FREE page id",
    ACTIVE: "held by at least one block table (ref_count >= 1): never evicted",
    CACHED: "no block table holds it (ref_count 0), but it is full and hashed: a prompt "
    "with the same prefix revives it, or the pool evicts it when no FREE page is left",
}


class Transition(NamedTuple):
    """One way a page changes state (or ref count, for ACTIVE -> ACTIVE)."""

    name: str  # the label on the diagram and in the dashboard
    source: PageState
    target: PageState
    says: str  # what happens, in one sentence


TRANSITIONS = (
    Transition("allocate", FREE, ACTIVE, "a new prompt takes FREE pages, ref_count 1"),
    Transition(
        "append past a full page",
        FREE,
        ACTIVE,
        "a sequence whose last page is full takes a new one: for its next token, or the rest of its prompt",
    ),
    Transition("copy-on-write", FREE, ACTIVE, "a write into a shared page goes to a fresh copy instead"),
    Transition(
        "evict", CACHED, ACTIVE, "no FREE page left: the LRU victim loses its hash and is reused at once"
    ),
    Transition(
        "prefix hit", CACHED, ACTIVE, "a prompt with the same block hash revives the page, ref_count 1"
    ),
    Transition("share", ACTIVE, ACTIVE, "a prefix hit or a fork holds the page once more: ref_count + 1"),
    Transition("release, others hold it", ACTIVE, ACTIVE, "a holder finishes: ref_count - 1, still >= 1"),
    Transition(
        "release → CACHED", ACTIVE, CACHED, "the last holder finishes and the page is full and hashed"
    ),
    Transition(
        "release → FREE", ACTIVE, FREE, "the last holder finishes and the page is partial (or caching is off)"
    ),
    Transition(
        "preempt → CACHED", ACTIVE, CACHED, "the scheduler frees a running request: its full pages stay"
    ),
    Transition(
        "preempt → FREE", ACTIVE, FREE, "the scheduler frees a running request: its partial page goes"
    ),
    Transition("reset", CACHED, FREE, "reset_prefix_cache() empties every CACHED page"),
)
BY_NAME = {t.name: t for t in TRANSITIONS}
ALLOWED = frozenset((t.source, t.target) for t in TRANSITIONS)  # (source, target) state pairs


def is_allowed(source: int, target: int) -> bool:
    """Whether a page may go from state `source` to `target` in one operation (staying in
    a state is always allowed). Example: is_allowed(FREE, CACHED) -> False."""
    return source == target or (PageState(source), PageState(target)) in ALLOWED


def step_transitions(before: PoolSnapshot, after: PoolSnapshot, events: Iterable[Event]) -> list[str]:
    """Names of the transitions a step took, in the order it took them, from the pool
    events between two snapshots (scheduler "preempt" events included). Example: a decode
    that evicts page 4 to continue a sequence -> ["evict"]."""
    events = list(events)
    preempted = {e.seq_id for e in events if e.kind == "preempt"}
    state = {p: PageState(s) for p, s in enumerate(before.state.tolist())}
    copies = {e.page_id for e in events if e.kind == "cow"}
    evicted: set[int] = set()
    taken: list[str] = []
    for e in events:
        if e.page_id < 0:
            continue
        name = None
        if e.kind == "evict":
            name, evicted = "evict", evicted | {e.page_id}
        elif e.kind == "allocate" and e.page_id not in evicted:
            if e.page_id in copies:
                name = "copy-on-write"
            elif e.seq_id in before.block_tables:
                name = "append past a full page"
            else:
                name = "allocate"
        elif e.kind in ("prefix_hit", "fork"):
            name = "prefix hit" if state[e.page_id] is CACHED else "share"
        elif e.kind in ("cache", "free"):
            why = "preempt" if e.seq_id in preempted else "release"
            name = f"{why} → {'CACHED' if e.kind == 'cache' else 'FREE'}"
        elif e.kind == "reset":
            name = "reset"
        if name is not None:
            state[e.page_id] = BY_NAME[name].target
            if name not in taken:
                taken.append(name)
    both = (before.state == ACTIVE) & (after.state == ACTIVE)
    if np.any(both & (after.ref_count < before.ref_count)):
        taken.append("release, others hold it")
    return taken
