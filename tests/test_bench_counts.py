"""Exact counts the benchmarks notebook prints: pages read and bytes copied by a paged decode
step, page allocations per page size, and the scale figure's running mean."""

import numpy as np

from pagedkv.bench import page_size
from pagedkv.bench.scale import smooth
from pagedkv.labs import attention_traffic


def test_traffic_counts_every_page_once_and_copies_every_byte():
    t = attention_traffic.count(3, 40)  # 3 pages of 16 per sequence, the last one partly full
    # oracle: K and V pages of each context, and the K/V bytes of the whole pages copied
    assert t["page_reads"] == 2 * 3 * 3
    assert t["kv_bytes"] == 2 * 3 * 40 * 4 * 64 * 4
    assert t["bytes_copied"] == 2 * 3 * 3 * 16 * 4 * 64 * 4


def test_token_bytes_multiplies_out_and_matches_the_count():
    assert attention_traffic.token_bytes(4, 64, 4, 1) == (
        2048,  # 2 * 4 * 64 * 4, by hand
        "2 (K and V) × 4 K/V heads × 64 numbers × 4 bytes × 1 layer = 2,048 B",
    )
    t = attention_traffic.count(2, 32)
    assert t["layers"] == 1 and t["kv_bytes_per_token"] == 2048
    # OPT-13B: 40 layers of 40 heads of 128 float16 numbers, 800 KiB (the vLLM paper's figure)
    total, text = attention_traffic.token_bytes(40, 128, 2, 40)
    assert total == 800 * 1024 and text.endswith("× 40 layers = 819,200 B")


def test_allocations_shrink_with_the_page_size():
    report = page_size.run(requests=8, page_sizes="4,16", capacities="8192")
    small, large = report.data["points"]
    assert small["allocations"] > large["allocations"] > 0
    for p in report.data["points"]:
        assert 0 <= p["empty_slots_per_running"] < p["page_size"]
        assert p["active_slots_per_running"] > p["empty_slots_per_running"]


def test_smooth_is_a_running_mean():
    values = np.array([0.0, 2.0, 4.0, 6.0])
    want = [np.mean(values[max(0, i - 1) : i + 1]) for i in range(4)]  # window 2, by hand
    assert np.allclose(smooth(values, 2), want)


def test_projector_relayout_keeps_grown_labels_inside_the_figure():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from pagedkv.viz import projector

    fig = Figure(figsize=(10, 3))  # widened little, so the grown text needs new margins
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.plot([0, 1], label="a long legend entry, written small")
    legend = ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)  # outside, right
    fig.tight_layout()  # laid out once, for the small fonts
    projector(fig, min_pt=16, relayout=True)
    fig.canvas.draw()
    box = legend.get_window_extent()
    assert box.x1 <= fig.bbox.width  # oracle: the figure's own pixel width


def test_scale_figure_draws_the_running_mean_only_over_full_windows():
    from pagedkv.bench import Report, scale

    active = [10, 20, 30, 40] * 10  # 40 steps of a 100-page pool
    data = {"running": [1] * 40, "active_pages": active, "num_pages": 100, "requests": 1}
    fig = scale.figure(Report("scale", [], [], data=data))
    (line,) = fig.axes[1].get_lines()
    window = scale.SMOOTH_STEPS
    assert list(line.get_xdata()) == list(range(window - 1, 40))
    # each point: the mean of the last `window` steps, by hand
    want = [sum(active[i - window + 1 : i + 1]) / window for i in range(window - 1, 40)]
    assert np.allclose(line.get_ydata(), want)


def test_count_gives_the_tiles_the_paged_step_copies_and_multiplies():
    # one page of keys: 16 tokens x 4 K/V heads x 64 numbers x 4 bytes = 16 KiB; a tile holds
    # CHUNK_BYTES (512 KiB) of keys = 32 pages
    long, short = attention_traffic.count(8, 1024), attention_traffic.count(8, 256)
    assert long["tile"] == (1, 32) and long["tiles"] == 8 * 2  # 64 pages a sequence: 2 tiles each
    assert short["tile"] == (2, 16) and short["tiles"] == 8 // 2  # 16 pages: 2 sequences a tile
    for t in (long, short):  # every K page and V page is read in exactly one tile of each pass
        assert 2 * t["tiles"] * t["tile"][0] * t["tile"][1] == t["page_reads"]
