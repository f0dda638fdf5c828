"""Token-level vs page-level usage: slots holding tokens against pages in use.

A paged cache hands out whole pages, so the pool is always a little fuller by pages than by
tokens: each sequence's last page is partly empty (internal fragmentation, at most
`page_size - 1` slots per sequence). Two pictures, both read from `PoolSnapshot`s:

- `plot_slots(snapshot)`: every slot of the pool, one column of `page_size` slots per page:
  slots holding a token in the colour of the sequence that owns the page, empty slots of
  ACTIVE pages marked as internal fragmentation, CACHED and FREE pages in their state colours;
- `plot_usage(snapshots)`: page usage (`usage`, vLLM's `kv_cache_usage_perc`) and token usage
  over the steps of a run, with CACHED pages stacked on top (reusable, but counted as free),
  and the steps the pool refused marked.

`sharing_savings(snapshot)` counts what sharing saves: block-table entries against the
distinct pages they point to (a forked or prefix-hit page is stored once, held many times).

Leaves out: memory in bytes (multiply slots by `CacheConfig.bytes_per_token`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from pagedkv.core.observe.snapshot import PoolSnapshot
from pagedkv.core.page import PageState
from pagedkv.core.plumbing.validation import check_instance, check_int, check_items
from pagedkv.viz.palette import DEFAULT_PALETTE, STATE_COLORS, SequencePalette
from pagedkv.viz.projector import projector

REFUSED_COLOR = "#D55E00"  # a refused step (vermilion: no request colour)
EMPTY_SLOT_COLOR = "#8C8C8C"  # an empty slot of an ACTIVE page, grey and crossed as in slot_layout.py
EMPTY_HATCH = "xx"  # slot_layout.STYLES["internal_fragmentation"]'s hatch


def slot_usage(snapshot: PoolSnapshot) -> dict[str, int]:
    """Slots by what they hold: tokens (ACTIVE pages), empty in ACTIVE pages (internal
    fragmentation), CACHED (reusable prefix K/V) and FREE. They sum to all slots."""
    check_instance("snapshot", snapshot, PoolSnapshot)
    active = snapshot.state == PageState.ACTIVE
    size = snapshot.page_size
    return {
        "tokens": int(snapshot.fill[active].sum()),
        "internal_fragmentation": int((size - snapshot.fill[active]).sum()),
        "cached": int(np.count_nonzero(snapshot.state == PageState.CACHED)) * size,
        "free": int(np.count_nonzero(snapshot.state == PageState.FREE)) * size,
    }


def sharing_savings(snapshot: PoolSnapshot) -> dict[str, float]:
    """What sharing saves at this moment: `block_table_entries` (pages the live sequences
    would hold without sharing), `distinct_pages` (pages they do hold), `pages_saved` (the
    difference) and `saved` (pages_saved / block_table_entries, 0 with no sequence)."""
    check_instance("snapshot", snapshot, PoolSnapshot)
    entries = sum(len(t) for t in snapshot.block_tables.values())
    distinct = len({p for t in snapshot.block_tables.values() for p in t})
    return {
        "block_table_entries": entries,
        "distinct_pages": distinct,
        "pages_saved": entries - distinct,
        "saved": (entries - distinct) / entries if entries else 0.0,
    }


def plot_slots(snapshot: PoolSnapshot, palette: SequencePalette | None = None) -> Figure:
    """Every slot of the pool: one column per page, `page_size` slots from top to bottom."""
    counts = slot_usage(snapshot)
    palette = palette if palette is not None else DEFAULT_PALETTE
    n, size = snapshot.num_pages, snapshot.page_size
    fig = Figure(
        figsize=(min(14.0, max(6.0, 0.32 * n + 1.5)), 1.6 + 0.22 * size),
        dpi=90,
        layout="constrained",
    )
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.imshow(_slot_image(snapshot, palette), interpolation="nearest", aspect="auto")
    empty = np.argwhere(
        (snapshot.state == PageState.ACTIVE)[None, :] & (np.arange(size)[:, None] >= snapshot.fill[None, :])
    )
    for page, place in zip(empty[:, 1], empty[:, 0]):  # crossed as in notebook 00's picture
        ax.add_patch(
            Rectangle((page - 0.5, place - 0.5), 1, 1, fill=False, hatch=EMPTY_HATCH, ec="#444444", lw=0)
        )
    _draw_page_grid(ax, n, size)
    total = n * size
    ax.set_title(
        f"{counts['tokens']} of {total} slots hold tokens ({counts['tokens'] / total:.0%}); "
        f"pages in use: {snapshot.usage:.0%}\n{counts['internal_fragmentation']} empty slots in "
        f"ACTIVE pages, {counts['cached']} in CACHED pages, {counts['free']} slots of FREE pages",
        fontsize=10,
        loc="left",
    )
    _slots_legend(fig, snapshot, counts, palette)
    return projector(fig)


def _slot_image(snapshot: PoolSnapshot, palette: SequencePalette) -> np.ndarray:
    """[slot offset, page id, RGBA]: an ACTIVE page's tokens in its owner's colour, then its
    empty slots; other pages in their state's colour."""
    image = np.ones((snapshot.page_size, snapshot.num_pages, 4))
    for pid in range(snapshot.num_pages):
        state = PageState(int(snapshot.state[pid]))
        if state is PageState.ACTIVE:
            owner = snapshot.seq_ids[snapshot.owner[pid]]
            image[: snapshot.fill[pid], pid] = to_rgba(palette.color(owner))
            image[snapshot.fill[pid] :, pid] = to_rgba(EMPTY_SLOT_COLOR)
        else:
            image[:, pid] = to_rgba(STATE_COLORS[state])
    return image


def _draw_page_grid(ax: Axes, n: int, size: int) -> None:
    """A thin line between slots, a thick one between pages, and ticks that stay readable."""
    ax.set_xticks(np.arange(-0.5, n, 1), minor=True)
    ax.set_yticks(np.arange(-0.5, size, 1), minor=True)
    ax.grid(which="minor", color="#BBBBBB", linewidth=0.4)
    ax.grid(which="major", visible=False)
    ax.tick_params(which="minor", length=0)
    for x in np.arange(-0.5, n, 1):
        ax.axvline(x, color="black", linewidth=1.2)
    step = 1 if n <= 32 else 4 if n <= 128 else 16
    ax.set_xticks(range(0, n, step))
    ax.set_yticks(range(size) if size <= 16 else range(0, size, size // 8))
    ax.set_xlabel("page id (each column: one page)")
    ax.set_ylabel("slot offset")


def _slots_legend(
    fig: Figure, snapshot: PoolSnapshot, counts: dict[str, int], palette: SequencePalette
) -> None:
    """A row with a swatch per page owner (the first 4, in admission order), then a row with
    only the kinds of slot the picture shows."""
    owners = [snapshot.seq_ids[i] for i in sorted(set(snapshot.owner[snapshot.owner >= 0].tolist()))]
    top = [Patch(color=palette.color(s), label=f"token of {s}") for s in owners[:4]]
    internal = "× internal fragmentation: empty slot of a last page"
    present = [
        (counts["internal_fragmentation"], EMPTY_SLOT_COLOR, EMPTY_HATCH, internal),
        (counts["cached"], STATE_COLORS[PageState.CACHED], None, "CACHED page"),
        (counts["free"], STATE_COLORS[PageState.FREE], None, "FREE page"),
    ]
    bottom = [
        Patch(fc=color, ec="#444444", hatch=hatch, label=label)
        for count, color, hatch, label in present
        if count
    ]
    ncols = max(len(top), len(bottom), 1)
    blank = Patch(fill=False, visible=False, label=" ")  # keeps the rows apart, paints nothing
    rows = [row + [blank] * (ncols - len(row)) for row in (top, bottom) if row]
    handles = [row[c] for c in range(ncols) for row in rows]  # the legend fills column by column
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncols=ncols,
        fontsize=8,
        frameon=False,
    )


def plot_usage(snapshots: Sequence[PoolSnapshot], title: str = "", refused: Sequence[int] = ()) -> Figure:
    """Page usage vs token usage over a run's steps (`ScenarioRun.snapshots`); each step in
    `refused` (e.g. a decode step the pool could not serve) is marked by a red dashed line
    and named, since its snapshot equals the one before and the curves show nothing there."""
    check_items("snapshots", snapshots, PoolSnapshot)
    marked = sorted({check_int("refused step", k, 1, len(snapshots) - 1) for k in refused})
    steps = np.arange(len(snapshots))
    pages = np.array([s.usage for s in snapshots])
    tokens = np.array([s.token_usage for s in snapshots])
    cached = np.array([np.count_nonzero(s.state == PageState.CACHED) / s.num_pages for s in snapshots])
    fig = Figure(figsize=(7.5, 2.6), dpi=90, layout="constrained")  # 1,210 x 419 px once widened: one screen
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if cached.any():  # the legend names only what the picture shows
        ax.fill_between(
            steps,
            pages,
            pages + cached,
            step="post",
            color=STATE_COLORS[PageState.CACHED],
            alpha=0.5,
            label="CACHED pages (reusable, count as free)",
        )
    ax.step(
        steps,
        pages,
        where="post",
        color=STATE_COLORS[PageState.ACTIVE],
        linewidth=2,
        label="page usage: ACTIVE pages / pages",
    )
    ax.step(
        steps,
        tokens,
        where="post",
        color="#000000",
        linestyle="--",
        linewidth=1.5,
        label="token usage: slots holding tokens / slots",
    )
    ax.set_ylim(0, 1.02)
    ax.set_xlim(0, max(1, len(snapshots) - 1) + (0.4 if marked else 0))
    for k in marked:
        ax.axvline(k, color=REFUSED_COLOR, linestyle="--", linewidth=2)
        note = f"step {k}: refused,\nnothing changed"
        ax.text(k - 0.15, 0.5, note, ha="right", va="center", fontsize=13, color=REFUSED_COLOR,
                bbox={"facecolor": "white", "edgecolor": "none"})  # fmt: skip
    ax.yaxis.set_major_formatter(lambda v, _: f"{v:.0%}")
    ax.set_xlabel("step")
    ax.set_ylabel("share of the pool")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(
        title or "token-level vs page-level usage (the gap is internal fragmentation)",
        fontsize=10,
        loc="left",
    )
    return projector(fig)


def plot_series(series: dict[str, Sequence[float]], xlabel: str, ylabel: str, title: str = "") -> Figure:
    """One line per named series over a shared x (e.g. the naive cache and pagedkv, request by
    request): the side-by-side pictures of notebook 08."""
    if not series:
        raise ValueError("series must name at least one line")
    fig = Figure(figsize=(11, 3.6), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for k, (name, ys) in enumerate(series.items()):
        ax.plot(range(1, len(ys) + 1), ys, lw=2.5, label=name, color=("#D55E00", "#0072B2", "#009E73")[k % 3])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, loc="left")
    ax.legend(loc="best")
    ax.grid(alpha=0.3)
    return projector(fig)


def plot_page_states(states: dict[str, Sequence[int]], xlabel: str, title: str = "") -> Figure:
    """Pages in each state after each request, stacked in the order given (e.g. FREE under
    CACHED), in the pool heatmap's state colours: where a pool's pages go over a run. The top
    edge is the pages counted; the legend, right of the axes, lists the states top band first,
    as they stack. Same size as `plot_series`, x from 1."""
    if not states:
        raise ValueError("states must name at least one page state")
    unknown = set(states) - {s.name for s in PageState}
    if unknown:
        raise ValueError(f"states must be page state names, got {sorted(unknown)}")
    fig = Figure(figsize=(11, 3.6), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    xs = range(1, len(next(iter(states.values()))) + 1)
    colors = [STATE_COLORS[PageState[name]] for name in states]
    ax.stackplot(xs, *states.values(), labels=list(states), colors=colors, edgecolor="#333333", lw=1)
    ax.set_xlim(xs.start, xs.stop - 1)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("pages")
    ax.set_title(title, loc="left")
    handles, labels = ax.get_legend_handles_labels()
    # Right of the axes, one state per row, top state first: the legend stacks as the bands do.
    legend = ax.legend(handles[::-1], labels[::-1], loc="upper left", bbox_to_anchor=(1.01, 1))
    legend.set_in_layout(True)
    return projector(fig)
