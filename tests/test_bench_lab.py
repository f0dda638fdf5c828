"""bench eviction and bench radix: quick runs through the command line, checked for the
properties their tables claim."""

from __future__ import annotations

import pytest

from pagedkv.bench import eviction

from .test_bench import bench


@pytest.mark.slow
def test_bench_eviction_quick(tmp_path, capsys):
    report = bench(tmp_path, capsys, "eviction", "--cache-tokens", "2048")
    data = report["data"]
    assert data["sizes"] == [1024, 2048, 4096]
    table, curves = data["table"], data["curves"]
    assert set(table) == {"chat", "zipf", "rag", "scan"}
    for workload, by_policy in curves.items():
        assert set(by_policy) == {"lru", "leaf-lru", "fifo", "lfu", "arc", "s3fifo", "lru+pin"}
        assert by_policy["leaf-lru"] == by_policy["lru"]  # tail-first release makes LRU leaf-first
        lru = by_policy["lru"]
        assert lru == sorted(lru), workload  # LRU's hit rate never falls as the cache grows
        assert all(0 <= r <= 1 for rates in by_policy.values() for r in rates)
    assert table["scan"]["s3fifo"] > table["scan"]["lru"] + 0.05  # the scan pollutes LRU
    assert any(line.startswith("scan: LRU loses") for line in report["notes"])


def test_bench_eviction_is_seeded():
    one = eviction.run(quick=True, seed=4, workloads="scan", policies="lru,arc")
    two = eviction.run(quick=True, seed=4, workloads="scan", policies="lru,arc")
    assert one.rows == two.rows and one.data == two.data


def test_bench_radix_quick(tmp_path, capsys):
    report = bench(tmp_path, capsys, "radix", "--workload", "zipf", "--cache-tokens", "1024")
    results = report["data"]["results"]
    hashed, radix, sglang = results["hash"], results["radix"], results["sglang"]
    assert [row["index"] for row in report["rows"]] == ["hash", "radix", "sglang"]
    assert hashed["evictions"] > 0  # the cache is under pressure
    assert radix["hit_tokens"] == hashed["hit_tokens"] and radix["evictions"] == hashed["evictions"]
    assert hashed["entries"] == hashed["cached_pages"]  # one block hash per cached page
    assert radix["entries"] < radix["cached_pages"] == hashed["cached_pages"]  # runs of pages per node
    assert sglang["query_tokens"] == hashed["query_tokens"]


def test_bench_bad_input_names_the_argument():
    import pytest

    from pagedkv.bench import radix

    with pytest.raises(ValueError, match=r"cache_tokens must be at least one page \(16 tokens\), got 8"):
        eviction.run(quick=True, cache_tokens=8, workloads="zipf")
    with pytest.raises(ValueError, match=r"cache_tokens=64 \(4 pages of 16\) cannot hold the longest"):
        radix.run(quick=True, cache_tokens=64)
    with pytest.raises(ValueError, match=r"eviction_policy must be one of .* got 'belady'"):
        eviction.run(quick=True, policies="lru,belady", workloads="zipf")
    with pytest.raises(ValueError, match="workload must be one of"):
        eviction.run(quick=True, workloads="video")


def test_bench_eviction_with_lru_alone_says_there_is_nothing_to_compare(tmp_path, capsys):
    # `--policies lru` once crashed in the verdict (max() of no other policy).
    report = bench(tmp_path, capsys, "eviction", "--policies", "lru", "--workloads", "zipf")
    assert [row["policy"] for row in report["rows"]] == ["lru"]
    rate = report["data"]["table"]["zipf"]["lru"]
    assert report["notes"][-1] == f"zipf: LRU {100 * rate:.1f}%; no other policy ran to compare it with"


def test_bench_eviction_compares_lru_with_policies_that_are_not_lru():
    """leaf-lru is LRU number for number on chat, so the chat line names lru+pin, the best
    policy that is not LRU, and the notes say leaf-lru is left out."""
    report = eviction.run(sizes="2048", workloads="chat", policies="lru,leaf-lru,lru+pin")
    table = report.data["table"]["chat"]
    assert table["leaf-lru"] == table["lru"] > table["lru+pin"]
    assert any("every other policy but leaf-lru, which is LRU itself" in note for note in report.notes)
    assert report.notes[-1] == (
        f"chat: LRU {table['lru']:.1%}, better than every other policy "
        f"(the next best: lru+pin {table['lru+pin']:.1%})"
    )


def test_bench_radix_figure_labels_do_not_overlap():
    """In the index-entries panel, an index with as many entries as pages (the hash chain:
    127 and 127 on the chat stream) draws its two counts apart, not touching."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from pagedkv.bench import radix as radix_bench

    fig = radix_bench.run(workload="chat", cache_tokens=2048).figure()
    canvas = FigureCanvasAgg(fig)
    renderer = canvas.get_renderer()
    ax = fig.axes[2]
    boxes = [t.get_window_extent(renderer) for t in ax.texts if t.get_text()]
    assert len(boxes) == 6  # entries and pages held, for each of the 3 indexes
    for i, one in enumerate(boxes):
        for other in boxes[i + 1 :]:
            assert not one.overlaps(other)
