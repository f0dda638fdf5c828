"""Marks that carry a number or an event in the pictures of notebook 01: every slot count of
the share bars is written and readable, the key draws reserved slots as the strips do, the
usage picture marks the refused step; the split paged-against-contiguous pictures carry page
ids, marks a room can see, and counts that are the run's own (checked against the snapshot and
the contiguous cache)."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.collections import PathCollection
from matplotlib.colors import to_hex
from matplotlib.patches import Patch
from matplotlib.text import Annotation, Text

from pagedkv.core.page import PageState
from pagedkv.scenarios import ScenarioRun
from pagedkv.viz import compare_layouts, contiguous_replay, plot_paged_vs_contiguous, plot_usage
from pagedkv.viz.palette import SEQUENCE_COLORS
from pagedkv.viz.two_memories import plot_share_bars, plot_two_memories

CELL_PX = 848  # a notebook's output width at 1280 px, as tests/test_figure_text.py


@pytest.fixture(scope="module")
def fill() -> ScenarioRun:
    run = ScenarioRun("fill")
    while not run.done:
        run.step()
    return run


def _texts(fig) -> list[Text]:
    fig.canvas.draw()
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


@pytest.mark.parametrize(("policy", "max_seq_len", "step"), [("oracle", 64, 9), ("max", None, 10)])
def test_every_slot_count_of_the_share_bars_is_written_once_and_no_two_overlap(
    fill, policy, max_seq_len, step
):
    fig = plot_paged_vs_contiguous(fill.snapshots, policy, max_seq_len=max_seq_len, step=step)
    bars = fig.axes[-1]
    numbers = [t for t in _texts(fig) if t.axes is bars and t.get_text().isdigit()]
    layouts = compare_layouts(fill.snapshots, policy, max_seq_len=max_seq_len, step=step)
    expected = sorted(n for memory in ("paged", "contiguous") for n in layouts[memory].values() if n)
    assert sorted(int(t.get_text()) for t in numbers) == expected  # thin segments included
    boxes = [t.get_window_extent() for t in numbers]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    assert all(t.get_fontsize() >= 13 for t in numbers)


def test_the_usage_picture_marks_the_step_the_pool_refused(fill):
    refused = [r.index for r in fill.records if r.note.startswith("refused")]
    assert refused == [len(fill.snapshots) - 1]  # the fill scenario's last step
    assert fill.snapshots[-1] == fill.snapshots[-2]  # so the curves alone show nothing there
    fig = plot_usage(fill.snapshots, refused=refused)
    ax = fig.axes[0]
    vertical = [line.get_xdata()[0] for line in ax.lines if len(set(line.get_xdata())) == 1]
    assert vertical == refused
    assert any(f"step {refused[0]}: refused" in t.get_text() for t in _texts(fig))
    assert ax.get_xlim()[1] > refused[0]  # the mark is inside the axes, not on its edge
    unmarked = plot_usage(fill.snapshots)
    assert not any("refused" in t.get_text() for t in _texts(unmarked))


def test_a_refused_step_must_be_a_step_of_the_run(fill):
    with pytest.raises(ValueError, match="refused step"):
        plot_usage(fill.snapshots, refused=[len(fill.snapshots)])


@pytest.mark.parametrize(("policy", "max_seq_len", "step"), [("oracle", 64, 9), ("max", None, 10)])
def test_the_key_draws_reserved_slots_as_the_strips_do(fill, policy, max_seq_len, step):
    """Reserved slots are a light tint of their request's colour, dotted: the key shows each
    tint the contiguous strip paints on a reserved slot, with the dots, not a white swatch."""
    fig = plot_paged_vs_contiguous(fill.snapshots, policy, max_seq_len=max_seq_len, step=step)
    cache, _ = contiguous_replay(fill.snapshots, policy, max_seq_len=max_seq_len, step=step)
    strip = fig.axes[1].get_images()[0].get_array()
    width = strip.shape[1]
    reserved = [
        s for r in cache.accounting().reservations for s in range(r.start + r.used, r.start + r.final_len)
    ]
    assert reserved  # both moments have reserved slots
    painted = {to_hex(tuple(strip[s // width, s % width])) for s in reserved}
    fig.canvas.draw()
    dotted = {to_hex(p.get_facecolor()) for p in fig.legends[0].findobj(Patch) if p.get_hatch() == ".."}
    assert painted <= dotted and "#ffffff" in dotted  # the strips' tints, and the bars' white
    assert all(c not in {to_hex(k) for k in SEQUENCE_COLORS} for c in painted)  # a tint, not the colour


def test_a_thin_segments_number_is_joined_to_its_segment_by_a_visible_line(fill):
    """A number too narrow a segment would crowd sits outside the bar: the line from it must
    end on that segment's edge (the top of the paged bar, the bottom of the contiguous one) and
    show at least 10 px between the number's box and the bar."""
    fig = plot_paged_vs_contiguous(fill.snapshots, "max", step=10)
    bars = fig.axes[-1]
    fig.canvas.draw()
    outside = [t for t in bars.texts if isinstance(t, Annotation)]
    # the paged pool's internal fragmentation (4 slots), contiguous memory's reserved slots (8)
    assert [t.get_text() for t in outside] == ["4", "8"]
    for note in outside:
        x, y = note.xy
        segment = next(
            p
            for p in bars.patches
            if p.get_x() <= x <= p.get_x() + p.get_width()
            and y in (pytest.approx(p.get_y()), pytest.approx(p.get_y() + p.get_height()))
        )
        assert segment.get_width() * 64 == pytest.approx(int(note.get_text()))  # the segment it names
        edge_px = bars.transData.transform((x, y))[1]
        box = Text.get_window_extent(note)
        above = y == pytest.approx(segment.get_y() + segment.get_height())
        gap = box.y0 - edge_px if above else edge_px - box.y1
        assert gap >= 10  # the number alone, not its line


def test_the_key_names_the_thick_outline_of_both_memories(fill):
    """The strips outline each page (paged) and each request's range, row by row
    (contiguous) with unfilled black rectangles: the key shows that outline and names both."""
    fig = plot_paged_vs_contiguous(fill.snapshots, "max", step=10)
    fig.canvas.draw()
    drawn = {(p.get_fill(), to_hex(p.get_edgecolor())) for ax in fig.axes[:2] for p in ax.patches}
    legend = fig.legends[0]
    keys = [(h, t.get_text()) for h, t in zip(legend.legend_handles, legend.get_texts(), strict=True)]
    outline = [text for h, text in keys if isinstance(h, Patch) and not h.get_fill()]
    assert drawn == {(False, "#000000")} and len(outline) == 1
    assert "paged" in outline[0] and "contiguous" in outline[0]


def test_every_page_of_the_paged_grid_carries_its_id_once(fill):
    texts = [
        t.get_text() for t in _texts(plot_two_memories(fill.snapshots, "oracle", max_seq_len=64, step=9))
    ]
    assert sorted(t for t in texts if t.startswith("page ")) == sorted(f"page {p}" for p in range(16))


def test_the_marks_sit_on_the_empty_slots_and_show_at_least_12_px(fill):
    snap = fill.snapshots[9]
    fig = plot_two_memories(fill.snapshots, "oracle", max_seq_len=64, step=9)
    fig.canvas.draw()
    scale = fig.dpi / 72 * min(1.0, CELL_PX / (fig.get_size_inches()[0] * fig.dpi))
    paged_marks = [c for c in fig.axes[0].collections if isinstance(c, PathCollection)]
    # independent count: the empty slots of ACTIVE pages, from the snapshot's fill
    active = snap.state == PageState.ACTIVE
    empty = int((snap.page_size - snap.fill[active]).sum())
    assert sum(len(c.get_offsets()) for c in paged_marks) == empty == 3
    cache, _ = contiguous_replay(fill.snapshots, "oracle", 64, 9)
    hole = [len(c.get_offsets()) for c in fig.axes[1].collections if c.get_paths()]
    assert sum(hole) == 15 + 4 == sum(r.final_len - r.used for r in cache.accounting().reservations) + 4
    for c in [*paged_marks, *fig.axes[1].collections]:
        assert np.sqrt(c.get_sizes()).min() * scale >= 12  # marker side, in CSS px


def test_every_count_of_the_share_bars_is_written_inside_its_segment(fill):
    fig = plot_share_bars(fill.snapshots, "oracle", max_seq_len=64, step=9)
    ax = fig.axes[0]
    fig.canvas.draw()
    numbers = {(round(t.get_position()[1]), t.get_text()) for t in ax.texts}
    assert numbers == {(1, "45"), (1, "3"), (1, "16"), (0, "45"), (0, "15"), (0, "4")}
    for t in ax.texts:
        x, y = t.get_position()
        inside = [
            b
            for b in ax.patches
            if b.get_y() <= y <= b.get_y() + b.get_height()
            and b.get_x() <= x <= b.get_x() + b.get_width()
            and b.get_width() == int(t.get_text())
        ]
        assert inside, t.get_text()
