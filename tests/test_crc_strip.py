"""The CRC-check picture (notebook 07b, section 3d) against a real operator's cut and its oracle.

The oracle for "what the kept records say" is the same seeded workload stopped at the last
kept record, run in memory (`reference`); the pages the check must free are named, without
any CRC, by the `evict` fields of the records the cut dropped.
"""

from __future__ import annotations

import pytest
from matplotlib.colors import to_hex

from pagedkv.core.page import PageState
from pagedkv.service import read_log, recover
from pagedkv.service.crc_strip import FAILED_EDGE, crc_check_changes, plot_crc_check
from pagedkv.service.workload import reference, run_in_subprocess
from pagedkv.viz.palette import STATE_COLORS

FREE, ACTIVE, CACHED = PageState.FREE, PageState.ACTIVE, PageState.CACHED


@pytest.fixture(scope="module")
def cut(tmp_path_factory):
    store = tmp_path_factory.mktemp("cut") / "store"
    run_in_subprocess(store, 7, "--die-at", "150", "--checkpoint-every", "40", "--fsync", "never")
    records, _ = read_log(store / "wal.log")
    middle = records[len(records) // 2]
    with open(store / "wal.log", "r+b") as f:
        f.truncate(middle.offset)  # the operator's cut, as after a hole at `middle`
    manager = recover(store)
    oracle = reference(7, manager.last_seq)
    said = [page.state for page in oracle.pool.pages]
    served = [page.state for page in manager.pool.pages]
    lost = [r for r in records if r.seq >= middle.seq]
    yield said, served, manager.recovery["kv_checksum_failed_pages"], lost
    manager.close()


def test_the_freed_pages_are_those_the_lost_records_evicted(cut):
    said, served, failed, lost = cut
    evicted = sorted({p for r in lost for p in r.payload.get("evict") or ()})
    changes = crc_check_changes(said, served, failed)
    assert changes["freed"] == [p for p in evicted if said[p] is CACHED] and changes["freed"]
    taken = {p for r in lost for p in r.payload.get("alloc") or ()}
    assert set(changes["recomputed"]) <= taken  # an ACTIVE page fails only if a lost record reused it


def test_the_picture_draws_each_row_and_outlines_the_failed_pages(cut):
    said, served, failed, _ = cut
    fig = plot_crc_check(said, served, failed)
    cells = [p for p in fig.axes[0].patches if (p.get_gid() or "").startswith("page ")]
    assert len(cells) == 2 * len(said)
    for row, states in ((cells[: len(said)], said), (cells[len(said) :], served)):
        assert [to_hex(c.get_facecolor()) for c in row] == [STATE_COLORS[s].lower() for s in states]
        outlined = [i for i, c in enumerate(row) if to_hex(c.get_edgecolor()) == FAILED_EDGE.lower()]
        assert outlined == sorted(failed)


@pytest.mark.parametrize(
    ("said", "served", "failed", "message"),
    [
        ([CACHED, FREE], [CACHED], [], "same pages"),
        ([CACHED, FREE], [FREE, FREE], [2], "pages 0..1"),
        ([CACHED, FREE], [FREE, FREE], [], "changed in a way"),  # freed without failing
        ([FREE, ACTIVE], [FREE, ACTIVE], [0], "changed in a way"),  # a FREE page cannot fail
        ([CACHED, ACTIVE], [CACHED, FREE], [1], "changed in a way"),  # ACTIVE stays ACTIVE
    ],
)
def test_a_change_the_check_does_not_make_is_refused(said, served, failed, message):
    with pytest.raises(ValueError, match=message):
        crc_check_changes(said, served, failed)


def test_a_small_case_by_hand():
    changes = crc_check_changes([CACHED, ACTIVE, CACHED, FREE], [FREE, ACTIVE, CACHED, FREE], [0, 1])
    assert changes == {"freed": [0], "recomputed": [1]}
