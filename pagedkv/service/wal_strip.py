"""The write-ahead log at a crash, and what recovery does with it, as one strip.

`plot_wal_strip(records, recovery)` draws the store's records by sequence number on two rows.
The top row is what is on disk when the process dies: the checkpoint, one block holding the
effect of records 1..checkpoint_seq (the records themselves are gone from the file), then
each whole record the log file (wal.log) still holds, one cell per record, then the torn
bytes of the record that was being written, if any: one hatched cell, drawn at least
`TORN_MIN_SHARE` of the axis wide (a single record's width can be 2 px) and labelled with its
record number under the axis. The bottom row is what `recover` does with each part:
loads the checkpoint, replays each whole record in order (or rolls back the records of a
request cut off half-way), drops the torn bytes.

Everything comes from the run: `records` as `read_log` returns them (read before recovery,
which cuts the torn tail off the file) and the report `recover` leaves in
`manager.recovery`. A report that does not fit the records is refused with a ValueError.

Leaves out: the records' contents (print a record's payload to see one) and their sizes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from pagedkv.core.plumbing.validation import check_instance, check_items
from pagedkv.service.wal import Record
from pagedkv.viz.projector import projector

CHECKPOINT_COLOR = "#56B4E9"  # Okabe–Ito sky blue: the checkpoint and its loading
RECORD_COLOR = "#CC79A7"  # Okabe–Ito reddish purple: whole records, and their replay
ROLLED_BACK_COLOR = "#999999"  # records of a request cut off half-way, undone
TORN_COLOR = "#D55E00"  # Okabe–Ito vermilion: the torn bytes at the end of the file
REPORT_KEYS = ("checkpoint_seq", "records_replayed", "torn_bytes", "discarded_records")
DISK, RECOVERY = 1.0, 0.0  # the rows' y
TICK_PT = 15  # tick and row labels: 15 pt at 110 dpi is 15.6 px in an 848 px cell
TORN_MIN_SHARE = 0.06  # the torn cell's least drawn width, as a share of the records drawn


def wal_strip_parts(records: Sequence[Record], recovery: Mapping[str, object]) -> dict[str, int]:
    """The strip's numbers, checked against each other: `checkpoint_seq`, `first` and `last`
    (the log's whole records), `replayed`, `rolled_back`, `torn_bytes`."""
    check_items("records", records, Record)
    check_instance("recovery", recovery, Mapping)
    missing = [k for k in REPORT_KEYS if k not in recovery]
    if missing:
        raise ValueError(f"recovery must be a report of recover() (manager.recovery); it lacks {missing}")
    found = {k: recovery[k] for k in REPORT_KEYS}
    parts = {k: v for k, v in found.items() if type(v) is int and v >= 0}
    if len(parts) < len(found):
        raise ValueError(f"recovery's {list(REPORT_KEYS)} must be counts (ints >= 0), got {found}")
    checkpoint, replayed = parts["checkpoint_seq"], parts["records_replayed"]
    rolled_back = parts["discarded_records"]
    kept = [r for r in records if r.seq > checkpoint]  # recovery skips older ones: the checkpoint has them
    if not kept:
        raise ValueError(f"records holds no record after the checkpoint's {checkpoint}: nothing to draw")
    if [r.seq for r in kept] != list(range(checkpoint + 1, checkpoint + 1 + len(kept))):
        raise ValueError(
            f"records must run on from the checkpoint's record {checkpoint} without a gap; "
            f"they are {kept[0].seq}..{kept[-1].seq} ({len(kept)} records)"
        )
    if replayed + rolled_back != len(kept):
        raise ValueError(
            f"the report replays {replayed} and rolls back {rolled_back} records, but records holds "
            f"{len(kept)} after the checkpoint: pass read_log's records from before this recovery"
        )
    return {
        "checkpoint_seq": checkpoint,
        "first": kept[0].seq,
        "last": kept[-1].seq,
        "replayed": replayed,
        "rolled_back": rolled_back,
        "torn_bytes": parts["torn_bytes"],
    }


def plot_wal_strip(records: Sequence[Record], recovery: Mapping[str, object]) -> Figure:
    """Records by sequence number: on disk at the crash (checkpoint, whole records, torn
    bytes) above what recovery does with each (load, replay or roll back, drop)."""
    p = wal_strip_parts(records, recovery)
    checkpoint, first, last = p["checkpoint_seq"], p["first"], p["last"]
    end = last + (1 if p["torn_bytes"] else 0)
    torn_width = max(1.0, TORN_MIN_SHARE * end) if p["torn_bytes"] else 0.0
    torn_x = last + 0.5 + torn_width / 2  # the torn cell's centre
    fig = Figure(figsize=(11, 3.4), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    if checkpoint:
        _block(ax, 1, checkpoint, DISK, CHECKPOINT_COLOR, f"checkpoint: the effect of records 1–{checkpoint}")
        _block(ax, 1, checkpoint, RECOVERY, CHECKPOINT_COLOR, "loaded in one read")
    replay_end = first + p["replayed"] - 1
    for seq in range(first, last + 1):
        _cell(ax, seq, DISK, RECORD_COLOR, "record")
        done = RECORD_COLOR if seq <= replay_end else ROLLED_BACK_COLOR
        _cell(ax, seq, RECOVERY, done, "replayed" if seq <= replay_end else "rolled back")
    _label(ax, first, last, DISK, f"wal.log: records {first}–{last}")
    _label(ax, first, last, RECOVERY, _recovery_label(p))
    if p["torn_bytes"]:
        _cell(ax, torn_x, DISK, TORN_COLOR, "torn", hatch="///", width=torn_width)
        _note(ax, torn_x, DISK + 0.45, f"record {end}: only {p['torn_bytes']} bytes reached the file (torn)")
        _cell(ax, torn_x, RECOVERY, "white", "dropped", edge=TORN_COLOR, width=torn_width)
        _note(ax, torn_x, RECOVERY - 0.45, "torn bytes dropped", below=True)
    ax.set_xlim(0.5, last + 0.5 + torn_width)
    ax.set_ylim(-1.05, 2.05)
    ax.set_yticks([DISK, RECOVERY], ["on disk\nat the crash", "what recovery\ndoes"], fontsize=TICK_PT)
    ticks = sorted({1, checkpoint, last} - {0}) if last - checkpoint > 8 else sorted({1, last})
    ax.set_xticks(ticks, [str(t) for t in ticks], fontsize=TICK_PT)
    if p["torn_bytes"]:  # the torn record's number, under its (widened) cell, in its colour
        ax.get_xticklabels()[-1].set_horizontalalignment("right")  # `last` ends where its cell does
        ax.text(torn_x, -0.02, str(end), transform=ax.get_xaxis_transform(), ha="center", va="top",
                fontsize=TICK_PT, color=TORN_COLOR, gid="torn number")  # fmt: skip
    ax.set_xlabel("record number (records are numbered 1, 2, 3, ... across checkpoints)", fontsize=15)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_title("The write-ahead log when the process dies, and what recovery does with it",
                 fontsize=16, loc="left")  # fmt: skip
    projector(fig)  # it sets every tick label to its floor, 13 pt: raise them again
    ax.tick_params(labelsize=TICK_PT)
    return fig


def _recovery_label(p: Mapping[str, int]) -> str:
    if not p["rolled_back"]:
        return f"{p['replayed']} replayed, one by one"
    return f"{p['replayed']} replayed, {p['rolled_back']} rolled back"


def _block(ax: Axes, lo: int, hi: int, y: float, color: str, text: str) -> None:
    """One box over records lo..hi with `text` centred in it."""
    ax.add_patch(Rectangle((lo - 0.5, y - 0.35), hi - lo + 1, 0.7, facecolor=color, edgecolor="white",
                           linewidth=1.5, gid="checkpoint"))  # fmt: skip
    _label(ax, lo, hi, y, text)


def _cell(
    ax: Axes,
    seq: float,
    y: float,
    color: str,
    gid: str,
    hatch: str | None = None,
    edge: str = "white",
    width: float = 1.0,
) -> None:
    """One record's cell centred on `seq`, `width` records wide, tagged `gid` (what it is, or
    what recovery does with it)."""
    ax.add_patch(Rectangle((seq - width / 2, y - 0.35), width, 0.7, facecolor=color, edgecolor=edge,
                           linewidth=0.8, hatch=hatch, gid=gid, clip_on=False))  # fmt: skip
    # clip_on=False: the last cell ends on the axes' edge, where clipping cut its outline


def _label(ax: Axes, lo: int, hi: int, y: float, text: str) -> None:
    ax.text((lo + hi) / 2, y, text, ha="center", va="center", fontsize=16, color="black",
            bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "none", "pad": 2})  # fmt: skip


def _note(ax: Axes, x: float, y: float, text: str, below: bool = False) -> None:
    """A note right-aligned at `x`, above (or below) a row, with a short arrow to the cell."""
    arrow = {"arrowstyle": "->", "color": TORN_COLOR}
    tip, away = (0.12, -0.42) if below else (-0.12, 0.42)
    ax.annotate(text, xy=(x, y + tip), xytext=(x + 0.5, y + away), ha="right", va="center",
                fontsize=15, color=TORN_COLOR, arrowprops=arrow)  # fmt: skip
