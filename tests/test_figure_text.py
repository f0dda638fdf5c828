"""Text in every figure is >= 12 CSS px when shown in a notebook at 1280 px wide.

At a 1280 px wide JupyterLab window a notebook's output area is about `CELL_PX` wide; a
picture wider than that is shrunk to fit, a narrower one is shown at its own size. So a text
of `s` points in a figure of `w` px drawn at `dpi` shows at `s * dpi / 72 * min(1, CELL_PX / w)`
CSS px. Every text artist of every matplotlib figure the notebooks draw is measured that way
(ticks, legends and titles included), and every heatmap by its smallest stamped text; the
compact dashboard's main heatmap is shown beside the log at `DASHBOARD_SHARE` of the cell.
A heatmap's title stamped per snapshot (the LRU view's) is measured against the room it is
drawn in, in every picture that shows one.
(tests/browser/test_projector.py measures some of the same pictures in a real browser.)
"""

from __future__ import annotations

import copy

import pytest
from matplotlib.text import Text

from pagedkv import TinyLM
from pagedkv.radix.radix_cache import RadixCache
from pagedkv.scenarios import ScenarioRun
from pagedkv.scenarios.text import token_ids_of
from pagedkv.service.wal import Record
from pagedkv.service.wal_strip import plot_wal_strip
from pagedkv.viz import (
    Dashboard,
    PredictStep,
    plot_block_tables,
    plot_chunked_kernel,
    plot_lifecycle,
    plot_lru,
    plot_page_states,
    plot_paged_vs_contiguous,
    plot_pool,
    plot_query_outputs,
    plot_series,
    plot_slots,
    plot_token_pages,
    plot_usage,
)
from pagedkv.viz.capacity import plot_budget, plot_ways_back
from pagedkv.viz.chains import plot_page_chains
from pagedkv.viz.controls import MAIN_SHARE as DASHBOARD_SHARE  # the main heatmap's share
from pagedkv.viz.radix import plot_radix_growth, plot_radix_tree
from pagedkv.viz.two_memories import plot_share_bars, plot_two_memories

CELL_PX = 848  # a notebook's output width in JupyterLab at 1280 px, the file browser open
MIN_PX = 12.0


def shown_px(fig) -> list[tuple[float, str]]:
    """(CSS px, text) of every visible, non-empty text of `fig` as a notebook shows it."""
    fig.canvas.draw()
    width = fig.get_size_inches()[0] * fig.dpi
    scale = fig.dpi / 72 * min(1.0, CELL_PX / width)
    return [
        (float(t.get_fontsize()) * scale, t.get_text())
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and t.get_figure() is not None
    ]


def _run(name: str, steps: int) -> ScenarioRun:
    run = ScenarioRun(name)
    for _ in range(steps):
        run.step()
    return run


def _radix_figures():
    model = TinyLM(seed=0)
    tree = RadixCache(page_size=4)
    a, b = model.encode("System: be brief. Hi you"), model.encode("System: be brief! Why so")
    tree.insert(a, [0, 1, 2, 3, 4, 5])
    first = copy.deepcopy(tree)
    match = tree.match_prefix(b)
    split = copy.deepcopy(tree)
    tree.insert(b, match.page_ids + [6, 7])
    steps = [("1. insert A", first), ("2. match B: split", split), ("3. insert B", tree)]  # notebook 09
    across = plot_radix_tree(tree, decode=model.decode, across=True)
    return plot_radix_growth(steps, decode=model.decode), plot_radix_tree(tree, decode=model.decode), across


def _figures() -> dict[str, object]:
    prefix, fill = _run("prefix", 8), _run("fill", 12)
    snap = prefix.snapshots[-1]
    growth, radix_tree, radix_across = _radix_figures()
    return {
        "block tables": plot_block_tables(snap, step=prefix.cursor),
        "tokens by page": plot_token_pages(snap, token_ids_of(prefix.seqs)),
        "slots": plot_slots(snap),
        "usage": plot_usage(fill.snapshots),
        "paged vs contiguous": plot_paged_vs_contiguous(fill.snapshots, policy="max", step=10),
        "two memories (notebook 01)": plot_two_memories(fill.snapshots, "oracle", max_seq_len=64, step=9),
        "share bars (notebook 01)": plot_share_bars(fill.snapshots, "oracle", max_seq_len=64, step=9),
        "lifecycle": plot_lifecycle(["allocate"]),
        "chunked kernel": plot_chunked_kernel([5, 2, 9], chunk=3, page_size=4),
        "series": plot_series({"naive": [3, 2, 1], "pagedkv": [3, 3, 3]}, "request", "pages free"),
        "page states": plot_page_states({"FREE": [3, 2, 1], "CACHED": [0, 1, 2]}, "request", "a run"),
        "query outputs": plot_query_outputs(
            {"naive k·v": [[2.0] * 16, [2.0] * 16], "dense": [[0.1 * i for i in range(16)], [0.0] * 16]},
            "two queries",
        ),
        "query outputs by head": plot_query_outputs(  # notebook 08: 2 heads of 8, a label over each
            {"naive k·v": [[[[2.0] * 8] * 2]] * 2, "dense": [[[[0.1] * 8] * 2]] * 2}, "two queries"
        ),
        "radix growth": growth,
        "radix tree": radix_tree,
        "radix tree across": radix_across,
        "page chains": plot_page_chains(  # notebook 09, section 3: five boxes a row
            {
                "hash chain (pagedkv)": [("pages 0-5", "reached", "hits")]
                + [(f"page {p}", "orphan", "10th: partial") for p in (7, 6, 8, 11)],
                "radix tree": [("no page", "evicted", "")] * 5,
            },
            "Request 3's pages after its release, in block order",
        ),
        "memory budget": plot_budget("Mistral-7B", "A100-40GB"),
        "ways back": plot_ways_back("Llama-3-8B", "A100-40GB", [16, 256, 1024]),
        "wal strip": plot_wal_strip(  # notebook 07's log: records 96..149 after a checkpoint
            [Record(0, seq, {}, 0) for seq in range(96, 150)],
            {"checkpoint_seq": 95, "records_replayed": 54, "torn_bytes": 11, "discarded_records": 0},
        ),
    }


def test_every_text_of_every_figure_is_at_least_12_px_at_1280():
    small = []
    for name, fig in _figures().items():
        small += [(name, round(px, 1), text[:30]) for px, text in shown_px(fig) if px < MIN_PX]
    assert not small, small


def test_the_measure_sees_a_small_label():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(20, 4), dpi=100)  # 2,000 px: shown at 42.4 %
    FigureCanvasAgg(fig)
    fig.text(0.5, 0.5, "small", fontsize=14)  # 14 pt = 19.4 px, shown at 8.2 px
    assert [round(px, 1) for px, _ in shown_px(fig)] == [8.2]


def test_heatmaps_and_the_dashboards_pictures_are_at_least_12_px_at_1280():
    run = _run("prefix", 8)
    snap = run.snapshots[-1]
    shown = {  # picture -> its shown width in CSS px
        "pool": (plot_pool(snap), CELL_PX),
        "lru": (plot_lru(snap, run.events), CELL_PX),
        "prediction": (PredictStep("03-evict")._heatmap, CELL_PX),  # noqa: SLF001
    }
    dash = Dashboard("prefix")
    main, more, lru = dash._maps()  # noqa: SLF001 - the three pictures the dashboard shows
    shown |= {
        "dashboard main": (main, CELL_PX * DASHBOARD_SHARE),
        "dashboard more views": (more, CELL_PX),
        "dashboard lru": (lru, CELL_PX),
    }
    small = {}
    for name, (heatmap, width) in shown.items():
        px = heatmap.min_font_px * min(1.0, width / heatmap.size[0])
        if px < MIN_PX:
            small[name] = round(px, 1)
    assert not small, small


@pytest.mark.parametrize("name", ["block tables", "tokens by page"])
def test_request_pictures_name_every_request_in_readable_text(name):
    texts = " ".join(t for _, t in shown_px(_figures()[name]))
    for seq_id in _run("prefix", 8).snapshots[-1].seq_ids:
        assert str(seq_id) in texts


@pytest.mark.parametrize("num_pages", [4, 12, 16, 20, 40, 100, 256, 1000])
@pytest.mark.parametrize(
    ("views", "width", "dpi", "columns", "height"),
    [
        (("state", "owner"), 8.0, 90, 1, 4.6),  # the dashboard's main picture, stacked
        (("state", "owner"), 4.39, 82, 2, 5.05),  # ... and side by side (tests/test_dashboard.py
        # checks the layout the dashboard picks at each pool size)
        (("occupancy", "ref_count"), 4.6, 110, None, None),  # its More views tab
        (("state", "occupancy", "owner", "ref_count"), 5.5, 110, None, None),
        (("owner", "ref_count"), 5.5, 110, None, None),
        (("lru",), 11.0, 110, None, None),
        (("state", "lru"), 11.0, 110, 1, None),  # an LRU panel with another: stacked (PoolHeatmap)
    ],
)
def test_no_heatmap_text_runs_past_the_picture_or_into_other_text(
    num_pages, views, width, dpi, columns, height
):
    """The compact dashboard's panels are narrow: a long page-id label (with the note on
    hatched positions) or a title must wrap, not be cut at the picture's edge nor run into
    a tick label, a colour bar or a legend; tick labels never touch each other."""
    from pagedkv.viz.controls import PAGES_RANGE
    from pagedkv.viz.frame import build_frame

    if height is not None and num_pages > PAGES_RANGE[1]:
        pytest.skip("the dashboard's pool never has more pages than its slider's maximum")
    frame = build_frame(num_pages, 16, views, dpi, width, columns, height)
    assert frame.cut_texts == ()


def _stamped_title_pictures():
    """Every picture with a title stamped per snapshot (the LRU view's), as each is drawn: the
    prediction widgets (two panels side by side, so a narrow LRU panel), the notebooks'
    `plot_lru` and the dashboard's LRU tab."""
    from pagedkv.viz.questions import all_questions

    shown = {}
    for qid, data in all_questions()["predict"].items():
        widget = PredictStep(qid)
        widget.answer(data.answer)  # the picture appears once the step has run
        shown[f"prediction {qid}"] = widget._heatmap  # noqa: SLF001
    run = _run("walkthrough", 43)
    shown["plot_lru"] = plot_lru(run.snapshots[-1], run.events)
    dash = Dashboard("walkthrough")
    dash.goto(43)
    shown["dashboard lru"] = dash._maps()[2]  # noqa: SLF001
    return shown


def test_stamped_titles_fit_between_the_pictures_title_the_grid_and_the_key():
    """The frame's check (`cut_texts`) sees only the texts matplotlib draws; a title stamped
    onto the picture afterwards is measured here, line by line, with the font it is drawn in:
    it ends before the key beside its grid and the picture's edge, starts below the picture's
    title and ends above the grid."""
    from pagedkv.viz.frame import SUPTITLE_PT, TITLE_PT
    from pagedkv.viz.glyphs import _font

    seen, bad = set(), []
    for name, heatmap in _stamped_title_pictures().items():
        px = heatmap._frame.px  # noqa: SLF001
        font = _font(round(TITLE_PT * px))
        below_suptitle = 3 * px + _font(round(SUPTITLE_PT * px)).getbbox(heatmap.suptitle, anchor="ma")[3]
        for view, panel in heatmap.panels.items():
            rows = heatmap.title_rows(panel)
            seen |= {view} if rows else set()
            right = min(panel.frame.key_box[0], heatmap.size[0])
            for line, x, y in rows:
                x0, top, x1, bottom = font.getbbox(line, anchor="ls")
                if x + x1 > right or y + top < below_suptitle or y + bottom > panel.frame.boxes[:, 1].min():
                    bad.append((name, view, line))
    assert "lru" in seen  # the LRU titles were measured
    assert not bad, bad


def test_the_collision_check_sees_a_title_over_a_colour_bar():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from pagedkv.viz.frame import _cut_texts

    fig = Figure(figsize=(4, 3), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(xticks=[], yticks=[])
    ax.inset_axes([0.8, 0.0, 0.1, 1.0], xticks=[], yticks=[])  # a colour bar's place
    ax.set_title("a title long enough to reach the bar on the right", loc="left")
    fig.canvas.draw()
    assert _cut_texts(fig) == ("a title long enough to reach the bar on the right",)


def _owner_legends():
    """(name, heatmap, panel) of owner legends the notebooks and the dashboard show, with
    names that differ only at their end (04: sample.3 and its fork sample.3.f1)."""
    dash = Dashboard("parallel")
    dash.goto(4)
    dash.seq_picker.value = "sample.3"
    dash.fork()
    walk = Dashboard("walkthrough")
    walk.goto(5)
    walk.seq_picker.value = "request_A"
    walk.fork()
    snap = dash.run.snapshots[-1]
    pictures = {
        "dashboard 04": dash._maps()[0],  # noqa: SLF001
        "dashboard 00": walk._maps()[0],  # noqa: SLF001
        "04 owner, ref_count": plot_pool(snap, views=("owner", "ref_count")),
        "pool": plot_pool(snap),
    }
    return [(name, h, h.panels["owner"]) for name, h in pictures.items()]


def test_owner_legends_show_every_name_whole_inside_the_picture_below_the_title():
    from pagedkv.viz.frame import FONT_PT, TITLE_PT, TITLES
    from pagedkv.viz.glyphs import _font

    for name, heatmap, panel in _owner_legends():
        rows = heatmap.legend_rows(panel)
        size = round(FONT_PT * heatmap._frame.px)  # noqa: SLF001
        shown = ["".join(lines) for _, lines, _, _ in rows]
        assert len(set(shown)) == len(shown), (name, shown)  # two names never look alike
        for _, label in panel.legend:
            assert label in shown, (name, label, shown)  # whole, not cut
        lefts = sorted({x for _, _, x, _ in rows})
        for _, lines, x, y in rows:
            if y < panel.frame.boxes[:, 1].min():  # beside the title: only where the title ends
                title = TITLES[panel.view]
                end = panel.frame.title_xy[0] + _font(round(TITLE_PT * heatmap._frame.px)).getlength(title)  # noqa: SLF001
                assert x > end, (name, title, x, end)
            right = next((left for left in lefts if left > x), heatmap.size[0])  # next column or edge
            for line in lines:
                assert x + 22 * heatmap._frame.px + _font(size).getlength(line) <= right, (name, line)  # noqa: SLF001
        spots = [(x, y) for _, _, x, y in rows]
        assert len(set(spots)) == len(spots), (name, spots)  # no two rows on top of each other
        line = 1.45 * FONT_PT * heatmap._frame.px  # noqa: SLF001
        floor = panel.frame.key_box[3]  # above the axis label where it runs under the key
        for _, lines, _, y in rows:
            assert y + len(lines) * line <= floor + 0.5, (name, lines, y, floor)


def test_a_long_owner_legend_stays_above_a_wide_axis_label():
    """Parallel's samples: in its pool of 20 pages (two full rows of 10) every owner shows,
    inside the picture; in a pool of 21 (one hatched position) the axis label ("…; hatched:
    no page") runs under the key, one line of column ids below the grid, so no legend row may
    reach lower (the fifth row was drawn over that label)."""
    from pagedkv.viz.frame import FONT_PT
    from pagedkv.viz.main_picture import main_heatmap
    from pagedkv.viz.palette import SequencePalette

    for num_pages in (20, 21):
        run = ScenarioRun("parallel", num_pages=num_pages)
        for _ in range(5):
            run.step()
        heatmap = main_heatmap(num_pages, run.page_size, SequencePalette().restart(run.steps))
        heatmap.update(run.snapshots[-1])
        panel = heatmap.panels["owner"]
        line = 1.45 * FONT_PT * heatmap._frame.px  # noqa: SLF001
        rows = heatmap.legend_rows(panel)
        if num_pages == 20:
            snap = run.snapshots[-1]
            owners = {str(snap.seq_ids[k]) for k in set(snap.owner.tolist()) if k >= 0}
            assert {"".join(lines) for _, lines, _, _ in rows} == owners  # every owner named
            assert all(y + len(lines) * line <= heatmap.size[1] for _, lines, _, y in rows), rows
        else:
            label_top = panel.frame.boxes[:, 3].max() + 1.2 * line  # under the column ids
            assert all(y + len(lines) * line <= label_top for _, lines, _, y in rows), rows


def test_the_main_picture_names_every_owner_when_two_columns_hold_them():
    """Notebook 01's dashboard after a fork and a request of your own: four sequences own
    pages beside a two-row grid. One column holds five rows, so the names flow into two
    columns instead of folding two of them into "+2 more"; the oracle is the snapshot's own
    owner array, not the panel's legend."""
    from pagedkv.scenarios.actions import Action
    from pagedkv.viz.main_picture import main_heatmap
    from pagedkv.viz.palette import SequencePalette

    run = _run("fill", 6)
    run.apply(Action("fork", seq_id="alpha.f1", parent="alpha"))
    run.apply(Action("add", seq_id="yours1", text="hello there friend"))
    run.decode_all()
    snap = run.seqs.snapshot()
    heatmap = main_heatmap(snap.num_pages, snap.page_size, SequencePalette().restart(run.steps))
    heatmap.update(snap, run.events)
    owners = {str(snap.seq_ids[k]) for k in set(snap.owner.tolist()) if k >= 0}
    shown = {"".join(lines) for _, lines, _, _ in heatmap.legend_rows(heatmap.panels["owner"])}
    assert len(owners) >= 4 and "yours1" in owners
    assert "state" in heatmap.panels  # its key names FREE and CACHED: the owner key names owners
    assert owners == shown  # every owner named, nothing folded


def test_the_owner_key_folds_your_forks_before_the_scenarios_requests():
    """Notebook 05's dashboard: a request of your own and its fork beside the scenario's req1,
    under a two-row grid with room for few names. The key names req1 (the scenario's) and
    folds the fork first; the oracle is the snapshot's owner array and the ids' origin."""
    from pagedkv.scenarios.actions import Action
    from pagedkv.viz.main_picture import main_heatmap
    from pagedkv.viz.palette import SequencePalette

    run = _run("preempt", 3)
    run.apply(Action("add", seq_id="yours1", text="Hi there, a short one"))
    run.apply(Action("fork", seq_id="yours1.f1", parent="yours1"))
    run.decode_all()
    for _ in range(2):
        run.step()
    snap = run.seqs.snapshot()
    heatmap = main_heatmap(snap.num_pages, snap.page_size, SequencePalette().restart(run.steps))
    heatmap.update(snap, run.events)
    owners = [str(snap.seq_ids[k]) for k in sorted(set(snap.owner.tolist())) if k >= 0]
    shown = ["".join(lines) for _, lines, _, _ in heatmap.legend_rows(heatmap.panels["owner"])]
    scenario = [s for s in owners if not s.startswith("yours")]
    assert scenario and all(s in shown for s in scenario)  # the scenario's requests: all named
    folded = [s for s in owners if s not in shown]
    assert all(s.startswith("yours") for s in folded)  # only your own fold, forks before requests
    assert not ("yours1" in folded and "yours1.f1" not in folded)


def test_legend_rows_wrap_a_long_name_rather_than_cut_it():
    from pagedkv.viz.heatmap import _legend_lines

    assert _legend_lines("request_A.f1", 20, 110) == ["request_A.", "f1"]
    assert _legend_lines("request_A", 20, 400) == ["request_A"]
    assert _legend_lines("no holder", 20, 70) == ["no", "holder"]  # not "no …der"


def _legends(fig) -> list:
    return [*fig.legends, *(legend for ax in fig.axes if (legend := ax.get_legend()) is not None)]


def test_the_block_tables_key_is_laid_out_at_least_12_px_at_1280():
    """A legend sizes its swatches by the font size it was made with; raising its texts
    afterwards (as `projector` does) leaves a key of tiny swatches beside large words. So
    each legend's own size is measured, not only its texts."""
    run = _run("parallel", 12)  # shared pages and copy-on-write: the block tables' key shows both
    figures = {
        "block tables": _figures()["block tables"],  # prefix hits and shared pages
        "block tables, cow": plot_block_tables(run.snapshots[-1], events=run.events, step=run.cursor),
    }
    small, keyed = [], []
    for name, fig in figures.items():
        fig.canvas.draw()
        width = fig.get_size_inches()[0] * fig.dpi
        scale = fig.dpi / 72 * min(1.0, CELL_PX / width)
        for legend in _legends(fig):
            keyed.append(name)
            px = legend.prop.get_size_in_points() * scale
            if px < MIN_PX:
                small.append((name, round(px, 1), [t.get_text() for t in legend.get_texts()]))
    assert {"block tables", "block tables, cow"} <= set(keyed), keyed  # the keys are measured
    assert not small, small


def test_the_dashboards_block_tables_and_their_key_are_at_least_12_px():
    """The Block tables tab is HTML: every font size it sets (table, key) is >= 12 px."""
    import re

    from pagedkv.viz.block_table import block_table_html

    run = _run("parallel", 12)
    page = block_table_html(run.snapshots[-1], events=run.events)
    assert "copy-on-write" in page and "prefix hit" in page  # the key is there
    sizes = [float(px) for px in re.findall(r"font-size:\s*([\d.]+)px", page)]
    assert sizes and min(sizes) >= MIN_PX, sizes


def test_the_block_tables_tab_shows_tokens_by_page_before_the_key():
    """At 1280x720 the Block tables tab's box is 306 px tall: status, heading and two table
    rows leave room for one tokens-by-page row only if the one-line key comes after it (a
    learner saw the row cut at its labels, scrolling inside a sliver). Oracle: the order of
    the three parts in the HTML."""
    from pagedkv.scenarios.text import token_ids_of
    from pagedkv.viz.block_table import block_table_html

    run = _run("preempt", 20)  # req2 and req3 running, as in the learner's screenshot
    page = block_table_html(run.snapshots[-1], events=run.events, token_ids=token_ids_of(run.seqs))
    table, tokens, key = (page.index(s) for s in ("</table>", "tokens by page", "cell: the page"))
    assert table < tokens < key


SCREEN_PX = 720  # a small laptop screen's height: a whole figure, title included, must fit in it
BARS_PX = 160  # of which the browser's and JupyterLab's bars take about this much


def _benchmark_figures() -> dict[str, object]:
    """The benchmark figures of notebooks 06, 07, 10 and 11 (its host tier, routing and serving
    run), drawn as those notebooks show them (06 through `projector`), from small runs or
    records; the eviction curves, the tiers' hit rates and the routing results are made up: a
    figure's layout depends on the number of streams, policies, tiers and routers, not on the
    rates."""
    import numpy as np

    from pagedkv.bench import (
        Report,
        attention,
        eviction,
        memory,
        page_size,
        recorded,
        routing,
        scale,
        sharing,
        threads,
        tiers,
    )
    from pagedkv.viz import projector

    policies = eviction.POLICIES.split(",")
    curves = {
        w: {p: list(np.linspace(0.2, 0.7, 3) + 0.01 * i) for i, p in enumerate(policies)}
        for w in eviction.WORKLOADS.split(",")
    }
    eviction_data = {"curves": curves, "sizes": [1024, 2048, 4096], "cache_tokens": 2048}
    tier_runs = {k: {"gpu_hit_rate": 0.44, "host_hit_rate": h} for k, h in (("0", 0), ("64", 0.14))}
    routes = {r: {n: {"hit_rate": 0.5, "imbalance": 1.4} for n in (2, 4, 8)} for r in routing.ROUTERS}
    rates = {f"{d}/{m}/{n}": 1000.0 * n for d in threads.DESIGNS for m in threads.MIXES for n in (1, 2, 4, 8)}
    return {
        "06 memory": projector(memory.figure(memory.run(workloads="sharegpt", requests=30))),
        "06 sharing": projector(sharing.figure(sharing.run(requests=4))),
        "06 page size": projector(
            page_size.figure(page_size.run(requests=10, page_sizes="4,16", capacities="8192"), timing=False)
        ),
        "06 attention": projector(attention.figure(attention.run(quick=True))),
        "06 scale": projector(scale.figure(scale.run(sizes=(30,), num_pages=256))),
        "07 threads": threads.figure(Report("threads", [], [], data=rates)),
        "10 eviction": eviction.figure(Report("eviction", [], [], data=eviction_data)),
        "11 tiers": tiers.figure(Report("tiers", [], [], data={"runs": tier_runs})),
        "11 routing": routing.figure(Report("routing", [], [], data=routes)),
        "11 serving": recorded("serving").figure(),
    }


def test_benchmark_figures_have_text_of_at_least_12_px_and_fit_a_720_px_screen():
    small, tall = [], []
    for name, fig in _benchmark_figures().items():
        small += [(name, round(px, 1), text[:30]) for px, text in shown_px(fig) if px < MIN_PX]
        width, height = fig.get_size_inches() * fig.dpi
        shown_height = height * min(1.0, CELL_PX / width)
        if shown_height > SCREEN_PX - BARS_PX:
            tall.append((name, round(shown_height)))
    assert not small, small
    assert not tall, tall


def test_no_text_of_a_prediction_picture_overlaps_another_text_a_legend_or_a_colour_bar():
    """Every prediction's picture after its step, as the widget shows it: no text of its frame
    (titles, tick labels, the colour bar's "evicted next" / "evicted last", the legend's rows)
    overlaps another one or a key, and it is drawn large enough to read at 1280 px."""
    from pagedkv.viz.questions import all_questions

    bad, small = {}, {}
    for qid, data in all_questions()["predict"].items():
        widget = PredictStep(qid)
        widget.answer(data.answer)
        heatmap = widget._heatmap  # noqa: SLF001
        if heatmap._frame.cut_texts:  # noqa: SLF001
            bad[qid] = heatmap._frame.cut_texts  # noqa: SLF001
        if heatmap.min_font_px * min(1.0, CELL_PX / heatmap.size[0]) < MIN_PX:
            small[qid] = heatmap.min_font_px
    assert not bad, bad
    assert not small, small


def test_the_collision_check_sees_a_legend_row_over_a_colour_bar_label():
    """The LRU key of a short grid squeezed beside another panel: its legend ("#1: next
    victim") ran into the colour bar's "evicted last"; the frame's check reports both."""
    from pagedkv.viz.frame import build_frame

    cut = build_frame(12, 4, ("state", "lru"), 110, 5.5).cut_texts
    assert any("evicted last" in text for text in cut), cut
    assert any(text.startswith(("#1:", "FREE:", "ACTIVE")) for text in cut), cut  # a legend row


@pytest.mark.parametrize("num_pages", [12, 16, 40])
def test_an_lru_panel_with_another_panel_is_stacked_full_width_with_no_text_overlapping(num_pages):
    from pagedkv.viz import PoolHeatmap

    heatmap = PoolHeatmap(num_pages, 4, views=("state", "lru"))
    assert heatmap._frame.cut_texts == ()  # noqa: SLF001
    assert heatmap.cell_box("lru", 0)[1] > heatmap.cell_box("state", num_pages - 1)[3]  # below


NOTEBOOK_FIGURE_PX = 480  # a figure this tall, shown in a 600 px notebook view, fits with its title


def test_notebook_03_section_4_figures_fit_a_notebook_view_with_their_titles():
    """Notebook 03's pool after doc_D's step, drawn as the notebook draws it: the owner
    figure and the LRU figure, one after the other, each at most `NOTEBOOK_FIGURE_PX` tall
    as shown at `CELL_PX`, with text of at least 12 px (the two stacked in one picture were
    about 570 px: title and legend could not be seen together)."""
    run = ScenarioRun("eviction")
    while run.next_action.seq_id != "doc_C":
        run.step()
    run.step()
    run.step()
    snap = run.seqs.snapshot()
    for heatmap in (plot_pool(snap, views=("owner",)), plot_lru(snap, run.events)):
        width, height = heatmap.size
        scale = min(1.0, CELL_PX / width)
        assert height * scale <= NOTEBOOK_FIGURE_PX, (heatmap.views, height * scale)
        assert heatmap.min_font_px * scale >= MIN_PX


def test_two_views_stacked_label_their_cells_as_large_as_one_view_alone():
    """Notebook 03 drew the owner and ref count views side by side: at 1280x720 a learner read
    their page ids and counts as small (~9 px digits). `columns=1` stacks them, each full width,
    so the cell labels are as large as in a view drawn alone, as on the dashboard."""
    run = ScenarioRun("prefix")
    for _ in range(6):
        run.step()
    snap = run.seqs.snapshot()
    views = ("owner", "ref_count")
    beside, stacked, alone = (
        plot_pool(snap, views),
        plot_pool(snap, views, columns=1),
        plot_pool(snap, views[:1]),
    )
    label = {name: h._frame.label_px * min(1.0, CELL_PX / h.size[0]) for name, h in  # noqa: SLF001
             (("beside", beside), ("stacked", stacked), ("alone", alone))}  # fmt: skip
    assert label["stacked"] == label["alone"] >= 1.3 * label["beside"], label
    assert stacked.size[0] == alone.size[0] and stacked.min_font_px * CELL_PX / stacked.size[0] >= MIN_PX


def test_every_scenarios_lru_tab_keeps_its_key_whole():
    """The dashboard's LRU order tab, for every scenario's pool size: once a page is CACHED its
    key (the eviction-order bar, "#1: next victim", FREE, ACTIVE) has no label cut or run into
    another. A fourth key line once pushed "#1" onto "evicted last" at 24 pages."""
    from pagedkv.scenarios import ScenarioRun
    from pagedkv.scenarios.library import SCENARIOS
    from pagedkv.viz.dashboard import HEATMAP_DPI
    from pagedkv.viz.heatmap import PoolHeatmap
    from pagedkv.viz.palette import SequencePalette

    cut = {}
    for name in SCENARIOS:
        run = ScenarioRun(name)
        heatmap = PoolHeatmap(
            run.num_pages, run.page_size, views=("lru",), palette=SequencePalette(), dpi=HEATMAP_DPI
        )
        while run.can_step and not (run.snapshots[-1].lru_rank >= 0).any():
            run.step()
        heatmap.update(run.snapshots[-1], run.events)
        if heatmap._frame.cut_texts:  # noqa: SLF001
            cut[name, run.num_pages] = heatmap._frame.cut_texts  # noqa: SLF001
    assert not cut, cut
