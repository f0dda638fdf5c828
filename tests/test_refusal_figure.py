"""plot_refusal: the refused call's pool, drawn once when the snapshots agree, twice when not.

Oracles: the pool's own snapshots compared by hand (a refused append leaves them equal; a
successful one does not) and the sequence's block table (the outlined page is its last one).
"""

from __future__ import annotations

import pytest
from matplotlib.colors import to_hex
from matplotlib.patches import Rectangle

from pagedkv import CacheConfig, KVCachePool, OutOfPagesError, SequenceManager
from pagedkv.viz import plot_refusal
from pagedkv.viz.refusal import OUTLINE


def _full_pool():
    seqs = SequenceManager(
        KVCachePool(CacheConfig(num_pages=4, page_size=2, num_layers=1, num_kv_heads=1, head_dim=2))
    )
    seqs.add("a", [1, 2, 3, 4])  # pages 0, 1
    seqs.add("b", [5, 6, 7, 8])  # pages 2, 3: every page held, b's last page full
    return seqs


def _outlined(fig) -> list[tuple[float, float]]:
    return [
        (p.get_x(), p.get_y())
        for ax in fig.axes
        for p in ax.patches
        if isinstance(p, Rectangle)
        and p.get_edgecolor() != (0, 0, 0, 0)
        and to_hex(p.get_edgecolor()) == OUTLINE.lower()
    ]


def test_a_refused_call_is_drawn_once_with_the_writers_last_page_outlined():
    seqs = _full_pool()
    before = seqs.snapshot()
    with pytest.raises(OutOfPagesError) as caught:
        seqs.append_slot("b", 9)
    after = seqs.snapshot()
    assert after == before
    fig = plot_refusal(before, after, caught.value, "b")
    assert len(fig.axes) == 1 and "unchanged by the refused call" in fig.axes[0].get_title("left")
    assert "snapshot after == snapshot before: True" in fig._suptitle.get_text()  # noqa: SLF001
    last = seqs.block_table("b")[-1]  # page 3: column 3 of a 1 x 4 grid
    assert last == 3 and _outlined(fig) == [(3 - 0.45, 0 - 0.45)]


def test_snapshots_that_differ_are_drawn_side_by_side():
    seqs = _full_pool()
    before = seqs.snapshot()
    seqs.free("a")
    fig = plot_refusal(before, seqs.snapshot(), OutOfPagesError("example"))
    assert [ax.get_title("left").split(":")[0] for ax in fig.axes] == [
        "before the call",
        "after the refused call",
    ]
    assert "snapshot after == snapshot before: False" in fig._suptitle.get_text()  # noqa: SLF001


def test_bad_arguments_are_refused_with_their_names():
    seqs = _full_pool()
    snap = seqs.snapshot()
    with pytest.raises(ValueError, match="seq_id 'zz' is not a live sequence"):
        plot_refusal(snap, snap, OutOfPagesError("x"), "zz")
    with pytest.raises(TypeError, match="before"):
        plot_refusal("snap", snap, OutOfPagesError("x"))
    with pytest.raises(TypeError, match="error"):
        plot_refusal(snap, snap, "not an exception")
