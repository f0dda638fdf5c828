"""Plots: the right colour for each page on a pool whose state is worked out by hand.

The pool (16 pages of 4 slots), built with the public API:
- "A": 18 prompt tokens -> pages 0..4 (page 4 holds 2 tokens);
- "B": fork of A, then one token: B copies page 4 to page 5 (copy-on-write, 3 tokens);
  pages 0..3 are shared (ref count 2);
- "C": 23 tokens on pages 6..11, then finished: full pages 6..10 CACHED (LRU order tail first:
  10, 9, 8, 7, 6), partial page 11 FREE; pages 11..15 FREE.
"""

from __future__ import annotations

import io

import pytest
from matplotlib import colormaps
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from PIL import Image

from pagedkv import KVCachePool, PageState, SequenceManager, TinyLM
from pagedkv.scenarios import ScenarioRun
from pagedkv.viz import (
    PoolHeatmap,
    SequencePalette,
    block_table_html,
    compare_layouts,
    contiguous_replay,
    plot_block_tables,
    plot_lru,
    plot_paged_vs_contiguous,
    plot_pool,
    plot_slots,
    plot_usage,
    slot_usage,
)
from pagedkv.viz.frame import grid_shape
from pagedkv.viz.palette import (
    HIT_COLOR,
    NO_OWNER_COLOR,
    SEQUENCE_COLORS,
    STATE_COLORS,
    VICTIM_COLOR,
)
from pagedkv.viz.usage import EMPTY_SLOT_COLOR

MODEL = TinyLM(seed=0)
STATES = [PageState.ACTIVE] * 6 + [PageState.CACHED] * 5 + [PageState.FREE] * 5
FILL = [4, 4, 4, 4, 2, 3] + [4] * 5 + [0] * 5
REFS = [2, 2, 2, 2, 1, 1] + [0] * 10


def known_pool():
    pool = KVCachePool(MODEL.cache_config(num_pages=16, page_size=4))
    seqs = SequenceManager(pool)
    events = []
    pool.add_listener(events.append)
    seqs.add("A", MODEL.encode("The KV cache holds"))
    MODEL.forward(seqs, ["A"])
    seqs.fork("A", "B")
    seqs.append_slot("B", 32)
    MODEL.forward(seqs, ["B"])
    seqs.add("C", MODEL.encode("Something else entirely"))
    MODEL.forward(seqs, ["C"])
    seqs.free("C")
    return pool, seqs, events


@pytest.fixture
def known():
    pool, seqs, events = known_pool()
    snap = pool.snapshot()
    # the hand-derived picture, checked against the pool itself once
    assert snap.state.tolist() == [int(s) for s in STATES]
    assert snap.fill.tolist() == FILL and snap.ref_count.tolist() == REFS
    assert pool.eviction.order() == [10, 9, 8, 7, 6]
    return pool, seqs, events, snap


def rgb(color) -> tuple[int, int, int]:
    return tuple(round(c * 255) for c in to_rgb(color))


def pixel(png: bytes, heatmap: PoolHeatmap, view: str, page: int) -> tuple[int, int, int]:
    """A pixel of the cell away from its centred label and its outline."""
    x0, y0, x1, y1 = heatmap.cell_box(view, page)
    image = Image.open(io.BytesIO(png)).convert("RGB")
    return image.getpixel((x0 + (x1 - x0) // 5 + 2, y0 + (y1 - y0) // 5 + 2))


def close(a, b, tol: int = 2) -> bool:
    return all(abs(x - y) <= tol for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize(
    "n, shape",
    [(1, (1, 1)), (5, (1, 5)), (16, (2, 8)), (64, (8, 8)), (100, (7, 16)), (1024, (32, 32))],
)
def test_grid_shape(n, shape):
    assert grid_shape(n) == shape


def test_state_occupancy_owner_and_ref_count_colours(known):
    pool, seqs, _, snap = known
    palette = SequencePalette()
    heatmap = plot_pool(snap, palette=palette)
    png = heatmap.png()
    for page in range(16):
        assert close(pixel(png, heatmap, "state", page), rgb(STATE_COLORS[STATES[page]])), page
        occupancy = colormaps["cividis"](FILL[page] / 4)
        assert close(pixel(png, heatmap, "occupancy", page), rgb(occupancy)), page
        owner = (
            palette.color("A") if page < 5 else palette.color("B") if page == 5 else NO_OWNER_COLOR
        )
        assert close(pixel(png, heatmap, "owner", page), rgb(owner)), page
        level = colormaps["viridis"](min(REFS[page], 4) / 4)
        assert close(pixel(png, heatmap, "ref_count", page), rgb(level)), page
    assert palette.color("A") != palette.color("B")


def test_lru_view_marks_the_next_victim(known):
    *_, snap = known
    heatmap = plot_lru(snap)
    png = heatmap.png()
    order = [10, 9, 8, 7, 6]  # tail first
    for rank, page in enumerate(order):
        expected = colormaps["viridis"](1 - rank / (len(order) - 1))
        assert close(pixel(png, heatmap, "lru", page), rgb(expected)), page
    assert close(pixel(png, heatmap, "lru", 0), rgb("#A6A6A6"))  # ACTIVE: never evicted
    assert close(pixel(png, heatmap, "lru", 15), rgb("#FFFFFF"))  # FREE: used first
    image = Image.open(io.BytesIO(png)).convert("RGB")
    x0, y0, x1, y1 = heatmap.cell_box("lru", 10)
    assert close(image.getpixel((x0, (y0 + y1) // 2)), rgb(VICTIM_COLOR))  # the outline
    x0, y0, x1, y1 = heatmap.cell_box("lru", 9)
    assert not close(image.getpixel((x0, (y0 + y1) // 2)), rgb(VICTIM_COLOR))
    panel = heatmap.panels["lru"]
    assert panel.victim == 10 and "page 10 is evicted next" in panel.title
    assert "5 FREE pages" in panel.title


def test_heatmap_redraws_in_place_and_deterministically(known):
    pool, seqs, _, snap = known
    heatmap = PoolHeatmap(16, 4, palette=SequencePalette())
    frame = heatmap._frame
    heatmap.update(snap)
    first = heatmap.png()
    seqs.append_slot("A", 33)
    MODEL.forward(seqs, ["A"])
    heatmap.update(pool.snapshot())
    second = heatmap.png()
    assert first != second and heatmap._frame is frame  # same frame, new picture
    heatmap.update(snap)
    assert heatmap.png() == first  # the same snapshot gives the same bytes
    assert PoolHeatmap(16, 4)._frame is frame  # the static frame is built once per geometry


def test_large_pools_render_without_labels():
    pool = KVCachePool(MODEL.cache_config(num_pages=1024, page_size=16))
    seqs = SequenceManager(pool)
    seqs.add("x", list(range(40)))
    heatmap = plot_pool(pool.snapshot(), ("state",))
    assert not heatmap.labelled and heatmap.rows == heatmap.cols == 32
    png = heatmap.png()
    assert close(pixel(png, heatmap, "state", 2), rgb(STATE_COLORS[PageState.ACTIVE]))
    assert close(pixel(png, heatmap, "state", 1000), rgb(STATE_COLORS[PageState.FREE]))


def test_heatmap_bad_arguments(known):
    *_, snap = known
    with pytest.raises(ValueError, match="num_pages must be a positive int"):
        PoolHeatmap(0, 4)
    with pytest.raises(ValueError, match="views must be distinct names"):
        PoolHeatmap(16, 4, views=("state", "heat"))
    with pytest.raises(ValueError, match="views must be distinct names"):
        PoolHeatmap(16, 4, views=("lru", "lru"))
    with pytest.raises(TypeError, match="palette must be a SequencePalette"):
        PoolHeatmap(16, 4, palette={"A": "red"})
    with pytest.raises(ValueError, match="dpi must be"):
        PoolHeatmap(16, 4, dpi=5)
    with pytest.raises(ValueError, match="this heatmap draws 32 pages of 4"):
        PoolHeatmap(32, 4).update(snap)
    with pytest.raises(TypeError, match="snapshot must be a PoolSnapshot"):
        PoolHeatmap(16, 4).update({})
    with pytest.raises(ValueError, match="page_id must be in"):
        PoolHeatmap(16, 4).cell_box("state", 16)


def test_block_table_figure_marks_shared_copied_and_hit_pages(known):
    pool, seqs, events, _ = known
    seqs.add("D", MODEL.encode("The KV cache holds more"))  # hits pages 0..3 (ACTIVE, indexed)
    MODEL.forward(seqs, ["D"])
    snap = pool.snapshot()
    palette = SequencePalette()
    fig = plot_block_tables(snap, palette, events)
    assert isinstance(fig, Figure)
    patches = fig.axes[0].patches
    tables = [snap.block_tables[s] for s in snap.seq_ids]
    assert len(patches) == sum(len(t) for t in tables)
    cells = iter(patches)
    for seq_id, table in zip(snap.seq_ids, tables, strict=True):
        for block, page in enumerate(table):
            patch = next(cells)
            assert close(rgb(patch.get_facecolor()), rgb(palette.color(seq_id)))
            assert bool(patch.get_hatch()) == (snap.ref_count[page] > 1)
            if seq_id == "B" and block == 4:
                assert close(rgb(patch.get_edgecolor()), rgb(VICTIM_COLOR))  # copy of page 4
            elif seq_id == "D" and block < 4:
                assert close(rgb(patch.get_edgecolor()), rgb(HIT_COLOR))
            else:
                assert close(rgb(patch.get_edgecolor()), (0, 0, 0))


def test_block_table_html_uses_the_same_colours_and_marks(known):
    pool, seqs, events, snap = known
    palette = SequencePalette()
    text = block_table_html(snap, palette, events)
    assert f"background:{palette.color('A')}" in text and f"background:{palette.color('B')}" in text
    assert text.count("×2") == 8  # pages 0..3 in two tables
    assert f"3px solid {VICTIM_COLOR}" in text and "copy-on-write from page 4" in text
    assert "<td" in text and ">5</td>" in text


def test_cow_mark_disappears_when_the_copy_is_reused(known):
    pool, seqs, events, _ = known
    seqs.free("B")  # the copy (page 5, partial) becomes FREE
    seqs.add("E", MODEL.encode("zz"))  # lowest FREE page: 5 again, an ordinary allocation
    assert seqs.block_table("E") == [5]
    text = block_table_html(pool.snapshot(), SequencePalette(), events)
    assert "copy-on-write from" not in text
    assert "copy-on-write from" in block_table_html(pool.snapshot(), SequencePalette())  # no events


def test_slot_usage_by_hand(known):
    *_, snap = known
    assert slot_usage(snap) == {
        "tokens": 16 + 2 + 3,
        "internal_fragmentation": 2 + 1,
        "cached": 5 * 4,
        "free": 5 * 4,
    }


def test_plot_slots_colours_each_slot(known):
    *_, snap = known
    palette = SequencePalette()
    fig = plot_slots(snap, palette)
    image = fig.axes[0].images[0].get_array()  # [slot offset, page id, RGBA]
    assert image.shape[:2] == (4, 16)
    assert close(rgb(image[1, 4]), rgb(palette.color("A")))  # page 4: 2 tokens of A
    assert close(rgb(image[2, 4]), rgb(EMPTY_SLOT_COLOR))  # then empty slots
    assert close(rgb(image[3, 6]), rgb(STATE_COLORS[PageState.CACHED]))
    assert close(rgb(image[0, 15]), rgb(STATE_COLORS[PageState.FREE]))


def test_plot_usage_draws_page_and_token_usage_per_step():
    run = ScenarioRun("fill")
    while not run.done:
        run.step()
    fig = plot_usage(run.snapshots)
    lines = {line.get_label(): line.get_ydata() for line in fig.axes[0].lines}
    pages = next(v for k, v in lines.items() if k.startswith("page usage"))
    tokens = next(v for k, v in lines.items() if k.startswith("token usage"))
    assert list(pages) == [s.usage for s in run.snapshots]
    assert list(tokens) == [s.token_usage for s in run.snapshots]
    assert all(t <= p for t, p in zip(tokens, pages, strict=True))
    with pytest.raises(ValueError, match="non-empty sequence of PoolSnapshot"):
        plot_usage([])


def test_contiguous_replay_reserves_max_length_and_refuses_what_does_not_fit():
    run = ScenarioRun("fill")
    while not run.done:
        run.step()
    # 64 slots; the longest request ends at 10 + 12 tokens -> max_seq_len 32: two fit, not three
    cache, refused = contiguous_replay(run.snapshots, "max", step=3)
    assert cache.max_seq_len == 32 and len(cache) == 2 and refused == ["charlie"]
    layouts = compare_layouts(run.snapshots, "oracle", step=3)
    contiguous = layouts["contiguous"]
    assert sum(contiguous.values()) == 64 and layouts["refused"] == []
    lengths = [len(t) for t in ("Pages fill", "one slot", "at a time")]
    assert contiguous["token_states"] == sum(lengths) == layouts["paged"]["tokens"]
    decodes = len(run.steps) - 3
    # the oracle reserves each final length; the last decode of "charlie" never happened
    finals = [n + decodes for n in lengths[:2]] + [lengths[2] + decodes - 1]
    assert contiguous["reserved"] == sum(finals) - sum(lengths)
    assert contiguous["internal_fragmentation"] == 0


def test_plot_paged_vs_contiguous():
    run = ScenarioRun("fill")
    while not run.done:
        run.step()
    fig = plot_paged_vs_contiguous(run.snapshots, "max", step=10, palette=SequencePalette())
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert any(t.startswith("paged: 16 pages") for t in titles)
    assert any("refused (no hole fits): charlie" in t for t in titles)
    with pytest.raises(ValueError, match="step must be an int in"):
        plot_paged_vs_contiguous(run.snapshots, step=99)


def test_sequence_palette_is_stable_and_colour_blind_safe_first():
    palette = SequencePalette()
    colors = [palette.color(f"s{k}") for k in range(9)]
    assert colors == list(SEQUENCE_COLORS) and len(set(colors)) == 9
    assert palette.color("s3") == colors[3]  # the same colour on every later call
    assert palette.color("s9") == colors[0]  # cycles after nine
    palette.clear()
    assert palette.color("new") == colors[0]


def test_static_plots_refuse_non_snapshots():
    for plot in (plot_pool, plot_lru, plot_block_tables, block_table_html, slot_usage, plot_slots):
        with pytest.raises(TypeError, match="snapshot must be a PoolSnapshot"):
            plot({})
