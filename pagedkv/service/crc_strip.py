"""The pool's pages before and after recovery's K/V check, as two rows of cells.

`plot_crc_check(said, served, failed)` draws one cell per page, coloured by its state. The top
row is what the kept records say (`said`: each page's state once they are replayed, e.g. the
same workload stopped at the same record); the bottom row is the pool recovery serves
(`served`). Pages in `failed` (the report's `kv_checksum_failed_pages`: their K/V in kv.bin
differ from their logged CRC) are outlined in vermilion in both rows, so the eye goes from a
CACHED page above to the FREE page it became below, and from an ACTIVE page to the same
page, whose tokens are computed again (so marked). Notebook 07b, section 3d.

Leaves out: which sequence holds each page (the block tables say) and the CRCs themselves
(K/V are floats whose last bits differ between machines).
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from pagedkv.core.page import PageState
from pagedkv.core.plumbing.validation import check_instance, check_items
from pagedkv.viz.palette import STATE_COLORS
from pagedkv.viz.projector import projector

FAILED_EDGE = "#D55E00"  # Okabe–Ito vermilion: K/V that fail their logged CRC
SAID, SERVED = 1.0, 0.0  # the rows' y
ROW_LABELS = ("the kept records say", "recovery serves")


def crc_check_changes(said: Sequence[PageState], served: Sequence[PageState], failed: Sequence[int]) -> dict:
    """What the check changed, checked against its inputs: `freed` (failed pages CACHED above,
    FREE below), `recomputed` (failed pages ACTIVE in both rows). Any other difference between
    the rows, or a failed page that is FREE above, is refused with a ValueError."""
    check_items("said", said, PageState)
    check_items("served", served, PageState)
    check_instance("failed", failed, list)  # the report's list; empty when every page passed
    if failed:
        check_items("failed", failed, int)
    if len(said) != len(served):
        raise ValueError(f"said and served must list the same pages; they hold {len(said)} and {len(served)}")
    outside = [p for p in failed if not 0 <= p < len(said)]
    if outside:
        raise ValueError(f"failed must name pages 0..{len(said) - 1}; got {outside}")
    freed = [p for p in failed if (said[p], served[p]) == (PageState.CACHED, PageState.FREE)]
    recomputed = [p for p in failed if said[p] is served[p] is PageState.ACTIVE]
    odd = [p for p in range(len(said)) if (said[p] != served[p]) != (p in freed)]
    odd += [p for p in failed if p not in freed and p not in recomputed]
    if odd:
        raise ValueError(
            f"pages {sorted(set(odd))} changed in a way the check does not make: only a failed "
            "CACHED page turns FREE, a failed ACTIVE page stays ACTIVE, others keep their state"
        )
    return {"freed": freed, "recomputed": recomputed}


def plot_crc_check(said: Sequence[PageState], served: Sequence[PageState], failed: Sequence[int]) -> Figure:
    """Pages by id: their state as the kept records say (top) and as recovery serves them
    (bottom), the pages that failed their CRC outlined."""
    changes = crc_check_changes(said, served, failed)
    fig = Figure(figsize=(11, 3.2), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    for y, states in ((SAID, said), (SERVED, served)):
        for page, state in enumerate(states):
            bad = page in failed
            ax.add_patch(Rectangle((page - 0.45, y - 0.38), 0.9, 0.76, facecolor=STATE_COLORS[state],
                                   edgecolor=FAILED_EDGE if bad else "white", linewidth=3 if bad else 1,
                                   gid=f"page {page} {state.name}", clip_on=False))  # fmt: skip
            dark = state is PageState.ACTIVE
            ax.text(
                page, y, str(page), ha="center", va="center", fontsize=14, color="white" if dark else "black"
            )
    for page in changes["recomputed"]:  # the label sits right of its page, an arrow to it
        ax.annotate(f"page {page}: its tokens are computed again", xy=(page, SERVED - 0.4),
                    xytext=(page + 0.8, SERVED - 0.62), ha="left", va="center", fontsize=13,
                    color=FAILED_EDGE, arrowprops={"arrowstyle": "->", "color": FAILED_EDGE})  # fmt: skip
    ax.set_xlim(-0.6, len(said) - 0.4)
    ax.set_ylim(-0.85, 1.45)
    ax.set_yticks([SAID, SERVED], ROW_LABELS, fontsize=14)
    ax.set_xticks([])
    ax.set_xlabel("page id", fontsize=14)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    legend = [Patch(facecolor=STATE_COLORS[s], label=s.name) for s in PageState]
    legend.append(Patch(facecolor="white", edgecolor=FAILED_EDGE, linewidth=3, label="K/V fail their CRC"))
    ax.legend(
        handles=legend, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=4, frameon=False, fontsize=14
    )
    return projector(fig)
