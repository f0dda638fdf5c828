"""Notebook 09, section 4c: the chat stream with retries and the sweep over both pools."""

from pagedkv.labs.retry_sweep import SweepPoint, chat_with_retries, retry_sweep, sweep_table
from pagedkv.viz.projector import min_font_pt
from pagedkv.viz.retry_sweep import plot_retry_sweep


def test_every_prompt_ends_on_a_page_boundary():
    assert all(len(r.prompt_token_ids) % 16 == 0 for r in chat_with_retries(0.5))


def test_streams_nest_as_the_rate_grows():
    base, some, every = (chat_with_retries(rate) for rate in (0, 0.3, 1.0))
    kept = [r for r in some if not r.req_id.endswith("-first")]
    assert kept == base and len(base) == 120  # the conversations do not depend on the rate
    retried = {r.req_id for r in some if r.req_id.endswith("-first")}
    assert retried <= {r.req_id for r in every} and len(every) == 240
    first = next(r for r in every if r.req_id.endswith("-first"))
    again = next(r for r in every if r.req_id == first.req_id.removesuffix("-first"))
    assert first.prompt_token_ids == again.prompt_token_ids  # a retry: the same prompt


def test_no_retry_no_difference_and_retries_favour_the_hash_chain():
    points = retry_sweep([0, 0.5], [16384])
    assert points[0].extra_hits == 0 and points[1].extra_hits > 0
    assert points[1].hash_evictions == points[1].radix_evictions == 0  # room for everything


def test_the_figure_is_readable_on_a_projector():
    assert min_font_pt(plot_retry_sweep(retry_sweep([0, 1.0], [1024]))) >= 13


def test_curve_falls_by_hand():
    """Notebook 09b, section 2: the rates after which a curve of the figure falls, on points made
    by hand (gain = extra hits / radix hits; extra evictions = hash - radix), for one cache."""
    import pytest

    from pagedkv.labs.retry_sweep import SweepPoint, curve_drops, curve_falls

    points = [  # (rate, cache, hash hits, radix hits, hash evictions, radix evictions), shuffled
        SweepPoint(0.5, 64, 110, 100, 9, 5),  # gain 10%, 4 extra evictions
        SweepPoint(0.0, 64, 100, 100, 5, 5),  # 0%, 0
        SweepPoint(0.2, 64, 120, 100, 8, 2),  # 20%, 6
        SweepPoint(1.0, 64, 130, 100, 9, 1),  # 30%, 8
        SweepPoint(0.2, 16, 90, 100, 0, 0),  # another cache: left out
    ]
    assert curve_falls(points, 64, "gain") == [0.2]  # 20% -> 10%
    assert curve_falls(points, 64, "extra_evictions") == [0.2]  # 6 -> 4
    assert curve_drops(points, 64, "extra_evictions") == [(0.2, 6, 4)]  # the values it falls between
    assert curve_falls(points, 16, "gain") == []  # one point: nothing falls
    assert points[4].gain == -0.1 and points[1].extra_evictions == 0
    with pytest.raises(ValueError, match="'gain' or 'extra_evictions'"):
        curve_falls(points, 64, "hits")
    with pytest.raises(ValueError, match="'gain' or 'extra_evictions'"):
        curve_drops(points, 64, "hits")


def test_orphan_evictions_agree_with_orphan_pages():
    """Each victim counted as an orphan is one `orphan_pages` lists just before the eviction."""
    import pagedkv.labs.retry_sweep as sweep_module
    from pagedkv.labs.radix_vs_hash import orphan_pages

    stream = chat_with_retries(1.0)[:80]
    seen = []
    serve = sweep_module.serve_one_at_a_time

    def checking_serve(seqs, requests):
        pool, pop = seqs.pool, seqs.pool.eviction.pop_victims

        def check(n):
            orphans = set(orphan_pages(pool))
            seen.extend(page in orphans for page in pool.eviction.order()[:n])
            return pop(n)

        pool.eviction.pop_victims = check
        serve(seqs, requests)

    sweep_module.serve_one_at_a_time = checking_serve
    try:
        count = sweep_module.orphan_evictions(stream, 1024)
    finally:
        sweep_module.serve_one_at_a_time = serve
    assert count == sum(seen) > 0 and len(seen) > count


def test_sweep_splits_extra_evictions():
    points = retry_sweep([0.0, 1.0], cache_sizes=[1024])
    assert [p.orphan_evictions for p in points][0] == 0
    # every turn retried: some extra evictions are orphans, and not all of them (09, 4c)
    assert 0 < points[1].orphan_evictions < points[1].extra_evictions


def test_sweep_table_has_a_row_per_rate_and_a_column_group_per_cache():
    points = [SweepPoint(rate, size, 110, 100, 7, 5, 1) for size in (1024, 4096) for rate in (0, 0.5)]
    lines = sweep_table(points).splitlines()
    assert "64 pages" in lines[0] and "256 pages" in lines[0] and len(lines) == 4
    assert lines[3].split() == ["50%", "|", "10.00", "2", "1", "|", "10.00", "2", "1"]


def test_the_seed_figure_has_a_column_per_cache_and_reads_on_a_projector():
    from pagedkv.viz.retry_sweep import plot_seed_sweeps

    sweeps = {seed: retry_sweep([0, 1.0], [1024, 16384], seed=seed) for seed in (0, 1)}
    fig = plot_seed_sweeps(sweeps)
    assert len(fig.axes) == 4 and min_font_pt(fig) >= 13  # 2 rows x 2 caches
    top = fig.axes[0]
    assert [line.get_label() for line in top.get_lines()][:2] == ["seed 0", "seed 1"]
    assert all(ax.get_legend() is None for ax in fig.axes) and len(fig.legends) == 1  # one key above all
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["seed 0", "seed 1"]
    assert fig.get_size_inches()[1] * fig.dpi <= 720  # on one projector screen
    bottom = fig.axes[2]  # extra evictions (solid) and orphans (dashed), a pair per seed
    styles = [line.get_linestyle() for line in bottom.get_lines() if line.get_label() != "_nolegend_"]
    assert styles.count("--") == 2
