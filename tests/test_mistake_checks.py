"""Notebook 08's "Try it" checks: each flag's numbers against counts worked out by hand."""

from __future__ import annotations

import pytest

from pagedkv.labs.mistake_checks import POPULAR, check_report, check_results

SYSTEM = list(b"System: answer in one sentence. ")  # 32 tokens: 8 full pages of 4
REQUESTS = [SYSTEM + [97 + i % 26] * 8 for i in range(40)]  # 40 tokens each: 10 pages of 4


def test_pagedkv_passes_every_check():
    # no page lost or refused; section 4's request_B keeps its first 2 pages (8 tokens);
    # one entry per CACHED page: the popular prompt's 35 tokens fill 8 pages
    expected = {"lost": 0, "refused": 0, "hits": 8, "largest_heap": len(POPULAR) // 4}
    assert check_results(None, REQUESTS) == expected


def test_leak_loses_one_request_s_pages_and_runs_dry():
    numbers = check_results("leak", REQUESTS)
    assert numbers["lost"] == 40 // 4  # every page of the first request
    # 10 pages, then 2 per request (the system prompt hits): 32 pages last 1 + 11 requests
    assert numbers["refused"] == 40 - (1 + (32 - 10) // 2)


def test_page_per_token_refuses_every_request_longer_than_the_pool():
    assert check_results("page_per_token", REQUESTS)["refused"] == 40  # 40 tokens > 32 pages
    assert check_results("page_per_token", REQUESTS)["largest_heap"] == 0  # no page ever full


def test_only_the_forced_eviction_sees_one_stamp_per_release():
    numbers = check_results("one_stamp_per_release", REQUESTS)
    assert (numbers["lost"], numbers["refused"], numbers["hits"]) == (0, 0, 0)
    assert numbers["largest_heap"] <= 2 * 32


def test_the_stale_heap_grows_by_its_full_pages_per_request():
    numbers = check_results("stale_heap", REQUESTS)
    assert numbers["largest_heap"] == 20 * (len(POPULAR) // 4)
    assert (numbers["lost"], numbers["refused"], numbers["hits"]) == (0, 0, 8)


@pytest.mark.parametrize("mistake", ["leak", "stale_heap"])
def test_the_report_has_a_row_per_check_with_both_numbers(mistake):
    lines = check_report(mistake, REQUESTS).splitlines()
    assert len(lines) == 5 and lines[0].startswith(f"{mistake}:")
    assert lines[1].split()[-2:] == [str(check_results(mistake, REQUESTS)["lost"]), "0"]
    assert max(map(len, lines)) <= 90
