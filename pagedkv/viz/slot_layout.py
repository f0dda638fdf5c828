"""The same workload in a paged pool and in contiguous one-reservation-per-request memory,
slot by slot: the replay, the counts and the colours the pictures of notebook 01 draw
(`pagedkv.viz.fragmentation`, `pagedkv.viz.two_memories`).

The run's snapshots say which sequences were live at each step and how long they were.
`contiguous_replay` feeds exactly that to a `ContiguousKVCache` over the same number of slots:
a sequence that appears is admitted with a reservation (first fit, sized by the policy for
its final length, which the replay knows because it has seen the whole run), every token it
gains fills one reserved slot, and a sequence that disappears frees its range. A fork is a
new request there: contiguous memory cannot share.

`compare_layouts` counts slots in the vLLM paper's categories (Kwon et al., SOSP 2023, Fig. 2)
for both memories: `tokens`, `reserved` (a reservation's empty slots its request fills later,
up to the final length the replay knows), `internal_fragmentation` (a reservation's slots past
its final length, and, as the paper counts a paged pool, the empty rest of each last page),
`external_fragmentation` (free slots in holes shorter than `max_seq_len`, as
`ContiguousKVCache.accounting` counts), `cached` (CACHED pages) and `free`.
`paged_slots` and `contiguous_slots` give every slot its colour in those categories.

Leaves out: allocators other than first fit.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
from matplotlib.colors import to_rgba

from pagedkv.core.observe.snapshot import PoolSnapshot
from pagedkv.core.page import PageState
from pagedkv.core.plumbing.validation import check_int, check_items
from pagedkv.core.slot_mapping import slot_mapping
from pagedkv.labs.contiguous import ContiguousKVCache, NoContiguousHoleError
from pagedkv.viz.palette import STATE_COLORS, SequencePalette
from pagedkv.viz.usage import slot_usage

CATEGORIES = (  # slot categories of both layouts, in drawing order
    "tokens",
    "reserved",
    "internal_fragmentation",
    "external_fragmentation",
    "cached",
    "free",
)
# category -> (bar colour, hatch, legend label). Hatches repeat the marks of the slot
# strips (dots: reserved, crosses: internal, slashes: external), so bars and strips read alike.
# A hole is white: unlike any request's light tint.
STYLES = {
    "tokens": ("#333333", "", "tokens: its request's colour in the strips, dark grey in the bars"),
    "reserved": ("#FFFFFF", "..", "reserved, in the share bars"),
    "internal_fragmentation": (
        "#8C8C8C",
        "xx",
        "× internal fragmentation: a range's unused\n  end, a last page's rest (may fill later)",
    ),
    "external_fragmentation": ("#FFFFFF", "//", "/ external fragmentation: hole too small"),
    "cached": (STATE_COLORS[PageState.CACHED], "", "CACHED page"),
    "free": (STATE_COLORS[PageState.FREE], "", "free"),
}


def _lengths(snapshot: PoolSnapshot) -> dict[Hashable, int]:
    """seq id -> tokens, from the fill of the pages in its block table."""
    return {s: int(snapshot.fill[list(t)].sum()) if t else 0 for s, t in snapshot.block_tables.items()}


def check_step(snapshots: Sequence[PoolSnapshot], step: int | None) -> int:
    check_items("snapshots", snapshots, PoolSnapshot)
    return len(snapshots) - 1 if step is None else check_int("step", step, 0, len(snapshots) - 1)


def contiguous_replay(
    snapshots: Sequence[PoolSnapshot],
    policy: str = "max",
    max_seq_len: int | None = None,
    step: int | None = None,
) -> tuple[ContiguousKVCache, list[Hashable]]:
    """The contiguous cache after the same admissions, growth and frees as `snapshots[:step+1]`
    (default: all), with final lengths taken from the whole run.

    Returns the cache and the ids it had to refuse (no hole large enough, or longer than
    `max_seq_len`). `max_seq_len` defaults to the next power of two of the longest sequence.
    """
    step = check_step(snapshots, step)
    lengths = [_lengths(s) for s in snapshots]
    finals = _final_lengths(lengths)
    longest = max([1, *(v for f in finals for v in f.values())])
    num_slots = snapshots[-1].num_pages * snapshots[-1].page_size
    if max_seq_len is None:
        max_seq_len = min(1 << (longest - 1).bit_length(), num_slots)
    cache = ContiguousKVCache(num_slots, policy, max_seq_len)
    refused = _replay(cache, lengths[: step + 1], finals[: step + 1])
    return cache, refused


def _final_lengths(lengths: list[dict[Hashable, int]]) -> list[dict[Hashable, int]]:
    """Per snapshot, seq id -> its longest length within the life it is in (an id can be
    reused later: each life has its own final length).

    Example: [{"a": 1}, {"a": 3}, {}, {"a": 2}] -> [{"a": 3}, {"a": 3}, {}, {"a": 2}]"""
    finals: list[dict[Hashable, int]] = [{} for _ in lengths]
    alive: dict[Hashable, int] = {}  # seq id -> index of the snapshot where its life started
    for i, now in enumerate([*lengths, {}]):
        for seq_id in [s for s in alive if s not in now]:
            start = alive.pop(seq_id)
            longest_in_life = max(lengths[j][seq_id] for j in range(start, i))
            for j in range(start, i):
                finals[j][seq_id] = longest_in_life
        for seq_id in now:
            alive.setdefault(seq_id, i)
    return finals


def _replay(
    cache: ContiguousKVCache, lengths: list[dict[Hashable, int]], finals: list[dict[Hashable, int]]
) -> list[Hashable]:
    """Snapshot by snapshot, free the sequences that ended, grow the ones that gained tokens
    and admit the new ones with a reservation for their final length; the ids still live
    that had to be refused."""
    refused: list[Hashable] = []
    before: dict[Hashable, int] = {}
    for now, final in zip(lengths, finals, strict=True):
        for seq_id in [s for s in before if s not in now and s in cache]:
            cache.free(seq_id)
        refused = [s for s in refused if s in now]  # a refused request that ended is forgotten
        for seq_id, n in now.items():
            if seq_id in cache:
                for _ in range(n - before[seq_id]):
                    cache.append(seq_id)
            elif seq_id not in before and seq_id not in refused:
                try:
                    cache.add(seq_id, max(1, n), final[seq_id])
                except (NoContiguousHoleError, ValueError):
                    refused.append(seq_id)
        before = now
    return refused


def compare_layouts(
    snapshots: Sequence[PoolSnapshot],
    policy: str = "max",
    max_seq_len: int | None = None,
    step: int | None = None,
) -> dict[str, object]:
    """Slot counts per category at `step` (default: the last) for the paged pool and the
    contiguous replay of the same run."""
    step = check_step(snapshots, step)
    cache, refused = contiguous_replay(snapshots, policy, max_seq_len, step)
    return {
        "paged": paged_counts(snapshots[step]),
        "contiguous": contiguous_counts(cache),
        "refused": refused,
        "max_seq_len": cache.max_seq_len,
    }


def paged_counts(snapshot: PoolSnapshot) -> dict[str, int]:
    usage = slot_usage(snapshot)  # paging reserves nothing ahead and leaves no holes
    return {c: usage.get(c, 0) for c in CATEGORIES}


def contiguous_counts(cache: ContiguousKVCache) -> dict[str, int]:
    acc = cache.accounting()
    return {
        "tokens": acc.token_states,
        "reserved": acc.reserved,
        "internal_fragmentation": acc.internal_fragmentation,
        "external_fragmentation": acc.external_fragmentation,
        "cached": 0,  # contiguous memory keeps nothing for reuse
        "free": acc.free,
    }


def external_holes(cache: ContiguousKVCache) -> list[tuple[int, int]]:
    """The holes `accounting()` counts as external fragmentation, as (start, length).

    The accounting decides which holes are too small; being too small is a matter of
    length, so they are the shortest holes, and their lengths add up to its count."""
    left = cache.accounting().external_fragmentation
    out = []
    for start, length in sorted(cache.holes(), key=lambda hole: hole[1]):
        if length > left:
            break
        out.append((start, length))
        left -= length
    return sorted(out)


def light_tint(rgba: Sequence[float] | np.ndarray) -> tuple[float, float, float, float]:
    """A light tint of a request's colour, opaque: the colour of its reserved slots."""
    r, g, b = (0.45 * np.asarray(rgba, dtype=float)[:3] + 0.55).tolist()
    return (r, g, b, 1.0)


def _rgba(category: str) -> tuple[float, float, float, float]:
    return to_rgba(STYLES[category][0])


def paged_slots(snap: PoolSnapshot, palette: SequencePalette) -> tuple[np.ndarray, np.ndarray]:
    """The colour of every slot of the paged pool, and the empty slots of its ACTIVE pages.

    A sequence's tokens sit where its slot mapping puts them; the oldest holder of a shared
    page is drawn last, so the page takes its colour (as `PoolSnapshot.owner` says)."""
    size = snap.page_size
    pages = np.tile(_rgba("free"), (snap.num_pages, size, 1))  # [num_pages, page_size, rgba]
    active = snap.state == PageState.ACTIVE
    pages[active] = _rgba("internal_fragmentation")
    pages[snap.state == PageState.CACHED] = _rgba("cached")
    slots = pages.reshape(-1, 4)  # [num_slots, rgba]
    holds_token = np.zeros(len(slots), dtype=bool)
    lengths = _lengths(snap)
    for seq_id, table in reversed(snap.block_tables.items()):
        tokens = slot_mapping(table, size, np.arange(lengths[seq_id]))
        slots[tokens] = palette.rgba(seq_id)
        holds_token[tokens] = True
    return slots, np.flatnonzero(np.repeat(active, size) & ~holds_token)


def contiguous_slots(
    cache: ContiguousKVCache, palette: SequencePalette, num_slots: int
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The colour of every slot of the contiguous memory, and the slots to mark by marker:
    each reservation in its request's colour (light where reserved for tokens to come), then
    the holes the accounting calls too small."""
    slots = np.tile(_rgba("free"), (num_slots, 1))  # [num_slots, rgba]
    reserved: list[int] = []
    internal: list[int] = []
    external: list[int] = []
    for r in cache.accounting().reservations:
        tint = np.array(palette.rgba(r.req_id))
        slots[r.start : r.start + r.used] = tint
        slots[r.start + r.used : r.start + r.final_len] = light_tint(tint)
        slots[r.start + r.final_len : r.start + r.length] = _rgba("internal_fragmentation")
        reserved += range(r.start + r.used, r.start + r.final_len)
        internal += range(r.start + r.final_len, r.start + r.length)
    for start, length in external_holes(cache):
        slots[start : start + length] = _rgba("external_fragmentation")
        external += range(start, start + length)
    marks = {".": np.array(reserved, int), "x": np.array(internal, int), "$/$": np.array(external, int)}
    return slots, marks
