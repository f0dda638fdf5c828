"""pagedkv.labs.serving_windows: notebook 11's two memory tables and its run at one rate."""

from __future__ import annotations

import pytest

from pagedkv.bench import recorded
from pagedkv.bench import serving as bench_serving
from pagedkv.labs import serving, serving_windows
from pagedkv.labs.workloads import generate


@pytest.fixture(scope="module")
def report():
    return recorded("serving")


def test_the_two_tables_hold_the_bench_tables_numbers(report):
    # oracle: the bench's own table (bench_serving._row), whose columns mix the two windows
    data, top, whole = report.data["systems"], report.data["top_rate"], report.data["arrival_rate"]
    loaded = serving_windows.under_load_rows(data, top)
    run = serving_windows.whole_run_rows(data, whole)
    for bench_row, load_row, run_row in zip(report.rows, loaded, run, strict=True):
        system, token4, token2, paper, ext4, ext_free2, batch4 = bench_row
        reserved = load_row[3]  # the rest of the 100 %: not in the bench's table
        at = data[system][str(top)]
        rest = (
            100
            - at["token_states"]
            - at["internal_fragmentation"]
            - at["external_fragmentation"]
            - at["free"]
        )
        assert reserved == pytest.approx(rest, abs=0.051)
        assert [load_row[i] for i in (0, 1, 2, 5, 7)] == [system, token4, paper, ext4, batch4]
        assert run_row[:2] == [system, token2]
        assert run_row[4] + run_row[5] == pytest.approx(ext_free2, abs=0.11)  # each rounded apart
    assert [row[5] for row in run] == [0.6, 1.6, 2.5, 29.9]  # free % at 2/s, as printed
    assert [row[6] for row in run] == [98.3, 96.5, 94.8, 16.7]  # % of the run requests waited
    assert [row[3] for row in loaded] == [12.6, 17.7, 22.7, 0.0]  # reserved % under load, as printed
    assert [row[4] for row in loaded] == [58.8, 8.9, 0.0, 1.7]  # internal % under load, as printed


def _percent_columns(columns):
    return [i for i, name in enumerate(columns) if name.endswith(" %") and name != "paper %"][:5]


def _check_rows_add_up(rows, columns, systems, rate, prefix):
    """Each row's five % columns are the run's five buckets, in CATEGORIES order, and add up to 100."""
    cols = _percent_columns(columns)
    assert [columns[i] for i in cols] == ["token %", "reserved %", "internal %", "external %", "free %"]
    for row in rows:
        at = systems[row[0]][str(float(rate))]
        shares = [row[i] for i in cols]
        assert shares == [round(at[prefix + c], 1) for c in serving.CATEGORIES]
        assert sum(shares) == pytest.approx(100.0, abs=0.26)  # five values, each rounded to 0.1


def test_each_row_of_both_tables_adds_up_to_100(report):
    # oracle: the run's own slot counts, summed over its five buckets (serving.CATEGORIES)
    data, top, whole = report.data["systems"], report.data["top_rate"], report.data["arrival_rate"]
    for system in serving.SYSTEMS:
        for key, prefix in ((str(top), ""), (str(whole), "run_")):
            assert sum(data[system][key][prefix + c] for c in serving.CATEGORIES) == pytest.approx(100.0)
    loaded = serving_windows.under_load_rows(data, top)
    _check_rows_add_up(loaded, serving_windows.UNDER_LOAD_COLUMNS, data, top, "")
    run = serving_windows.whole_run_rows(data, whole)
    _check_rows_add_up(run, serving_windows.WHOLE_RUN_COLUMNS, data, whole, "run_")
    fresh = serving_windows.shares_at(3.0, seed=1, requests=120)
    _check_rows_add_up(
        serving_windows.whole_run_rows(fresh, 3.0), serving_windows.WHOLE_RUN_COLUMNS, fresh, 3.0, "run_"
    )


def test_littles_law_matches_the_run_it_times():
    trace = generate("sharegpt", 150, 1)
    alone = serving.serve(trace, "paged", arrival_rate=2.0, seed=1)
    got = serving_windows.littles_law(alone, 2.0, requests=150)
    assert got["token_share"] == alone["run_token_states"]
    assert alone["busy_seconds"] <= alone["seconds"]  # the clock also counts the idle gaps
    # one request alone: it is in the system exactly while the steps run, from its arrival
    (one,) = generate("sharegpt", 1, 3)
    single = serving.serve([one], "paged", arrival_rate=2.0, seed=3)
    assert single["time_in_system"] == pytest.approx(single["busy_seconds"], rel=1e-12)
    assert got["in_flight"] == pytest.approx(2.0 * got["time_in_system"])
    assert got["slots"] == pytest.approx(got["in_flight"] * got["tokens_each"])
    # a request holds at most its final length, and at least nothing
    assert 0 < got["tokens_each"] <= max(r.final_len for r in generate("sharegpt", 150, 1))


def test_littles_law_gives_the_share_the_quick_run_measured(report):
    # a long run (1,000 requests at 2/s, notebook 11's): the start and the drain hardly count
    got = serving_windows.littles_law(report.data["systems"]["paged"]["2.0"], 2.0)
    measured = report.data["systems"]["paged"]["2.0"]["run_token_states"]
    assert got["token_share"] == pytest.approx(measured, rel=1e-9)
    assert got["share"] == pytest.approx(measured, rel=0.05)


def test_columns_name_their_rows():
    assert len(serving_windows.UNDER_LOAD_COLUMNS) == 8 and len(serving_windows.WHOLE_RUN_COLUMNS) == 7
    assert serving_windows.QUICK_REQUESTS == bench_serving.QUICK_REQUESTS


def test_a_run_at_one_rate_is_serve_at_that_rate_and_follows_littles_law():
    got = serving_windows.shares_at(1.0, seed=2, requests=200)
    trace = generate("sharegpt", 200, 2)
    alone = serving.serve(trace, "oracle", arrival_rate=1.0, seed=2)
    assert got["oracle"]["1.0"] == alone  # the worker processes compute what one call does
    for system in serving.SYSTEMS:
        run = got[system]["1.0"]
        assert sum(run[f"run_{c}"] for c in serving.CATEGORIES) == pytest.approx(100.0)
    # Little's law: systems that keep up hold the same tokens, whatever their allocator
    oracle, paged = (got[s]["1.0"]["run_token_states"] for s in ("oracle", "paged"))
    assert oracle == pytest.approx(paged, abs=1.0)


@pytest.mark.parametrize("rate", [0.1, 25, 0])
def test_a_rate_out_of_range_names_the_range(rate):
    with pytest.raises(ValueError, match="rate must be from 0.5 to 20 requests/s"):
        serving_windows.shares_at(rate, requests=10)


def test_serving_result_orders_the_systems_as_their_latencies_do(report):
    # oracle: the bench's own printed sustainable rates, and the latency table by hand
    data = report.data
    r = serving_windows.serving_result(data)
    line = next(n for n in report.notes if n.startswith("sustainable rate"))
    for system, rate in r["keeps_up"].items():
        assert f"{system} {rate:.3f}/s" in line
    lat = {s: [data["systems"][s][str(x)]["normalized_latency"] for x in data["rates"]] for s in r["order"]}
    for earlier, later in zip(r["order"], r["order"][1:]):
        # a system that crosses the bound later is never slower at any measured rate past 0.5/s
        assert all(b <= a for a, b in zip(lat[earlier][1:], lat[later][1:], strict=True))
    assert r["best"] == r["order"][-1] == max(r["tokens"], key=r["tokens"].get)
    rounded = {s: round(rate, 3) for s, rate in r["keeps_up"].items()}
    assert r["ratios"]["oracle"] == pytest.approx(rounded["paged"] / rounded["oracle"])
    text = serving_windows.serving_result_text(data)
    assert f"order: {', '.join(r['order'])}" in text and all(len(line) <= 90 for line in text.splitlines())


def test_paper_ratio_lines_put_the_full_run_beside_the_paper(report):
    # oracle: docs/calibration.md's rows R1 and R2 by hand (2.519 / 1.217, 2.519 / 0.707)
    keeps_up = serving_windows.serving_result(report.data)["keeps_up"]
    lines = serving_windows.paper_ratio_lines(keeps_up)
    quick = {s: round(keeps_up["paged"], 3) / round(keeps_up[s], 3) for s in ("oracle", "max")}
    assert lines[0].endswith("compare this with the paper") and lines[0].startswith("full run")
    assert lines[2] == f"  paged's rate over oracle's {2.519 / 1.217:.2f}x (paper: 1.7-2.7x), over max's" + (
        f" {2.519 / 0.707:.2f}x (paper: 2.7-8x)"
    )
    assert lines[3].startswith("quick run") and "the figure's run" in lines[3]
    assert lines[5] == f"  paged's rate over oracle's {quick['oracle']:.2f}x, over max's {quick['max']:.2f}x"
    text = serving_windows.latency_text(report.notes)
    assert "(paper" not in text and "rate over" not in text and all(len(x) <= 95 for x in text.splitlines())
    assert text.splitlines()[-1].startswith("sustainable rate")


def test_bars_text_quotes_the_shares_under_load(report):
    """The paragraph notebook 11 prints in its figure box: the shares the bars draw at the top
    rate, and no free slot in the three contiguous systems."""
    text = serving_windows.bars_text(report.data)
    at = {s: report.data["systems"][s][str(report.data["top_rate"])] for s in ("max", "pow2", "oracle")}
    assert all(at[s]["free"] == 0 for s in at)
    assert "max loses 58.8 % to internal" in " ".join(text.split())
    assert "45.7 % and 41.9 %" in " ".join(text.split())
