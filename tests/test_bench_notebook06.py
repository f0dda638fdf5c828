"""What notebook 06 reads from the benchmarks: page_size.check_fits, the describe line,
memory's buddy-allocator variant, and the paper's bands in the sharing figure."""

from pathlib import Path

import pytest

from pagedkv.bench import Report, attention, memory, page_size, sharing
from pagedkv.labs.contiguous import ContiguousKVCache
from pagedkv.labs.workloads import Request, generate


def _request(i: int, prompt: int, output: int) -> Request:
    return Request(f"r{i}", list(range(prompt)), output)


def test_check_fits_names_the_first_request_that_cannot_fit():
    # longest: 10 + 7 - 1 = 16 tokens, 40 + 9 - 1 = 48, 30 + 1 - 1 = 30 (counted by hand)
    trace = [_request(0, 10, 7), _request(1, 40, 9), _request(2, 30, 1)]
    page_size.check_fits(trace, 48, 16)  # 3 pages of 16 hold 48 tokens
    page_size.check_fits(trace, 63, 16)  # rounded down to the same 3 pages
    with pytest.raises(page_size.PoolTooSmallError) as err:
        page_size.check_fits(trace, 47, 16)  # 2 pages = 32 slots: r1 (48) and r2 (30 fits)
    assert isinstance(err.value, ValueError) and err.value.need_slots == 48  # 3 pages of 16
    message = str(err.value)
    assert "request 'r1', the first that cannot fit, grows to 48 tokens" in message
    assert "2 pages x 16 = 32 slots (47 slots rounded down" in message
    assert "slots must be at least 48" in message
    with pytest.raises(ValueError, match="request 'r0'"):
        page_size.check_fits(trace, 15, 4)  # 3 pages of 4: r0's 16 tokens need 4


def test_one_run_refuses_a_pool_smaller_than_the_longest_request_before_running():
    # the notebook's 40 requests: the longest grows to 1,673 tokens = 105 pages of 16
    with pytest.raises(ValueError, match="'sharegpt-39', the first that cannot fit"):
        page_size.one_run(16, slots=1679)
    with pytest.raises(ValueError, match="'sharegpt-1', the first"):
        page_size.one_run(16, slots=1000)


def test_try_page_size_prints_one_message_instead_of_raising(capsys):
    # the notebook's 40 requests: the longest, sharegpt-39, grows to 650 + 1024 - 1 = 1,673 tokens (read
    # off the trace by hand): 105 pages of 16 = 1,680 slots, 7 pages of 256 = 1,792
    for page, slots, pool, need in [
        (16, 1000, "62 pages of 16 = 992", "1,680"),
        (256, 1700, "6 pages of 256 = 1,536", "1,792"),
    ]:
        assert page_size.try_page_size(page, slots) is None
        out = capsys.readouterr().out
        assert out.startswith(f"cannot run: page = {page}, slots = {slots}.\n")
        # one plain reason: the pool's whole pages against the longest request; no request named
        said = " ".join(out.split())
        assert f"The pool holds {pool} token slots, but the longest request grows to 1,673 tokens" in said
        assert "sharegpt-" not in out
        assert out.endswith(f"Try slots = {need} or more, then run the cell again.\n")
        assert "Traceback" not in out
    for page, slots, why in [(0, 8192, "page_size must be in [1, 1024], got 0"), (16.0, 8192, "an int")]:
        assert page_size.try_page_size(page, slots) is None  # type: ignore[arg-type]
        out = capsys.readouterr().out
        assert why in out and "Try a whole number of tokens per page from 1 to 1,024" in out
    with pytest.raises(page_size.PoolTooSmallError):  # the raising function, for code
        page_size.one_run(16, 1000)


def test_try_page_size_runs_what_one_run_runs(capsys):
    point = page_size.try_page_size(64, 4096)
    assert point is not None
    expected = page_size.one_run(64, 4096)
    for key in ("allocations", "preemptions", "first_lookups", "steps", "tokens"):
        assert point[key] == expected[key]
    assert capsys.readouterr().out == page_size.describe(expected) + "\n"


def test_describe_gives_the_tokens_looked_up_next_to_the_share():
    # first admissions and re-admissions together: the sweep's prefix hit rate
    point = page_size.one_run(256, slots=4096, requests=40)
    (first, first_hit), (again, again_hit) = point["first_lookups"], point["readmission_lookups"]
    assert first_hit == 0 < again_hit  # pages of 256 share no part of the 200-token system prompt
    line = f"  {again_hit:,} of {first + again:,} tokens looked up = {again_hit / (first + again):.1%}"
    text = page_size.describe(point)
    assert line in text.splitlines() and "prefix hits (first admissions and re-admissions):" in text
    assert max(len(row) for row in text.splitlines()) <= 90  # fits 1280 px with the file browser
    assert f"= {point['prefix_hit_rate_pct']:.1f}%" in page_size.describe(point)


def test_simulate_contiguous_passes_the_allocator_to_the_arena():
    trace = generate("sharegpt", 40)
    slots = 8192
    first_fit = memory.simulate_contiguous(trace, slots, "oracle", 2048, 256)
    buddy = memory.simulate_contiguous(trace, slots, "oracle", 2048, 256, allocator="buddy")
    # an oracle range is its final length; the buddy allocator rounds it to a power of two,
    # so fewer requests fit and no more slots hold tokens
    assert buddy["mean_batch"] <= first_fit["mean_batch"]
    assert buddy["token_states"] < first_fit["token_states"]
    assert ContiguousKVCache(slots, "oracle", allocator="buddy").allocator == "buddy"


def test_sharing_figure_marks_the_papers_savings_at_widths_2_and_6_only():
    data = {
        "parallel sampling": {2: {"saving_pct": 6.0}, 4: {"saving_pct": 9.0}},
        "beam search": {2: {"saving_pct": 40.0}, 4: {"saving_pct": 60.0}},
    }
    fig = sharing.figure(Report("bench sharing: 2 alpaca-like requests", [], [], data=data))
    (ax,) = fig.axes
    assert ax.get_legend() is None  # the legend is the figure's, below the axes
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "parallel sampling, paper's text range, placed at n = 2 and 6" in labels
    assert "beam search, paper's text range, placed at k = 2 and 6" in labels
    # the two modes' dashes differ in style, so each legend entry names its own
    styles = [h.get_linestyle() for h in fig.legends[0].legend_handles if h.get_label().find("paper") > 0]
    assert len(styles) == 2 and styles[0] != styles[1]
    # one black mark per mode at width 2 (the data has no width 6), at the paper's low end,
    # a line across its own bar, both modes alike; none at width 4, where the paper gives no number
    lines = ax.get_lines()
    marks = sorted((min(ln.get_xdata()), max(ln.get_xdata()), ln.get_ydata()[0]) for ln in lines)
    bars = sorted((patch.get_x(), patch.get_x() + patch.get_width()) for patch in ax.patches)
    assert [y for *_, y in marks] == [6.1, 37.6]
    (p_lo, p_hi, _), (b_lo, b_hi, _) = marks
    # bars[0..1]: parallel's (widths 2, 4); bars[2..3]: beam's; sorted by x: p2, b2, p4, b4
    (p2_lo, p2_hi), (b2_lo, b2_hi), (p4_lo, _), _ = bars
    assert p_lo < p2_lo < p2_hi < p_hi < b_lo < b2_lo < b2_hi < b_hi < p4_lo  # across its own bar
    assert p2_lo - p_lo < 0.05 and p_hi - p2_hi < 0.05  # just past its bar's edges
    # each mark has its own number right of its bar; each bar's value sits above its mark
    texts = {t.get_text(): t for t in ax.texts}
    assert {"6.1", "37.6", "6.0", "40.0"} <= set(texts)
    assert p_hi < texts["6.1"].get_position()[0] < b_lo and texts["37.6"].get_position()[0] > b_hi
    assert texts["6.0"].xy[1] >= 6.1 and texts["40.0"].xy[1] >= 40.0  # anchored on bar or mark
    assert ax.get_ylim()[1] >= 60.0 * 1.2  # room above the tallest bar's label
    no_workload = sharing.figure(Report("some title", [], [], data=data))
    assert not any("paper" in t.get_text() for t in no_workload.legends[0].get_texts())
    # below the axes: the legend's top is under the axes' bottom, so it covers no band
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    assert fig.legends[0].get_window_extent(renderer).y1 < ax.get_window_extent(renderer).y0
    # each bar's value clears its mark's line by a few pixels, at any font size (offset in points)
    for value, mark in (("6.0", 6.1), ("40.0", 37.6)):
        line_px = ax.transData.transform((0, mark))[1]
        assert texts[value].get_window_extent(renderer).y0 > line_px + 3


def test_attention_figure_names_the_quick_run_in_its_title_and_leaves_the_paper_to_the_caption():
    points = [{"batch": 2, "context": 16, "ratio": 2.0}]
    fig = attention.figure(Report("attention", [], [], data={"points": points, "quick": True}))
    (legend,) = fig.legends
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels == [
        "yours (quick, noisy)",
        "range of one full run's points: 1.32-3.07x",
        "1.0: same time as dense",
    ]
    # the paper's GPU kernel: neither drawn, nor in the legend or the title (the caption says it)
    assert "1.20" not in fig.axes[0].get_title()
    assert len(fig.axes[0].patches) == 2  # one bar and the grey band, no paper band
    assert "quick run" in fig.axes[0].get_title()
    full = attention.figure(Report("attention", [], [], data={"points": points}))
    assert full.legends[0].get_texts()[0].get_text() == "yours (this machine)"
    # below the axes: the title is read first, and the legend covers no bar
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    assert legend.get_window_extent(renderer).y1 < fig.axes[0].get_window_extent(renderer).y0


def test_attention_figure_cuts_a_tall_bar_at_4_and_writes_its_value():
    # ratios given by hand: 2.0 stays whole, 5.24 is cut at the axis's top (4) and labelled
    points = [{"batch": 2, "context": 16, "ratio": 2.0}, {"batch": 8, "context": 16, "ratio": 5.24}]
    fig = attention.figure(Report("attention", [], [], data={"points": points, "quick": True}))
    ax = fig.axes[0]
    assert ax.get_ylim()[1] == 4.0
    assert [round(bar.get_height(), 2) for bar in ax.containers[0]] == [2.0, 4.0]
    assert [t.get_text() for t in ax.texts] == ["2.0×", "5.2×"]  # every bar carries its value
    assert [t.get_color() for t in ax.texts] == ["black", "white"]  # above a short bar, inside a cut one
    assert ax.texts[0].get_position()[1] > 2.0 and ax.texts[1].get_position()[1] < 4.0
    # short bars: the axis ends a tenth above the band's top (3.07); the label sits above the bar
    short = attention.figure(Report("attention", [], [], data={"points": points[:1]}))
    assert short.axes[0].get_ylim()[1] == pytest.approx(3.07 * 1.1)
    assert [t.get_text() for t in short.axes[0].texts] == ["2.0×"]


def test_page_size_point_records_the_most_requests_running_at_once():
    # with room for every request (32,768 slots) all 40 run at once: the peak is the whole
    # queue, and no request is preempted; the mean is far lower because they finish one by one
    point = page_size.one_run(16, 32768)
    assert point["preemptions"] == 0
    assert point["max_batch"] == 40 and 1 <= point["max_batch_step"] <= point["steps"]
    assert point["mean_batch"] < point["max_batch"]
    # in a tiny pool (one request at a time fits) the peak can never exceed the pool's pages
    tiny = page_size.one_run(256, 2048, requests=5)
    assert 1 <= tiny["max_batch"] <= 2048 // 256


def test_queue_empty_step_and_last_few_against_a_hand_made_run():
    from pagedkv.bench import scale

    assert scale.queue_empty_step([3, 0, 1, 0, 0]) == 3  # waits again at step 2, then never
    assert scale.queue_empty_step([0, 0]) == 0 and scale.queue_empty_step([2, 1]) == 2
    data = {
        "waiting": [2, 1, 0, 0, 0, 0],
        "running": [5, 6, 6, 5, 3, 1],
        "active_pages": [9, 9, 60, 50, 30, 10],
    }
    few = scale.last_few(data, 3, 5)  # steps 3 and 4 (counted by hand): 5 and 3 running
    assert (few["first"], few["last"], few["running"], few["active_pages"]) == (3, 4, 4.0, 40.0)
    with pytest.raises(ValueError):
        scale.last_few(data, 7, 9)


def test_window_against_a_hand_made_run():
    """Section 5's lines starting `steps`: means and the peak queue, counted by hand."""
    from pagedkv.bench import scale

    data = {
        "waiting": [4, 2, 3, 5, 1, 0],
        "running": [2, 4, 4, 2, 6, 6],
        "active_pages": [4, 8, 20, 10, 30, 6],
    }
    w = scale.window(data, 1, 4)  # steps 1 to 3: 4, 4, 2 running on 8, 20, 10 pages
    assert w["running"] == 10 / 3 and w["pages_each"] == (38 / 3) / (10 / 3)
    assert (w["most_waiting"], w["most_waiting_step"]) == (5, 3)
    assert scale.window(data, 0, 2)["most_waiting_step"] == 0


def test_chain_speed_is_the_batch_ratio_times_the_inverse_bytes_ratio():
    from pagedkv.labs import costs, step_bytes
    from pagedkv.viz.throughput_chain import chain_figure

    weights, per_token = costs.weight_bytes("OPT-13B"), costs.bytes_per_token("OPT-13B")
    rows = {
        "oracle": {"token_states": 50.0, "mean_batch": 10.0},
        "paged": {"token_states": 100.0, "mean_batch": 30.0},
    }
    chain = step_bytes.chain(rows, 1000)
    oracle_bytes, paged_bytes = weights + 500 * per_token, weights + 1000 * per_token  # by hand
    assert chain["paged"]["step_bytes"] == paged_bytes and chain["oracle"]["speed"] == 1.0
    assert chain["paged"]["per_token"] == pytest.approx(paged_bytes / 30)
    assert chain["paged"]["speed"] == pytest.approx(3 * oracle_bytes / paged_bytes)
    fig = chain_figure(chain)
    texts = {t.get_text() for ax in fig.axes for t in ax.texts}
    assert {"50.0%", "100.0%", "10.0", "30.0", "1.0×"} <= texts


def test_sharing_and_attention_figures_fit_one_projector_screen():
    # notebook 06 shows both through projector(min_pt=16): 1,210 px wide, and the sharing
    # figure at most 500 px tall, the attention figure at most 600, legends included
    from pagedkv.viz import projector

    data = {
        "parallel sampling": {w: {"saving_pct": 5.0 + w} for w in (2, 4, 6)},
        "beam search": {w: {"saving_pct": 30.0 + 5 * w} for w in (2, 4, 6)},
    }
    points = [{"batch": b, "context": c, "ratio": 2.0} for b in (2, 8) for c in (256, 1024)]
    figures = [
        (projector(sharing.figure(Report("bench sharing: alpaca-like", [], [], data=data)), min_pt=16), 500),
        (
            projector(
                attention.figure(Report("attention", [], [], data={"points": points, "quick": True})),
                min_pt=16,
            ),
            600,
        ),
    ]
    for fig, most in figures:
        width, height = fig.get_size_inches() * fig.dpi
        assert round(width) == 1210 and height <= most
        fig.canvas.draw()
        box = fig.bbox
        (ax,) = fig.axes
        texts = [*ax.texts, ax.title, ax.xaxis.label, ax.yaxis.label, *fig.legends[0].get_texts()]
        for text in texts:  # every label and number drawn, each inside the figure
            if text.get_text().strip():
                ext = text.get_window_extent()
                assert box.x0 <= ext.x0 and ext.x1 <= box.x1 and box.y0 <= ext.y0 and ext.y1 <= box.y1


def test_memory_legend_names_the_kinds_as_the_notebook_table_heads_them():
    # notebook 06's table heads its columns "token states reserved internal external free";
    # the legend must use the same words, in the same order as the stacked bars
    shares = {"token_states": 50.0, "reserved": 20.0, "internal_fragmentation": 10.0,
              "external_fragmentation": 15.0, "free": 5.0, "mean_batch": 3.0}  # fmt: skip
    fig = memory.figure(Report("memory", [], [], data={"sharegpt": {"paged": shares}}))
    labels = [t.get_text() for t in fig.axes[-1].get_legend().get_texts()]
    assert labels == ["token states", "reserved", "internal", "external", "free"]


def test_the_try_it_reveal_box_sits_in_a_visible_widget_cell_of_its_own():
    """The box of settings 2 to 5 is not hidden inside a collapsed checks cell."""

    import nbformat

    path = Path(__file__).parents[1] / "notebooks" / "06_benchmarks.ipynb"
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and "reveal(" in c.source]
    assert len(cells) == 1
    cell = cells[0]
    assert not cell.metadata.get("jupyter", {}).get("source_hidden", False)
    assert "nbval-ignore-output" in cell.metadata.get("tags", [])
    assert "assert " not in cell.source


def test_the_try_it_reveal_needs_no_name_made_only_in_a_folded_cell():
    """Run cell by cell with every Optional fold skipped, the reveal box still has its runs."""
    import ast
    import builtins

    import nbformat

    from pagedkv.bench.notebooks import folded

    path = Path(__file__).parents[1] / "notebooks" / "06_benchmarks.ipynb"
    cells = nbformat.read(path, as_version=4).cells
    core = [c for c, hidden in zip(cells, folded(cells)) if not hidden and c.cell_type == "code"]
    at = next(i for i, c in enumerate(core) if "reveal(" in c.source)

    def made(source: str) -> set[str]:
        names = set()
        for node in ast.walk(ast.parse(source.replace("%matplotlib inline", ""))):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
        return names

    known = set(dir(builtins)) | {"display"}
    for cell in core[:at]:
        known |= made(cell.source)
    own = made(core[at].source)
    used = {n.id for n in ast.walk(ast.parse(core[at].source)) if isinstance(n, ast.Name)}
    assert "text" in own  # built in the reveal's own cell
    assert used <= known | own, used - known - own


def test_the_attention_bars_take_the_palettes_series_colour():
    """labs sits below viz, so attention_figure repeats palette.BENCH_SERIES_COLOR: the two agree."""
    from pagedkv.labs.attention_figure import BARS
    from pagedkv.viz.palette import (
        BENCH_ACTIVE_COLOR,
        BENCH_MODE_COLORS,
        BENCH_SERIES_COLOR,
        BENCH_SLOT_COLORS,
        BENCH_SYSTEM_COLORS,
    )

    assert BARS == BENCH_SERIES_COLOR
    # one colour, one meaning across notebook 06's figures: no colour in two of these groups
    groups = [set(BENCH_SLOT_COLORS), set(BENCH_MODE_COLORS.values()), {BENCH_SERIES_COLOR},
              {BENCH_ACTIVE_COLOR}, set(BENCH_SYSTEM_COLORS.values())]  # fmt: skip
    assert sum(map(len, groups)) == len(set().union(*groups))


def test_the_full_page_size_runs_prefix_hits_come_from_the_re_admissions():
    """Notebook 06, section 6: the full run (300 requests, 8,192 and 32,768 slots) hits 59-62 %
    at pages of 16 and 64; at pages of 16 its re-admissions hit more than its first admissions."""
    from pagedkv.bench import page_size

    rates = []
    for capacity in ("8192", "32768"):
        rates += page_size.run(requests=300, page_sizes="16,64", capacities=capacity).data["points"]
    assert [round(p["prefix_hit_rate_pct"]) for p in rates] == [61, 62, 60, 59]
    page_16 = rates[0]  # pages of 16 in 8,192 slots, as section 3's page-16 row
    assert page_16["readmission_hit_rate_pct"] > page_16["first_hit_rate_pct"]
    # section 6's table quotes this run's range
    path = Path(__file__).parents[1] / "notebooks" / "06_benchmarks.ipynb"
    assert "| 59–62 % (pages 1 to 64) |" in path.read_text()


def test_paged_memory_run_counts_the_steps_whose_first_waiting_request_lacks_pages():
    # the step budget holds the whole pool and max_num_seqs is never reached, so in every step a
    # request still waits, only pages hold the queue's first request back: it needs more than are free
    run = memory.simulate_paged(generate("sharegpt", 30), 4096, 16, 256, 2048)
    assert run["max_batch"] < 256 and run["loaded_steps"] > 0
    assert run["head_blocked_steps"] == run["loaded_steps"]
    # with room for every request at once, no step is counted at all
    roomy = memory.simulate_paged(generate("sharegpt", 5), 16_384, 16, 256, 2048)
    assert roomy["loaded_steps"] == roomy["head_blocked_steps"] == 0


def test_paged_memory_run_records_each_queued_step_as_its_shares_average_it():
    # one record per step the shares average: its batch, its K/V slots, the tokens it recomputed
    run = memory.simulate_paged(generate("sharegpt", 30), 4096, 16, 256, 2048)
    records = run["queued_steps"]
    assert len(records) == run["loaded_steps"] > 0
    assert abs(sum(b for b, _, _ in records) / len(records) - run["mean_batch"]) < 1e-9
    assert abs(sum(s for _, s, _ in records) / (len(records) * 4096) * 100 - run["token_states"]) < 1e-9
    assert sum(r for _, _, r in records) == run["recomputed_while_queued"] > 0
