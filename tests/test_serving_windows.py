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
        assert load_row == [system, token4, paper, reserved, ext4, batch4]
        assert run_row[:2] == [system, token2]
        assert run_row[2] + run_row[3] == pytest.approx(ext_free2, abs=0.11)  # each rounded apart
    assert [row[3] for row in run] == [0.6, 1.6, 2.5, 29.9]  # free % at 2/s, as printed
    assert [row[4] for row in run] == [98.3, 96.5, 94.8, 16.7]  # % of the run requests waited
    assert [row[3] for row in loaded] == [12.6, 17.7, 22.7, 0.0]  # reserved % under load, as printed


def test_columns_name_their_rows():
    assert len(serving_windows.UNDER_LOAD_COLUMNS) == 6 and len(serving_windows.WHOLE_RUN_COLUMNS) == 5
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
