"""The block-table view: each sequence's logical blocks mapped to physical pages.

One row per live sequence (oldest first), one cell per logical block, labelled with the
physical page id that holds it and filled with the sequence's colour. Marks, all read from a
`PoolSnapshot`:

- **shared** pages (ref count > 1: the same page id in several rows) are hatched and carry
  "×n", the number of block tables holding them;
- **prefix hits** (the first `num_cached_tokens / page_size` blocks, found in the prefix
  index at admission) have a thick dashed green frame, unlike any request's solid fill; a
  fork child's pages, shared by reference from its parent, do not (given the pool's
  events): they are hatched like any shared page;
- **copy-on-write** pages (destinations in the COW log still in the table) have a
  vermillion frame and say which page they were copied from, in the row of the sequence
  that made the copy only (given the pool's events): a later fork of it shares the page
  hatched, unframed.

`plot_block_tables` draws a matplotlib figure (notebooks); `block_table_html` renders the
same information as an HTML table (the dashboard: no image to encode on every step). This
is vLLM's `BlockTable` made visible; nothing in vLLM draws it. Leaves out: rows longer than
`max_blocks` blocks are cut and say how many blocks were left out.
"""

from __future__ import annotations

import html
from collections.abc import Hashable, Iterable, Mapping
from collections.abc import Sequence as SequenceLike

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from pagedkv.core.observe.snapshot import PoolSnapshot
from pagedkv.core.plumbing.events import Event
from pagedkv.core.plumbing.validation import check_instance
from pagedkv.viz.palette import DEFAULT_PALETTE, HIT_COLOR, VICTIM_COLOR, SequencePalette
from pagedkv.viz.projector import MIN_PT, projector
from pagedkv.viz.tokens import token_pages_html

COW_COLOR = VICTIM_COLOR  # vermillion: the page that was written was a copy
# a prefix hit: dashed, so its green never reads as the teal fill of a request
HIT_BORDER = f"4px dashed {HIT_COLOR}"


def _marks(
    snapshot: PoolSnapshot, events: Iterable[Event] | None
) -> tuple[dict[Hashable, int], dict[int, tuple[int, Hashable | None]]]:
    """(seq id -> prefix-hit blocks, page that is a COW copy -> (the page it was copied
    from, the sequence that made the copy: None without events)).

    The COW log names (source, destination) pairs but a destination page can later be freed
    and handed to another sequence; with the pool's events (all of them, from its creation)
    a page counts as a copy only if no allocation came after its copy. Without events every
    destination in the log still held by a block table is marked, in every row holding it.

    A fork child inherits its parent's `num_cached_tokens`, but it got those pages by
    reference from its parent, not from the prefix index: with events, a sequence whose
    latest start was a fork (a `fork` event, no `prefix_hit` after it) has no hit blocks.
    Its shared pages still show their ×ref count."""
    hits = {s: n // snapshot.page_size for s, n in snapshot.num_cached_tokens.items()}
    if events is None:
        return hits, {dst: (src, None) for src, dst in snapshot.cow_log}
    cow: dict[int, tuple[int, Hashable | None]] = {}
    forked: set[Hashable] = set()
    copies = iter(snapshot.cow_log)  # the k-th "cow" event is the k-th pair of the log
    for event in events:
        if event.kind == "allocate":
            cow.pop(event.page_id, None)
        elif event.kind == "cow":
            src, dst = next(copies)
            cow[dst] = (src, event.seq_id)
        elif event.kind == "fork":
            forked.add(event.seq_id)
        elif event.kind == "prefix_hit":
            forked.discard(event.seq_id)
    return {s: 0 if s in forked else n for s, n in hits.items()}, cow


def _mark(
    block: int,
    page: int,
    hit_blocks: int,
    cow: dict[int, tuple[int, Hashable | None]],
    seq_id: Hashable,
) -> str | None:
    """How one block table entry is outlined: "hit" if this table found the page in the
    prefix index (a page that was once a copy, found later by another request, is a hit for
    that request), else "cow" if this sequence made the copy (the copy mark belongs to the
    table that made it, not to a fork that shares it later), else nothing."""
    if block < hit_blocks:
        return "hit"
    if page not in cow:
        return None
    maker = cow[page][1]
    return "cow" if maker is None or maker == seq_id else None


def _check(snapshot: object, palette: object) -> SequencePalette:
    check_instance("snapshot", snapshot, PoolSnapshot)
    if palette is None:
        return DEFAULT_PALETTE
    return check_instance("palette", palette, SequencePalette)


def plot_block_tables(
    snapshot: PoolSnapshot,
    palette: SequencePalette | None = None,
    events: Iterable[Event] | None = None,
    max_blocks: int = 32,
    step: int | None = None,
) -> Figure:
    """A figure of every live sequence's block table (first `max_blocks` blocks). Pass the
    pool's `events` (e.g. `ScenarioRun.events`) for exact copy-on-write marks, and a run's
    `step` to title it by step rather than by the pool's clock (one tick per operation)."""
    palette = _check(snapshot, palette)
    seqs = list(snapshot.seq_ids)
    hits, cow = _marks(snapshot, events)
    width = max([1, *(min(len(t), max_blocks) for t in snapshot.block_tables.values())])
    fig = Figure(
        figsize=(max(7.0, 1.2 + 0.62 * width), 1.1 + 0.5 * max(1, len(seqs))),
        dpi=90,
        layout="constrained",
    )
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    shown: set[str] = set()  # marks drawn: the legend keys only those
    for row, seq_id in enumerate(seqs):
        table = snapshot.block_tables[seq_id]
        for block, page in enumerate(table[:max_blocks]):
            refs = int(snapshot.ref_count[page])
            mark = _mark(block, page, hits.get(seq_id, 0), cow, seq_id)
            shown |= {m for m in (mark, "shared" if refs > 1 else None) if m}
            label = f"{page}" + (f" ×{refs}" if refs > 1 else "")
            if mark == "cow":
                label += f"\n←{cow[page][0]}"
            _draw_cell(ax, block, row, label, refs, mark, palette.color(seq_id), palette.text_color(seq_id))
        if len(table) > max_blocks:
            ax.text(max_blocks, row + 0.5, f" +{len(table) - max_blocks}", va="center", fontsize=8)
    _label_axes(ax, snapshot, seqs, width, step)
    _legend(fig, shown)
    return projector(fig)


def _draw_cell(
    ax: Axes, block: int, row: int, label: str, refs: int, mark: str | None, color: str, text_color: str
) -> None:
    """One block table entry: a cell in the sequence's colour, hatched when the page is
    shared, edged for a prefix hit or a copy-on-write, with the page id written in it."""
    edge, lw = {"cow": (COW_COLOR, 3.0), "hit": (HIT_COLOR, 4.0)}.get(mark or "", ("black", 0.8))
    ax.add_patch(
        Rectangle(
            (block + 0.06, row + 0.08),
            0.88,
            0.84,
            facecolor=color,
            edgecolor=edge,
            linewidth=lw,
            linestyle="--" if mark == "hit" else "-",
            hatch="//" if refs > 1 else None,
        )
    )
    ax.text(
        block + 0.5,
        row + 0.5,
        label,
        ha="center",
        va="center",
        fontsize=8,
        color=text_color,
        fontweight="bold",
        # a box of the cell's colour keeps the hatch off the text
        bbox={"facecolor": color, "edgecolor": "none", "pad": 2.5} if refs > 1 else None,
    )


def _label_axes(ax: Axes, snapshot: PoolSnapshot, seqs: list, width: int, step: int | None = None) -> None:
    """Rows by sequence, columns by logical block, the step (or clock) and page size in the title."""
    ax.set_xlim(0, width)
    ax.set_ylim(max(1, len(seqs)), 0)
    ax.set_yticks(np.arange(len(seqs)) + 0.5, [str(s) for s in seqs], fontsize=9)
    ax.set_xticks(np.arange(width) + 0.5, [str(b) for b in range(width)], fontsize=8)
    ax.set_xlabel("logical block  (each cell: the physical page id that holds it)", fontsize=9)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_title(
        (
            f"block tables after step {step}"
            if step is not None
            else f"block tables at pool clock {snapshot.clock}"
        )
        + f" (page_size {snapshot.page_size})",
        fontsize=10,
        loc="left",
    )
    if not seqs:
        ax.text(width / 2, 0.5, "no live sequence", ha="center", va="center", color="#666666")


def _legend(fig: Figure, shown: set[str]) -> None:
    """A key for each mark the picture shows (none when it shows none), laid out at the
    picture's smallest text size so its swatches are as large as its words."""
    keys = {
        "shared": Patch(facecolor="white", edgecolor="black", hatch="//", label="shared page (×ref count)"),
        "hit": Patch(
            facecolor="white", edgecolor=HIT_COLOR, linewidth=3.0, linestyle="--", label="prefix hit"
        ),
        "cow": Patch(facecolor="white", edgecolor=COW_COLOR, linewidth=2.5, label="copy-on-write (←source)"),
    }
    handles = [patch for mark, patch in keys.items() if mark in shown]
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncols=3, fontsize=MIN_PT, frameon=False)


def _cell_html(
    snapshot: PoolSnapshot,
    seq_id: Hashable,
    block: int,
    page: int,
    colors: tuple[str, str],
    hit_blocks: int,
    cow: dict[int, tuple[int, Hashable | None]],
) -> str:
    """One block-table cell of `block_table_html`: the page id (×n when shared, ←source for a
    copy-on-write this sequence made), its outline and its tooltip."""
    refs = int(snapshot.ref_count[page])
    border, title = "1px solid #444", f"block {block} -> page {page}, ref count {refs}"
    mark = _mark(block, page, hit_blocks, cow, seq_id)
    if mark == "cow":
        border, title = f"3px solid {COW_COLOR}", title + f", copy-on-write from page {cow[page][0]}"
    elif mark == "hit":
        border, title = HIT_BORDER, title + ", prefix hit"
    shared = (
        "background-image:repeating-linear-gradient(45deg,transparent 0 4px,rgba(255,255,255,.45) 4px 6px);"
        if refs > 1
        else ""
    )
    source = f"←{cow[page][0]}" if mark == "cow" else ""
    label = f"{page}" + (f"×{refs}" if refs > 1 else "") + source
    color, text_color = colors
    return (
        f'<td title="{html.escape(title)}" style="background:{color};color:{text_color};'
        f'border:{border};{shared}padding:1px 4px;text-align:center;min-width:2.2em">'
        f"{label}</td>"
    )


def block_table_html(
    snapshot: PoolSnapshot,
    palette: SequencePalette | None = None,
    events: Iterable[Event] | None = None,
    max_blocks: int = 64,
    token_ids: Mapping[Hashable, SequenceLike[int]] | None = None,
) -> str:
    """The block tables as an HTML table (same colours and marks as `plot_block_tables`);
    with `token_ids` (seq id -> tokens), followed by each sequence's text boxed by page; the
    table's key (what a cell and its marks mean) comes last."""
    palette = _check(snapshot, palette)
    hits, cow = _marks(snapshot, events)
    rows = []
    for seq_id in snapshot.seq_ids:
        color, text_color = palette.color(seq_id), palette.text_color(seq_id)
        table = snapshot.block_tables[seq_id]
        hit_blocks = hits.get(seq_id, 0)
        cells = [
            _cell_html(snapshot, seq_id, block, page, (color, text_color), hit_blocks, cow)
            for block, page in enumerate(table[:max_blocks])
        ]
        more = f"<td>+{len(table) - max_blocks}</td>" if len(table) > max_blocks else ""
        rows.append(
            f"<tr><th style='text-align:right;padding-right:6px'>{html.escape(str(seq_id))}"
            f"</th>{''.join(cells)}{more}</tr>"
        )
    body = "".join(rows) or "<tr><td><i>no live sequence</i></td></tr>"
    key = (
        f"<div style='font-size:14px;margin-top:3px'>cell: the page of a logical block · "
        f"hatched ×n: shared by n tables · <span style='white-space:nowrap'>"  # the boxes wrap together
        f"<span style='border:{HIT_BORDER};padding:0 3px'>prefix hit</span> "
        f"<span style='border:3px solid {COW_COLOR};padding:0 3px'>copy-on-write (copy←source)</span>"
        "</span></div>"
    )
    tokens = "" if token_ids is None else token_pages_html(snapshot, token_ids, palette)
    # the key last: the dashboard's scrolling box then shows whole tokens-by-page rows at 1280x720
    return (
        f"<div class='pagedkv-block-table-view'><b>block tables</b>"
        f"<table style='border-collapse:separate;border-spacing:2px;font-size:14px'>{body}</table>"
        f"{tokens}{key}</div>"
    )
