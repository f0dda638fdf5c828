"""sharing.parallel_saving against a closed form, step_bytes against hand counts, and the
memory table's paper column (ShareGPT rows only)."""

from __future__ import annotations

import pytest

from pagedkv.bench import memory, sharing
from pagedkv.engine.request import Request
from pagedkv.labs import step_bytes
from pagedkv.labs.workloads import generate


def closed_form(prompt: int, appended: int, width: int, page: int) -> tuple[int, int]:
    """Pages shared and unshared, summed over admission and every decode step: after the fork
    the samples share the prompt's pages; from the first append on, only its full pages, and
    each sample holds its own pages past them (the copied partial page among them)."""

    def ceil(a: int) -> int:
        return -(-a // page)

    shared, unshared = ceil(prompt), width * ceil(prompt)
    for length in range(prompt + 1, prompt + appended + 1):
        full = prompt // page
        shared += full + width * (ceil(length) - full)
        unshared += width * ceil(length)
    return shared, unshared


@pytest.mark.parametrize("page", [4, 16])
@pytest.mark.parametrize("appended", [None, 8])
def test_parallel_saving_matches_the_closed_form(page: int, appended: int | None) -> None:
    trace = generate("alpaca", 6)
    got = sharing.parallel_saving(trace, 4, page, appended)
    sums = [closed_form(r.prompt_len, appended or r.max_new_tokens - 1, 4, page) for r in trace]
    shared, unshared = sum(s for s, _ in sums), sum(u for _, u in sums)
    assert (got["shared_pages"], got["unshared_pages"]) == (shared, unshared)
    assert got["saving_pct"] == pytest.approx(100 * (1 - shared / unshared))


def test_notebook_04_request_summed_over_its_steps() -> None:
    # 18-token prompt, 4 samples, pages of 4, 8 tokens appended: 28 entries on 16 pages at the end
    request = Request(req_id="04", prompt_token_ids=list(range(18)), max_new_tokens=9)
    got = sharing.parallel_saving([request], 4, 4, 8)
    assert (got["shared_pages"], got["unshared_pages"]) == (
        5 + 2 * 8 + 4 * 12 + 2 * 16,
        20 + 2 * 20 + 4 * 24 + 2 * 28,
    )
    assert closed_form(18, 8, 4, 4) == (101, 212)


def test_decode_step_bytes_by_hand() -> None:
    d = step_bytes.decode_step(20, 8000, "OPT-13B")
    assert d["weights"] == 12.9e9 * 2
    assert d["kv"] == 8000 * 2 * 40 * 40 * 128 * 2
    assert d["per_token"] == pytest.approx((12.9e9 * 2 + 8000 * 819_200) / 20)
    with pytest.raises(ValueError):
        step_bytes.decode_step(0, 10)


def test_memory_run_reads_the_row() -> None:
    row = {"token_states": 50.0, "mean_batch": 10.0}
    d = step_bytes.memory_run(row, 1000, "OPT-13B")
    assert d["kv_tokens"] == 500 and d["kv"] == 500 * 819_200 and d["batch"] == 10.0


def test_memory_table_gives_the_paper_only_for_sharegpt() -> None:
    report = memory.run(requests=20)
    paper = {(row[0], row[1]): row[-1] for row in report.rows}
    assert paper[("sharegpt", "contiguous max")] == 20.4
    assert all(v == "-" for (w, _), v in paper.items() if w == "alpaca")
    assert report.columns[-1] == "paper (sharegpt) token %"
    assert report.digits == {"mean batch": 1}
