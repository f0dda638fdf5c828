"""The same workload in a paged pool and in contiguous one-reservation-per-request memory.

The run's snapshots say which sequences were live at each step and how long they were.
`contiguous_replay` feeds exactly that to a `ContiguousKVCache` over the same number of slots:
a sequence that appears is admitted with a reservation (first fit, sized by the policy for
its final length, which the replay knows because it has seen the whole run), every token it
gains fills one reserved slot, and a sequence that disappears frees its range. A fork is a
new request there: contiguous memory cannot share.

`plot_paged_vs_contiguous` draws both memories slot by slot (flat slot order, wrapped into
rows) with the vLLM paper's categories (Kwon et al., SOSP 2023, Fig. 2): token states,
reserved for tokens not generated yet, internal fragmentation (reserved beyond the final
length), external fragmentation (holes too small for the next request), free. In the paged
pool the only waste is the empty tail of each sequence's last page.

Leaves out: the time dimension (see `plot_usage`) and allocators other than first fit.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from ..contiguous import ContiguousKVCache, NoContiguousHoleError
from ..page import PageState
from ..pool import PoolSnapshot
from .palette import DEFAULT_PALETTE, STATE_COLORS, SequencePalette
from .usage import EMPTY_SLOT_COLOR, slot_usage

EXTERNAL_COLOR = "#F3C6B3"  # a light vermillion: free slots no request can use
INTERNAL_COLOR = "#8C8C8C"  # reserved and never to be filled
FREE_SLOT_COLOR = STATE_COLORS[PageState.FREE]


def _lengths(snapshot: PoolSnapshot) -> dict[Hashable, int]:
    """seq id -> tokens, from the fill of the pages in its block table."""
    return {
        s: int(snapshot.fill[list(t)].sum()) if t else 0 for s, t in snapshot.block_tables.items()
    }


def _check_step(snapshots: Sequence[PoolSnapshot], step: int | None) -> int:
    if not snapshots or not all(isinstance(s, PoolSnapshot) for s in snapshots):
        raise ValueError("snapshots must be a non-empty sequence of PoolSnapshot")
    if step is None:
        return len(snapshots) - 1
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < len(snapshots):
        raise ValueError(f"step must be an int in [0, {len(snapshots) - 1}], got {step!r}")
    return step


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
    step = _check_step(snapshots, step)
    lengths = [_lengths(s) for s in snapshots]
    # A sequence's final length is its longest within one life (an id can be reused later).
    finals: list[dict[Hashable, int]] = [{} for _ in lengths]
    alive: dict[Hashable, int] = {}  # seq id -> index of the snapshot where its life started
    for i, now in enumerate([*lengths, {}]):
        for seq_id in [s for s in alive if s not in now]:
            start = alive.pop(seq_id)
            final = max(lengths[j][seq_id] for j in range(start, i))
            for j in range(start, i):
                finals[j][seq_id] = final
        for seq_id in now:
            alive.setdefault(seq_id, i)
    longest = max([1, *(v for f in finals for v in f.values())])
    num_slots = snapshots[-1].num_pages * snapshots[-1].page_size
    if max_seq_len is None:
        max_seq_len = min(1 << (longest - 1).bit_length(), num_slots)
    cache = ContiguousKVCache(num_slots, policy, max_seq_len)
    refused: list[Hashable] = []
    before: dict[Hashable, int] = {}
    for now, final in zip(lengths[: step + 1], finals[: step + 1], strict=True):
        for seq_id in before:
            if seq_id not in now and seq_id in cache:
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
    return cache, refused


def compare_layouts(
    snapshots: Sequence[PoolSnapshot],
    policy: str = "max",
    max_seq_len: int | None = None,
    step: int | None = None,
) -> dict[str, object]:
    """Slot counts per category at `step` (default: the last) for the paged pool and the
    contiguous replay of the same run."""
    step = _check_step(snapshots, step)
    cache, refused = contiguous_replay(snapshots, policy, max_seq_len, step)
    acc = cache.accounting()
    return {
        "paged": slot_usage(snapshots[step]),
        "contiguous": {k: v for k, v in acc.as_dict().items() if k != "num_slots"},
        "refused": refused,
        "max_seq_len": cache.max_seq_len,
    }


def _row_width(num_slots: int, page_size: int) -> int:
    width = page_size
    while width * 2 <= 64 and num_slots / (width * 2) >= 4:
        width *= 2
    return width


def _draw_strip(
    ax,
    colors: np.ndarray,
    marks: dict[str, np.ndarray],
    boxes: list[tuple[int, int]],
    width: int,
    title: str,
) -> None:
    """Slots in flat order wrapped into rows of `width`; boxes outline (start, length) runs."""
    n = len(colors)
    rows = -(-n // width)
    image = np.ones((rows * width, 4))
    image[:n] = colors
    ax.imshow(image.reshape(rows, width, 4), interpolation="nearest", aspect="auto")
    for marker, slots in marks.items():
        if len(slots):
            ax.scatter(
                slots % width, slots // width, marker=marker, s=14, color="#333333", linewidths=0.7
            )
    for start, length in boxes:
        slot = start
        while slot < start + length:  # one outline per row the run crosses
            r, c = divmod(slot, width)
            span = min(width - c, start + length - slot)
            ax.add_patch(
                Rectangle((c - 0.5, r - 0.5), span, 1, fill=False, edgecolor="black", linewidth=1.3)
            )
            slot += span
    ax.set_xticks([])
    ax.set_yticks(range(rows), [str(r * width) for r in range(rows)], fontsize=7)
    ax.set_ylabel("first slot of row", fontsize=8)
    ax.set_title(title, fontsize=10, loc="left")


def plot_paged_vs_contiguous(
    snapshots: Sequence[PoolSnapshot],
    policy: str = "max",
    max_seq_len: int | None = None,
    step: int | None = None,
    palette: SequencePalette | None = None,
) -> Figure:
    """Side by side at `step` (default: the last): the paged pool and the contiguous replay."""
    palette = palette if palette is not None else DEFAULT_PALETTE
    step = _check_step(snapshots, step)
    cache, refused = contiguous_replay(snapshots, policy, max_seq_len, step)
    snap = snapshots[step]
    size, num_slots = snap.page_size, snap.num_pages * snap.page_size
    width = _row_width(num_slots, size)
    # paged: slot = page_id * page_size + offset
    paged = np.tile(to_rgba(FREE_SLOT_COLOR), (num_slots, 1))
    empty = []
    for pid in range(snap.num_pages):
        slots = slice(pid * size, (pid + 1) * size)
        if snap.state[pid] == PageState.ACTIVE:
            color = to_rgba(palette.color(snap.seq_ids[snap.owner[pid]]))
            paged[slots] = to_rgba(EMPTY_SLOT_COLOR)
            paged[pid * size : pid * size + snap.fill[pid]] = color
            empty += range(pid * size + int(snap.fill[pid]), (pid + 1) * size)
        elif snap.state[pid] == PageState.CACHED:
            paged[slots] = to_rgba(STATE_COLORS[PageState.CACHED])
    # contiguous: reservations, then holes
    acc = cache.accounting()
    cont = np.tile(to_rgba(FREE_SLOT_COLOR), (num_slots, 1))
    reserved, internal, external = [], [], []
    for r in acc.reservations:
        color = np.array(to_rgba(palette.color(r.req_id)))
        cont[r.start : r.start + r.used] = color
        cont[r.start + r.used : r.start + r.final_len] = 0.45 * color + 0.55  # a light tint
        cont[r.start + r.final_len : r.start + r.length] = to_rgba(INTERNAL_COLOR)
        reserved += range(r.start + r.used, r.start + r.final_len)
        internal += range(r.start + r.final_len, r.start + r.length)
    need = cache.reservation_size(cache.max_seq_len)
    for start, length in cache.holes():
        if length < need:
            cont[start : start + length] = to_rgba(EXTERNAL_COLOR)
            external += range(start, start + length)
    fig = Figure(figsize=(11, 1.9 + 0.36 * (num_slots // width) * 2), dpi=90, layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(2, 2, width_ratios=[3.2, 1])
    usage = slot_usage(snap)
    _draw_strip(
        fig.add_subplot(grid[0, 0]),
        paged,
        {"x": np.array(empty, int)},
        [(pid * size, size) for pid in range(snap.num_pages)],
        width,
        f"paged: {snap.num_pages} pages of {size} slots, {len(snap.seq_ids)} sequences, "
        f"{usage['tokens'] / num_slots:.0%} of slots hold tokens",
    )
    title = (
        f"contiguous ({policy!r}, max_seq_len {cache.max_seq_len}): {len(cache)} sequences, "
        f"{acc.token_states / num_slots:.0%} of slots hold tokens"
    )
    if refused:
        title += f"\nrefused (no hole fits): {', '.join(map(str, refused))}"
    _draw_strip(
        fig.add_subplot(grid[1, 0]),
        cont,
        {
            ".": np.array(reserved, int),
            "x": np.array(internal, int),
            "$/$": np.array(external, int),
        },
        [(r.start, r.length) for r in acc.reservations],
        width,
        title,
    )
    bars = fig.add_subplot(grid[:, 1])
    categories = [
        ("token states", usage["tokens"], acc.token_states, "#333333"),
        ("reserved (future tokens)", 0, acc.reserved, "#BBBBBB"),
        (
            "internal fragmentation",
            usage["internal_fragmentation"],
            acc.internal_fragmentation,
            INTERNAL_COLOR,
        ),
        ("external fragmentation", 0, acc.external_fragmentation, EXTERNAL_COLOR),
        ("CACHED / free", usage["cached"] + usage["free"], acc.free, FREE_SLOT_COLOR),
    ]
    left = np.zeros(2)
    for label, p, c, color in categories:
        values = np.array([p, c]) / num_slots
        bars.barh([1, 0], values, left=left, color=color, edgecolor="white", label=label)
        left += values
    bars.set_yticks([1, 0], ["paged", "contiguous"])
    bars.set_xlim(0, 1)
    bars.xaxis.set_major_formatter(lambda v, _: f"{v:.0%}")
    bars.set_title("share of slots", fontsize=10, loc="left")
    bars.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.08), frameon=False)
    handles = [
        Patch(facecolor="#999999", label="token (in its sequence's colour)"),
        Patch(facecolor=EMPTY_SLOT_COLOR, edgecolor="#333333", label="× empty slot of a page"),
        Patch(facecolor="#DDDDDD", label="· reserved for a future token (light tint)"),
        Patch(facecolor=INTERNAL_COLOR, label="× reserved, never used (internal)"),
        Patch(facecolor=EXTERNAL_COLOR, label="/ hole too small (external)"),
        Patch(facecolor=STATE_COLORS[PageState.CACHED], label="CACHED page"),
        Patch(facecolor=FREE_SLOT_COLOR, label="free"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=4, fontsize=8, frameon=False)
    return fig
