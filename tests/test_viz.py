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
import re

import pytest
from matplotlib import colormaps
from matplotlib.colors import to_rgb, to_rgba
from matplotlib.figure import Figure
from PIL import Image

from pagedkv import ContiguousKVCache, KVCachePool, PageState, SequenceManager, TinyLM
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
    sharing_savings,
    slot_usage,
)
from pagedkv.viz.frame import SUPTITLE_PT, TITLE_PT, lru_title
from pagedkv.viz.glyphs import _font, fit_text, wrap_text
from pagedkv.viz.grid import grid_shape
from pagedkv.viz.palette import (
    CACHED_NO_OWNER_COLOR,
    HIT_COLOR,
    LRU_CMAP,
    NO_OWNER_COLOR,
    SEQUENCE_COLORS,
    STATE_COLORS,
    VICTIM_COLOR,
)
from pagedkv.viz.slot_layout import external_holes
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
    snap = seqs.snapshot()
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
        owner = palette.color("A") if page < 5 else palette.color("B") if page == 5 else NO_OWNER_COLOR
        owner = CACHED_NO_OWNER_COLOR if STATES[page] == PageState.CACHED else owner
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
        expected = LRU_CMAP(1 - rank / (len(order) - 1))
        assert close(pixel(png, heatmap, "lru", page), rgb(expected)), page
        red, green, blue = pixel(png, heatmap, "lru", page)
        assert red > green > blue, page  # a shade of the CACHED orange, not another hue
    # one colour per state in every picture: the next victim is drawn in the CACHED orange
    assert close(pixel(png, heatmap, "lru", order[0]), rgb(STATE_COLORS[PageState.CACHED]))
    assert close(pixel(png, heatmap, "lru", 0), rgb(STATE_COLORS[PageState.ACTIVE]))  # ACTIVE: blue
    assert close(pixel(png, heatmap, "lru", 15), rgb(STATE_COLORS[PageState.FREE]))  # FREE: grey
    image = Image.open(io.BytesIO(png)).convert("RGB")
    x0, y0, x1, y1 = heatmap.cell_box("lru", 10)
    assert close(image.getpixel((x0, (y0 + y1) // 2)), rgb(VICTIM_COLOR))  # the outline
    x0, y0, x1, y1 = heatmap.cell_box("lru", 9)
    assert not close(image.getpixel((x0, (y0 + y1) // 2)), rgb(VICTIM_COLOR))
    panel = heatmap.panels["lru"]
    assert panel.victim == 10 and "page 10 (#1) is evicted next" in panel.title
    assert "5 FREE pages" in panel.title and "freed tail first" in panel.title


@pytest.mark.parametrize("num_pages", [4, 12, 24, 64, 154, 256])
def test_lru_title_keeps_its_two_lines_whole(num_pages):
    # wrapped to its panel, the title is its own two lines: no word is left alone on a line
    heatmap = PoolHeatmap(num_pages, 4, views=("lru",))
    frame = heatmap.panels["lru"].frame
    size = round(TITLE_PT * heatmap._frame.px)
    for victim, free in ((num_pages - 1, 0), (num_pages - 1, num_pages - 1), (1, 1), (-1, 0)):
        title = lru_title(victim, free)
        assert wrap_text(title, size, frame.title_room) == title, (num_pages, victim, free)


def test_lru_view_titles_the_moment_it_is_given(known):
    *_, snap = known  # the pool of STATES: 6 ACTIVE, 5 CACHED, 5 FREE of 16 pages
    titled = plot_lru(snap, label="before doc_C's step")
    assert titled.suptitle == "pool before doc_C's step: 6 ACTIVE, 5 CACHED, 5 FREE of 16 pages"
    assert plot_lru(snap).suptitle.startswith("pool: ")  # no label: no moment named


def test_lru_view_names_the_last_holder_of_cached_pages_from_events(known):
    pool, seqs, events, snap = known
    # without events the cells carry id and rank only; with them, C (which freed 6..10)
    assert plot_lru(snap).panels["lru"].labels[6] == "6\n#5"
    labels = plot_lru(snap, events).panels["lru"].labels
    assert [labels[p] for p in (10, 6)] == ["10\n#1\nC", "6\n#5\nC"]
    assert labels[0] == "0" and labels[15] == "15"  # ACTIVE and FREE pages: no holder
    # a page revived by a prefix hit and released again names its latest holder
    seqs.add("D", MODEL.encode("Something else entirely, again"))  # hits pages 6..10
    MODEL.forward(seqs, ["D"])
    seqs.free("D")
    labels = plot_lru(seqs.snapshot(), events).panels["lru"].labels
    assert labels[6].endswith("\nD") and labels[10].endswith("\nD")


def test_grid_positions_after_the_last_page_are_hatched_not_painted():
    pool = KVCachePool(MODEL.cache_config(num_pages=12, page_size=4))  # a 2 x 8 grid
    heatmap = plot_lru(SequenceManager(pool).snapshot())
    image = Image.open(io.BytesIO(heatmap.png())).convert("RGB")
    x0, y0, x1, y1 = heatmap.cell_box("lru", 11)
    width = x1 - x0 + 2  # one cell further right: grid position 12, not a page
    filler = {image.getpixel((x, y)) for x in range(x0 + width, x1 + width) for y in range(y0, y1)}
    free = {image.getpixel((x, y)) for x in range(x0 + 2, x1 - 2) for y in range(y0 + 2, y0 + 6)}
    assert free == {rgb(STATE_COLORS[PageState.FREE])}  # a FREE page is plain FREE grey
    assert len(filler) > 1 and rgb("#FFFFFF") in filler  # a filler is hatched: white and lines


def test_long_cell_labels_lose_their_middle_and_keep_their_ends():
    assert fit_text("doc_A", 8, 200) == "doc_A"
    short = fit_text("request_A", 8, 24)
    assert short.startswith("r") and short.endswith("_A") and "…" in short
    assert _font(8).getlength(short) <= 24 < _font(8).getlength("request_A")


def test_heatmap_redraws_in_place_and_deterministically(known):
    pool, seqs, _, snap = known
    heatmap = PoolHeatmap(16, 4, palette=SequencePalette())
    frame = heatmap._frame
    heatmap.update(snap)
    first = heatmap.png()
    seqs.append_slot("A", 33)
    MODEL.forward(seqs, ["A"])
    heatmap.update(seqs.snapshot())
    second = heatmap.png()
    assert first != second and heatmap._frame is frame  # same frame, new picture
    heatmap.update(snap)
    assert heatmap.png() == first  # the same snapshot gives the same bytes
    assert PoolHeatmap(16, 4)._frame is frame  # the static frame is built once per geometry


def test_large_pools_render_without_labels():
    pool = KVCachePool(MODEL.cache_config(num_pages=1024, page_size=16))
    seqs = SequenceManager(pool)
    seqs.add("x", list(range(40)))
    heatmap = plot_pool(seqs.snapshot(), ("state",))
    assert not heatmap.labelled and heatmap.rows == heatmap.cols == 32
    png = heatmap.png()
    assert close(pixel(png, heatmap, "state", 2), rgb(STATE_COLORS[PageState.ACTIVE]))
    assert close(pixel(png, heatmap, "state", 1000), rgb(STATE_COLORS[PageState.FREE]))


def test_heatmap_bad_arguments(known):
    *_, snap = known
    with pytest.raises(ValueError, match="num_pages must be >= 1, got 0"):
        PoolHeatmap(0, 4)
    with pytest.raises(TypeError, match="page_size must be an int"):  # a wrong kind: TypeError
        PoolHeatmap(16, 4.0)
    with pytest.raises(ValueError, match=r"views\[1\] must be one of"):
        PoolHeatmap(16, 4, views=("state", "heat"))
    with pytest.raises(TypeError, match=r"views\[0\] must be one of"):
        PoolHeatmap(16, 4, views=(3,))
    with pytest.raises(TypeError, match="panel_width must be a number"):
        PoolHeatmap(16, 4, panel_width="wide")
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


def test_a_label_titles_the_pool_in_place_of_its_clock(known):
    *_, snap = known
    heatmap = plot_pool(snap, ("state", "owner"), label="after scheduler step 8")
    # the counts from the hand-derived STATES: 6 ACTIVE, 5 CACHED, 5 FREE of 16
    assert heatmap.suptitle == "pool after scheduler step 8: 6 ACTIVE, 5 CACHED, 5 FREE of 16 pages"
    assert "clock" not in heatmap.suptitle and "label='after scheduler step 8'" in repr(heatmap)
    assert plot_pool(snap, ("state", "owner")).suptitle.startswith(f"pool at clock {snap.clock}: ")
    longest = plot_pool(snap, ("state", "owner"), label="x" * 40)  # the longest label fits whole
    size, width = round(SUPTITLE_PT * longest._frame.px), Image.open(io.BytesIO(longest.png())).width
    assert fit_text(longest.suptitle, size, width) == longest.suptitle
    for bad in ("", "two\nlines", "x" * 41):
        with pytest.raises(ValueError, match="label must be one line of 1 to 40 characters"):
            plot_pool(snap, label=bad)
    with pytest.raises(TypeError, match="label must be a str"):
        PoolHeatmap(16, 4, label=8)


def test_block_table_figure_marks_shared_copied_and_hit_pages(known):
    pool, seqs, events, _ = known
    seqs.add("D", MODEL.encode("The KV cache holds more"))  # hits pages 0..3 (ACTIVE, indexed)
    MODEL.forward(seqs, ["D"])
    snap = seqs.snapshot()
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
                assert patch.get_linestyle() == "--"  # dashed: never read as a request's fill
            else:
                assert close(rgb(patch.get_edgecolor()), (0, 0, 0))
    keys = [t.get_text() for t in fig.legends[0].get_texts()]
    assert keys == ["shared page (×ref count)", "prefix hit", "copy-on-write (←source)"]
    # A alone (B freed, D never added): no mark, so no key
    seqs.free("D")
    seqs.free("B")
    assert not plot_block_tables(seqs.snapshot(), palette, events).legends


def test_block_table_html_uses_the_same_colours_and_marks(known):
    pool, seqs, events, snap = known
    palette = SequencePalette()
    text = block_table_html(snap, palette, events)
    assert f"background:{palette.color('A')}" in text and f"background:{palette.color('B')}" in text
    assert text.count("×2") == 8  # pages 0..3 in two tables
    assert f"3px solid {VICTIM_COLOR}" in text and "copy-on-write from page 4" in text
    assert "<td" in text and ">5←4</td>" in text  # the copy names its source


def test_a_fork_of_a_copied_page_has_no_cow_mark_in_the_forks_row(known):
    # B copied page 4 into page 5; a fork of B shares page 5 but copied nothing itself
    pool, seqs, events, _ = known
    seqs.fork("B", "F")
    snap = seqs.snapshot()
    assert snap.block_tables["F"][4] == 5 and snap.ref_count[5] == 2
    palette = SequencePalette()
    fig = plot_block_tables(snap, palette, events)
    cells = iter(fig.axes[0].patches)
    edges = {}
    for seq_id in snap.seq_ids:
        for block, _page in enumerate(snap.block_tables[seq_id]):
            edges[seq_id, block] = rgb(next(cells).get_edgecolor())
    assert close(edges["B", 4], rgb(VICTIM_COLOR))  # B made the copy
    assert close(edges["F", 4], (0, 0, 0))  # F only shares it
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts.count("5 ×2\n←4") == 1 and texts.count("5 ×2") == 1
    text = block_table_html(snap, palette, events)
    assert text.count("copy-on-write from page 4") == 1 and text.count(">5×2←4</td>") == 1
    assert ">5×2</td>" in text


def test_cow_mark_disappears_when_the_copy_is_reused(known):
    pool, seqs, events, _ = known
    seqs.free("B")  # the copy (page 5, partial) becomes FREE
    seqs.add("E", MODEL.encode("zz"))  # lowest FREE page: 5 again, an ordinary allocation
    assert seqs.block_table("E") == [5]
    text = block_table_html(seqs.snapshot(), SequencePalette(), events)
    assert "copy-on-write from" not in text
    assert "copy-on-write from" in block_table_html(seqs.snapshot(), SequencePalette())  # no events


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
    labels = [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
    assert not any("CACHED" in label for label in labels)  # fill never caches a page
    with pytest.raises(ValueError, match="snapshots must hold at least one PoolSnapshot"):
        plot_usage([])
    with pytest.raises(TypeError, match=r"snapshots\[0\] must be a PoolSnapshot, got dict"):
        plot_usage([{}])
    run = ScenarioRun("eviction")
    while not run.done:
        run.step()
    labels = [text.get_text() for text in plot_usage(run.snapshots).axes[0].get_legend().get_texts()]
    assert any("CACHED" in label for label in labels)


def test_plot_slots_keys_only_what_it_shows(known):
    pool, seqs, _, snap = known
    labels = [t.get_text() for t in plot_slots(snap).legends[0].get_texts()]
    internal = "× internal fragmentation: empty slot of a last page"
    kinds = [label for label in labels if label.strip() and not label.startswith("token of")]
    assert kinds == [internal, "CACHED page", "FREE page"]  # the second row, after the owners
    seqs.free("A")
    seqs.free("B")
    assert pool.reset_prefix_cache()  # every page FREE now
    labels = [t.get_text() for t in plot_slots(seqs.snapshot()).legends[0].get_texts()]
    assert labels == ["FREE page"]


def test_sharing_savings_by_hand(known):
    pool, seqs, _, snap = known
    # A holds pages 0..4, B holds 0..3 and its copy 5: 10 entries on 6 pages
    assert sharing_savings(snap) == {
        "block_table_entries": 10,
        "distinct_pages": 6,
        "pages_saved": 4,
        "saved": 0.4,
    }
    seqs.free("B")
    assert sharing_savings(seqs.snapshot())["pages_saved"] == 0
    seqs.free("A")
    assert sharing_savings(seqs.snapshot())["saved"] == 0.0  # no sequence: nothing saved
    with pytest.raises(TypeError, match="snapshot must be a PoolSnapshot"):
        sharing_savings({})


def test_contiguous_replay_reserves_max_length_and_refuses_what_does_not_fit():
    run = ScenarioRun("fill")
    while not run.done:
        run.step()
    # 64 slots; the longest request ends at 10 + 12 tokens -> max_seq_len 32: two fit, not three
    cache, refused = contiguous_replay(run.snapshots, "max", step=3)
    assert cache.max_seq_len == 32 and len(cache) == 2 and refused == ["charlie"]
    layouts = compare_layouts(run.snapshots, "oracle", step=3)
    contiguous, paged = layouts["contiguous"], layouts["paged"]
    assert list(contiguous) == list(paged)  # the same categories, by the same names
    assert sum(contiguous.values()) == sum(paged.values()) == 64 and layouts["refused"] == []
    lengths = [len(t) for t in ("Pages fill", "one slot", "at a time")]
    assert contiguous["tokens"] == sum(lengths) == paged["tokens"]
    decodes = len(run.steps) - 3
    # the oracle reserves each final length; the last decode step was refused (pool full)
    finals = [n + decodes - 1 for n in lengths]
    assert contiguous["reserved"] == sum(finals) - sum(lengths)
    assert contiguous["internal_fragmentation"] == 0 and contiguous["cached"] == 0
    assert paged["reserved"] == paged["external_fragmentation"] == 0
    # 62 of 64 slots reserved: the 2 left cannot take a max_seq_len (32) request
    assert contiguous["external_fragmentation"] == 64 - sum(finals) and contiguous["free"] == 0


def legend_of(fig) -> dict[str, tuple]:
    """label -> (face colour, hatch) of the figure legend's swatches."""
    (legend,) = fig.legends
    return {
        text.get_text(): (tuple(patch.get_facecolor()), patch.get_hatch())
        for text, patch in zip(legend.get_texts(), legend.get_patches(), strict=True)
    }


def test_plot_paged_vs_contiguous_keys_every_sequence_and_only_what_it_shows():
    run = ScenarioRun("fill")
    while not run.done:
        run.step()
    palette = SequencePalette()
    fig = plot_paged_vs_contiguous(run.snapshots, "max", step=10, palette=palette)
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert any(t.startswith("paged: 16 pages") for t in titles)
    assert any("refused (no hole fits): charlie" in t for t in titles)
    # 'max' reserves max_seq_len slots each; the title says so in words, as its ranges measure
    cache, _ = contiguous_replay(run.snapshots, "max", step=10)
    lengths = {r.length for r in cache.accounting().reservations}
    assert lengths == {32} and titles[1].startswith("contiguous (32 slots reserved per request):")
    assert "max_seq_len" not in titles[1]
    key = legend_of(fig)
    for seq_id in ("alpha", "bravo", "charlie"):  # the refused one can be found by colour
        assert key[f"token of {seq_id}"][0] == to_rgba(palette.color(seq_id))
    labels = " | ".join(key)
    # nothing is CACHED and no hole is left at step 10: neither is in the key
    layouts = compare_layouts(run.snapshots, "max", step=10)
    assert not any(layouts[m]["cached"] for m in ("paged", "contiguous"))
    assert "CACHED" not in labels and "external" not in labels
    assert "reserved" in labels and "internal" in labels
    with pytest.raises(ValueError, match=r"step must be in \[0, "):
        plot_paged_vs_contiguous(run.snapshots, step=99)
    with pytest.raises(TypeError, match="step must be an int, got 1.0"):
        plot_paged_vs_contiguous(run.snapshots, step=1.0)


def test_paged_vs_contiguous_bars_tell_every_category_apart():
    run = ScenarioRun("eviction")
    while not run.done:
        run.step()
    fig = plot_paged_vs_contiguous(run.snapshots, "pow2", step=8)  # doc_A CACHED, doc_B live
    bars = fig.axes[-1]
    styles = {}
    for container in bars.containers:
        patch = container.patches[0]
        styles[container.get_label()] = (tuple(patch.get_facecolor()), patch.get_hatch())
    assert any(label.startswith("CACHED") for label in styles)
    assert len(set(styles.values())) == len(styles)  # no two categories look the same


def test_external_fragmentation_holes_are_those_the_accounting_counts():
    cache = ContiguousKVCache(64, "oracle", max_seq_len=16)
    for req_id, final in (("a", 10), ("b", 5), ("c", 12), ("d", 3), ("e", 16)):
        cache.add(req_id, 1, final)
    cache.free("b")  # a 5-slot hole
    cache.free("d")  # a 3-slot hole
    holes = external_holes(cache)
    # by hand: holes at 10 (5 slots), 27 (3 slots) and the tail at 46 (18 slots); a request
    # of max_seq_len = 16 tokens fits only the tail
    assert cache.holes() == [(10, 5), (27, 3), (46, 18)]
    assert holes == [(10, 5), (27, 3)]
    assert sum(n for _, n in holes) == cache.accounting().external_fragmentation


def test_sequence_palette_is_stable_and_colour_blind_safe_first():
    palette = SequencePalette()
    colors = [palette.color(f"s{k}") for k in range(12)]
    assert colors == list(SEQUENCE_COLORS) and len(set(colors)) == 12
    assert palette.color("s3") == colors[3]  # the same colour on every later call
    assert palette.color("s12") == colors[0]  # cycles after twelve
    palette.clear()
    assert palette.color("new") == colors[0]


def test_static_plots_refuse_non_snapshots():
    for plot in (plot_pool, plot_lru, plot_block_tables, block_table_html, slot_usage, plot_slots):
        with pytest.raises(TypeError, match="snapshot must be a PoolSnapshot"):
            plot({})


# ---- projector size ----------------------------------------------------------------------------


def _prefix_run():
    from pagedkv.scenarios import ScenarioRun

    run = ScenarioRun("prefix")
    for _ in range(8):
        run.step()
    return run


def test_every_matplotlib_picture_is_projector_size():
    from pagedkv.viz import (
        plot_block_tables,
        plot_lifecycle,
        plot_paged_vs_contiguous,
        plot_slots,
        plot_usage,
    )
    from pagedkv.viz.projector import DPI, WIDTH_IN, min_font_pt

    run = _prefix_run()
    snap = run.snapshots[-1]
    figures = {
        "block tables": plot_block_tables(snap),
        "slots": plot_slots(snap),
        "usage": plot_usage(run.snapshots),
        "paged vs contiguous": plot_paged_vs_contiguous(run.snapshots),
        "lifecycle": plot_lifecycle(["allocate"]),
    }
    for name, fig in figures.items():
        width_px = fig.get_size_inches()[0] * fig.dpi
        assert width_px >= WIDTH_IN * DPI * 0.99, name  # fills a ~1100 px cell
        assert min_font_pt(fig) >= 13, name  # >= 12 pt once shrunk to the cell


def test_projector_never_shrinks_tick_labels_set_larger_nor_those_a_new_limit_makes():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from pagedkv.viz.projector import MIN_PT, projector

    fig = Figure(figsize=(5, 3))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1])
    ax.tick_params(axis="y", labelsize=MIN_PT + 5)  # a figure that wants larger y ticks
    projector(fig)
    ax.set_ylim(0, 5)  # new ticks, made after projector() ran
    fig.canvas.draw()
    assert {t.get_fontsize() for t in ax.get_yticklabels()} == {MIN_PT + 5}
    assert {t.get_fontsize() for t in ax.get_xticklabels()} == {MIN_PT}


def test_heatmaps_are_projector_size_and_never_cut_an_owner_name():
    from pagedkv.viz import plot_lru, plot_pool

    run = _prefix_run()
    snap = run.snapshots[-1]
    for heatmap in (plot_pool(snap), plot_lru(snap, run.events)):
        assert heatmap.size[0] >= 1100
        # 13 pt at 110 dpi; shown shrunk to an 1100 px cell it is still >= 12 pt (16 CSS px)
        assert heatmap.min_font_px * 1100 / heatmap.size[0] * 0.75 >= 12
    lru = plot_lru(snap, run.events)
    for label in lru.panels["lru"].labels:
        assert "…" not in label
    from pagedkv.viz.heatmap import PoolHeatmap

    heatmap = PoolHeatmap(16, 4, views=("lru",))
    assert heatmap._wrap("request_alpha") == "request_\nalpha"  # split after its last "_"
    assert heatmap._wrap("a_very_long_request_name") == ""  # no part fits: left out, never cut


# ---- predict-then-step and check questions --------------------------------------------------------


def test_predict_step_runs_the_step_once_and_says_whether_the_prediction_held():
    from pagedkv.scenarios import ScenarioRun
    from pagedkv.viz import PredictStep

    run = ScenarioRun("walkthrough")
    ask = PredictStep("00-prompt-pages", run)
    ask.check()  # no answer yet: nothing runs
    assert run.cursor == 0 and "Pick an answer" in ask.result.value
    ask.answer("4")
    assert run.cursor == 1 and ask.correct is False and "Not quite.</b>" in ask.result.value
    assert "Think it over" in ask.result.value and "the answer is" not in ask.result.value
    assert not ask.button.disabled and not ask.picture.value  # a second try, nothing shown yet
    assert ask.button.button_style == "primary"  # still looks pressable
    assert "color:#111111" in ask.result.value  # only the verdict is red, not the hint after it
    ask.choices.value = "18"  # a new pick, not yet graded: the old pick's "Not quite" goes
    assert "Not quite" not in ask.result.value and "Check again" in ask.result.value
    ask.answer("18")  # a second wrong pick: the answer, the step's picture, and the question locks
    assert run.cursor == 1 and "the answer is “5 pages”" in ask.result.value
    assert bytes(ask.picture.value).startswith(b"\x89PNG")
    assert ask.button.disabled and ask.choices.disabled and ask.button.button_style == ""
    assert ask.button.description == "Answer shown"  # not "Check again": nothing is left to check
    ask.answer("5")  # a later pick changes nothing: the verdict stands, nothing steps
    assert run.cursor == 1 and "the answer is “5 pages”" in ask.result.value
    right = PredictStep("00-prompt-pages", ScenarioRun("walkthrough"))
    right.answer("5")  # a right pick locks too, labelled "Answered"
    assert (
        right.button.disabled and right.button.button_style == "" and right.button.description == "Answered"
    )
    assert run.seqs.block_table("request_A") == [0, 1, 2, 3, 4]  # what the step really did


def test_the_outcome_readers_name_what_a_step_did():
    from pagedkv.scenarios import ScenarioRun
    from pagedkv.viz import questions as q

    parallel = ScenarioRun("parallel")
    parallel.goto(4)
    record = parallel.step()
    assert q.page_copied(record, parallel) == "4" and q.pages_allocated(record, parallel) == "5, 6, 7"
    walk = ScenarioRun("walkthrough")
    walk.goto(42)
    assert q.page_evicted(walk.step(), walk) == "8"
    preempt = ScenarioRun("preempt")
    preempt.goto(10)
    assert q.request_preempted(preempt.step(), preempt) == "req2"


def test_quiz_checks_answers_and_refuses_an_unknown_question_id():
    from pagedkv.viz import Quiz
    from pagedkv.viz.questions import Question

    quiz = Quiz("01-check")  # 1. page_size 4, block table [7, 2, 9]: the slot of position 5
    assert not quiz.check(0)  # nothing picked
    assert quiz.check(0, "9") and "Right" in quiz.feedback[0].value
    quiz = Quiz("01-check")  # a learner who picks wrong gets one more try before the answer
    why = quiz.questions[0].why
    assert not quiz.check(0, "21") and "Not quite" in quiz.feedback[0].value
    assert "the answer is" not in quiz.feedback[0].value and why not in quiz.feedback[0].value
    # the same pick checked again is no second try (a Check can reach the kernel before its pick)
    assert not quiz.check(0, "21") and "You checked “21” already" in quiz.feedback[0].value
    assert not quiz.check(0, "8") and "the answer is “9”" in quiz.feedback[0].value
    assert why in quiz.feedback[0].value
    with pytest.raises(ValueError, match="answer must be one of"):
        Question("q", ("a", "b"), "c", "why")
    with pytest.raises(ValueError, match="question_id must be one of .* got '99-check'"):
        Quiz("99-check")
    with pytest.raises(TypeError, match="question_id must be a str"):
        Quiz(5)


def test_the_kernel_picture_ends_the_last_pages_label_at_the_last_token():
    """A 31-token prompt on 8 pages of 4 holds positions 0..30: its last scores are s28-30."""
    from pagedkv.viz.kernel import plot_chunked_kernel

    def labels(**kwargs):
        fig = plot_chunked_kernel([0, 1, 2, 7, 8, 9, 10, 11], chunk=3, page_size=4, **kwargs)
        texts = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
        return [t for t in texts if re.fullmatch(r"s[0-9-]+", t)]

    last = [f"s{p}-{p + 3}" for p in range(0, 28, 4)]
    assert labels(num_tokens=31) == [*last, "s28-30"]
    assert labels(num_tokens=29) == [*last, "s28"]
    assert labels() == [*last, "s28-31"]  # every page full
    with pytest.raises(ValueError, match=r"num_tokens must be in \[29, 32\], got 33"):
        plot_chunked_kernel([0, 1, 2, 7, 8, 9, 10, 11], page_size=4, num_tokens=33)


def test_the_kernel_picture_numbers_its_chunks_from_0_like_the_pages():
    """8 pages in chunks of 3 are 3 chunks (3 + 3 + 2 pages): chunk 0, 1 and 2, no chunk 3."""
    from pagedkv.viz.kernel import plot_chunked_kernel

    fig = plot_chunked_kernel([0, 1, 2, 7, 8, 9, 10, 11], chunk=3, page_size=4)
    texts = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
    assert sorted(t for t in texts if re.fullmatch(r"chunk \d+", t)) == ["chunk 0", "chunk 1", "chunk 2"]


def test_the_kernel_picture_refuses_a_chunk_of_the_wrong_kind_or_size():
    from pagedkv.viz.kernel import plot_chunked_kernel

    with pytest.raises(TypeError, match="chunk must be an int, got 2.0"):
        plot_chunked_kernel([0, 1, 2], chunk=2.0)
    with pytest.raises(ValueError, match="chunk must be >= 1, got 0"):
        plot_chunked_kernel([0, 1, 2], chunk=0)


def test_plot_query_outputs_draws_one_line_per_query_and_refuses_uneven_panels():
    from pagedkv.viz import plot_query_outputs

    same, other = [1.0, 2.0, 3.0], [3.0, 1.0, 0.0]
    fig = plot_query_outputs({"ignores q": [same, same], "attention": [same, other]})
    lines = [
        [
            [float(y) for y in line.get_ydata()]
            for line in ax.get_lines()
            if line.get_label().startswith("query")
        ]
        for ax in fig.axes
    ]
    assert lines == [[same, same], [same, other]]
    shared = plot_query_outputs({"ignores q": [same], "attention": [other]}, sharey=True)
    assert shared.axes[0].get_ylim() == shared.axes[1].get_ylim()
    with pytest.raises(ValueError, match="same number"):
        plot_query_outputs({"a": [same], "b": [same, other]})
    with pytest.raises(ValueError, match="at least one program"):
        plot_query_outputs({})


def test_plot_query_outputs_puts_a_tick_past_each_end_of_the_data():
    from pagedkv.viz import plot_query_outputs

    naive, dense = [3.0, 9.1, -6.1, 0.5], [0.2, -0.89, 0.3, 0.0]
    fig = plot_query_outputs({"naive": [naive], "dense": [dense]})
    # steps of 2 and of 0.2, each ending at the first multiple of the step past the data
    assert [float(t) for t in fig.axes[0].get_yticks()] == [-8.0 + 2 * i for i in range(10)]
    assert fig.axes[0].get_ylim() == (-8.0, 10.0)
    ticks = [round(float(t), 6) for t in fig.axes[1].get_yticks()]
    assert ticks == [round(-1.0 + 0.2 * i, 6) for i in range(8)]
    assert min(ticks) < min(dense) and max(ticks) > max(dense)
    shared = plot_query_outputs({"naive": [naive], "dense": [dense]}, sharey=True)
    assert [a.get_ylim() for a in shared.axes[:2]] == [(-8.0, 10.0)] * 2


def test_plot_query_outputs_marks_each_head_and_shares_one_legend():
    import numpy as np

    from pagedkv.viz import plot_query_outputs

    out = np.arange(16.0).reshape(1, 2, 8)  # one query row, 2 heads of 8 dims
    fig = plot_query_outputs({"a": [out, out], "b": [out, -out]})
    for ax in fig.axes[:2]:
        dividers = [
            line.get_xdata()[0]
            for line in ax.get_lines()
            if line.get_linestyle() == "--" and not line.get_label().startswith("query")
        ]
        assert dividers == [7.5]  # head 0 holds elements 0-7, head 1 holds 8-15
        assert ax.get_xlabel() == "output element (head 0: 0-7, head 1: 8-15)"
        assert ax.get_legend() is None
    fig.canvas.draw()
    heads = [[t.get_text() for t in ax.child_axes[0].get_xticklabels()] for ax in fig.axes]
    assert heads == [["head 0", "head 1"]] * 2
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["query 1", "query 2"]


def test_plot_page_states_lists_the_top_band_first():
    from pagedkv.viz import plot_page_states

    fig = plot_page_states({"FREE": [3, 2, 1], "CACHED": [0, 1, 2]}, "request")
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["CACHED", "FREE"]


def test_the_owner_key_names_only_sequences_that_own_a_page():
    """A fork that has not written holds only its parent's pages: the owner view colours none of
    them with its colour, so its key has no row for it; once it writes (copy-on-write) it owns
    a page and gets its row."""
    from pagedkv.scenarios import Action, ScenarioRun
    from pagedkv.viz import plot_pool

    run = ScenarioRun("walkthrough")
    for _ in range(5):
        run.step()
    child = "request_A.f1"
    run.apply(Action("fork", child, parent="request_A"))
    names = [label for _, label in plot_pool(run.snapshots[-1]).panels["owner"].legend]
    assert "request_A" in names and str(child) not in names
    run.apply(Action("decode"))  # both write: the child copies the shared last page
    names = [label for _, label in plot_pool(run.snapshots[-1]).panels["owner"].legend]
    assert str(child) in names


def test_a_prefix_hit_on_a_page_that_was_once_a_copy_is_outlined_as_a_hit_in_its_table():
    """Notebook 04's dashboard: a request added with the prefix of sample.0 finds sample.0's
    copy-on-write page 5 in the prefix index. Its own table shows a prefix hit there; only
    sample.0, which made the copy, shows the copy outline and "←4"."""
    story = ScenarioRun("parallel")
    for _ in range(12):
        story.step()
    tokens = list(story.seqs.get("sample.0").token_ids)
    assert story.seqs.add("yours1", tokens[:24] + [1, 2]) == 24
    assert story.seqs.block_table("yours1")[4] == 5
    page = block_table_html(story.seqs.snapshot(), events=story.events)
    mine, theirs = page[page.index(">yours1<") :], page[page.index(">sample.0<") : page.index(">sample.1<")]
    assert "block 4 -&gt; page 5, ref count 2, prefix hit" in mine and "←4" not in mine
    assert "copy-on-write from page 4" in theirs and "5×2←4" in theirs
    fig = plot_block_tables(story.seqs.snapshot(), events=story.events)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts.count("5 ×2\n←4") == 1  # sample.0's cell only
