"""`s3fifo_timeline` against the pool's own counts (evictions, CACHED pages) and a stream
worked by hand; `plot_timeline` fits 850 px with text of at least 12 px."""

from __future__ import annotations

from matplotlib.text import Text

from pagedkv.labs.hit_rate_lab import replay
from pagedkv.labs.lab_workloads import LabRequest, lab_workload
from pagedkv.labs.s3fifo_timeline import plot_timeline, s3fifo_timeline


def test_victims_add_up_to_the_pools_evictions():
    scan = lab_workload("scan")[:80]
    rows = s3fifo_timeline(scan, 2048)
    assert len(rows) == len(scan)
    assert sum(r["from S"] + r["from M"] for r in rows) == replay(scan, 2048, "s3fifo").evictions
    assert all(r["S"] + r["M"] == r["cached"] for r in rows)
    assert all(r["from S"] == 24 and r["from M"] == 0 for r in rows[44:48])  # a burst leaves S


def test_a_stream_worked_by_hand():
    # A pool of 4 pages of 2 tokens. "a" caches 2 prompt pages and 1 full output page, all
    # in S. "b" revives a's first page (a prefix hit), then needs 2 pages of its own: the
    # FREE one and one victim, S's head [3, 4] (count 0). b's last page holds 1 token: FREE.
    a = LabRequest("zipf0-p0", [1, 2, 3, 4], [5, 6])
    b = LabRequest("zipf1-p0", [1, 2, 9, 9], [7])
    rows = s3fifo_timeline([a, b], 8, page_size=2)
    assert rows[0] == {"source": "zipf", "S": 3, "M": 0, "G": 0, "from S": 0, "from M": 0, "cached": 3}
    assert (rows[1]["from S"], rows[1]["from M"]) == (1, 0)
    assert rows[1]["from S"] == replay([a, b], 8, "s3fifo", page_size=2).evictions


def test_figure_fits_and_its_text_is_readable():
    rows = s3fifo_timeline(lab_workload("scan")[:80], 2048)
    fig = plot_timeline(rows, 44, 79, 12.8)
    width, height = fig.get_size_inches() * fig.dpi
    scale = min(1.0, 850 / width)
    assert height * scale <= 460  # two panels and the title fit a 600 px viewport
    fig.canvas.draw()
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text()]
    sizes = [t.get_fontsize() * fig.dpi / 72 * scale for t in texts]
    assert sizes and min(sizes) >= 12


def test_the_mark_points_at_that_requests_m_size():
    from matplotlib.text import Annotation

    rows = s3fifo_timeline(lab_workload("scan")[:80], 2048)
    fig = plot_timeline(rows, 44, 79, 12.8, mark=(47, "request 47"))
    notes = [t for t in fig.findobj(Annotation) if t.get_text() == "request 47"]
    assert len(notes) == 1 and notes[0].xy == (47, rows[47]["M"])
    assert rows[47]["M"] - rows[46]["M"] == 6  # the 6 pages the notebook's note names


def test_both_panels_label_their_requests():
    rows = s3fifo_timeline(lab_workload("scan")[:80], 2048)
    fig = plot_timeline(rows, 44, 79, 12.8)
    fig.canvas.draw()
    for ax in fig.axes:  # the top panel shares the bottom's x axis, yet shows its numbers too
        shown = [t.get_text() for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
        assert "45" in shown and "75" in shown


def test_plot_timeline_queues_use_no_policy_lines_colour():
    from matplotlib.colors import to_hex

    from pagedkv.bench.eviction import COLORS

    rows = s3fifo_timeline(lab_workload("scan")[:80], 2048)
    fig = plot_timeline(rows, 44, 79, 12.8)
    top, low = fig.axes[:2]
    used = {to_hex(line.get_color()) for line in top.get_lines()[:3]}
    used |= {to_hex(bar.get_facecolor()) for bar in low.patches}
    assert not used & {to_hex(c) for c in COLORS.values()}


def test_the_papers_ghost_bound_keeps_more_hashes_than_pagedkvs():
    """Worked by hand on a pool of 10 pages (paper bound: 9 hashes): pages 1 and 2 revived
    and promoted to M, then 3..10 one-off; draining S leaves pagedkv's G with M's 2 hashes,
    the paper's with every hash S evicted while S held at least its share (1 page)."""
    from pagedkv.labs.eviction_policies import S3FIFOEvictionPolicy

    kept = {}
    for share in (None, 0.9):
        policy = S3FIFOEvictionPolicy(share)
        policy.attach(10, lambda page_id: f"block {page_id}")
        policy.add_all([1, 2])
        policy.remove(1)
        policy.remove(2)
        policy.add_all([2, 1])
        policy.add_all(list(range(3, 11)))
        for _ in range(8):  # 1 and 2 move to M; 3..10 leave S
            policy.pop_victim()
        kept[share] = policy.queues()["G"]
    assert kept[None] == ["block 9", "block 10"]
    assert kept[0.9] == [f"block {n}" for n in range(3, 11)]


def test_ghost_bound_rates_replays_both_bounds():
    from pagedkv.labs.s3fifo_timeline import ghost_bound_rates

    scan = lab_workload("scan")[:80]
    rates = ghost_bound_rates({"scan": scan}, 2048)
    assert set(rates["scan"]) == {"pagedkv", "paper"}
    assert all(0 <= r <= 1 for r in rates["scan"].values())


def test_paper_ghost_seeds_is_the_papers_bound_on_each_seed():
    from pagedkv.labs.s3fifo_timeline import ghost_bound_rates, paper_ghost_seeds

    rates = paper_ghost_seeds("rag", 1024, seeds=(0, 1))
    assert len(rates) == 2 and all(r == round(r, 1) for r in rates)
    seed0 = ghost_bound_rates({"rag": lab_workload("rag")}, 1024)["rag"]["paper"]
    assert rates[0] == round(100 * seed0, 1)
