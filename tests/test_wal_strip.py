"""plot_wal_strip: one cell per whole record of the log, drawn from a store built by hand.

Oracle: the calls the test makes itself, one record each (counted here, not read from the
log), the checkpoint it takes after the first of them, and the bytes it appends to tear a
last record; the strip's cells are counted by what they are tagged (`gid`).
"""

from __future__ import annotations

import pytest
from matplotlib.patches import Rectangle

from pagedkv import CacheConfig
from pagedkv.service import DurableSequenceManager, read_log, recover
from pagedkv.service.wal import Record, encode_record
from pagedkv.service.wal_strip import TORN_MIN_SHARE, plot_wal_strip, wal_strip_parts

CONFIG = CacheConfig(num_pages=8, page_size=2, num_layers=1, num_kv_heads=1, head_dim=2)


def _cells(fig, gid: str) -> list[Rectangle]:
    return [p for ax in fig.axes for p in ax.patches if isinstance(p, Rectangle) and p.get_gid() == gid]


def _store(tmp_path, torn: int):
    """6 calls, a checkpoint, 5 calls, then `torn` bytes of a 12th record; returns what
    read_log saw before recovery and the recovered manager's report."""
    manager = DurableSequenceManager.create(tmp_path / "store", CONFIG, "never")
    manager.add("a", [1, 2, 3])  # 1 call
    for token in range(5):  # 5 calls
        manager.append_slot("a", 10 + token)
    assert manager.checkpoint() == 6
    manager.add("b", [7, 8])  # 1 call
    for token in range(3):  # 3 calls
        manager.append_slot("b", 20 + token)
    manager.free("a")  # 1 call: 5 since the checkpoint
    manager.close()
    log = tmp_path / "store" / "wal.log"
    with open(log, "ab") as f:
        f.write(encode_record(12, {"op": "free", "seq_id": "b"})[:torn])
    records, _ = read_log(log)
    recovered = recover(tmp_path / "store")
    report = dict(recovered.recovery)
    recovered.close()
    return records, report


def test_the_strip_draws_the_checkpoint_each_whole_record_and_the_torn_one(tmp_path):
    records, report = _store(tmp_path, torn=9)
    fig = plot_wal_strip(records, report)
    assert len(_cells(fig, "record")) == 5  # the 5 calls after the checkpoint
    assert len(_cells(fig, "replayed")) == 5 and not _cells(fig, "rolled back")
    assert [c.get_x() + 0.5 for c in _cells(fig, "record")] == [7, 8, 9, 10, 11]
    assert [(c.get_x() + 0.5, c.get_width()) for c in _cells(fig, "checkpoint")] == [(1, 6), (1, 6)]
    # the torn 12th record: right after record 11's cell, widened so that it shows, and numbered
    (torn,) = _cells(fig, "torn")
    assert torn.get_x() == 11.5 and torn.get_width() == pytest.approx(max(1.0, TORN_MIN_SHARE * 12))
    assert torn.get_width() >= 1 and [(c.get_x(), c.get_width()) for c in _cells(fig, "dropped")] == [
        (torn.get_x(), torn.get_width())
    ]
    numbers = [t.get_text() for ax in fig.axes for t in ax.texts if t.get_gid() == "torn number"]
    assert numbers == ["12"]
    texts = " ".join(t.get_text() for ax in fig.axes for t in ax.texts)
    assert "records 1–6" in texts and "records 7–11" in texts and "only 9 bytes" in texts
    assert "5 replayed" in texts


def test_without_torn_bytes_there_is_no_torn_cell(tmp_path):
    records, report = _store(tmp_path, torn=0)
    fig = plot_wal_strip(records, report)
    assert not _cells(fig, "torn") and not _cells(fig, "dropped")
    assert not [t for ax in fig.axes for t in ax.texts if t.get_gid() == "torn number"]
    assert len(_cells(fig, "record")) == 5


def test_discarded_records_are_drawn_apart_from_the_replayed_ones():
    records = [Record(0, seq, {"op": "append"}, 0) for seq in range(4, 9)]  # 5 records after 3
    report = {"checkpoint_seq": 3, "records_replayed": 3, "torn_bytes": 0, "discarded_records": 2}
    fig = plot_wal_strip(records, report)
    assert len(_cells(fig, "replayed")) == 3
    assert [c.get_x() + 0.5 for c in _cells(fig, "rolled back")] == [7, 8]


def test_a_report_that_does_not_fit_the_records_is_refused():
    records = [Record(0, seq, {"op": "append"}, 0) for seq in range(4, 9)]
    good = {"checkpoint_seq": 3, "records_replayed": 5, "torn_bytes": 0, "discarded_records": 0}
    assert wal_strip_parts(records, good)["last"] == 8
    with pytest.raises(ValueError, match="records holds 5"):
        plot_wal_strip(records, good | {"records_replayed": 4})
    with pytest.raises(ValueError, match="without a gap"):
        plot_wal_strip(records, good | {"checkpoint_seq": 1})
    with pytest.raises(ValueError, match="lacks"):
        plot_wal_strip(records, {"checkpoint_seq": 3})
    with pytest.raises(ValueError, match="counts"):
        plot_wal_strip(records, good | {"torn_bytes": -1})
    with pytest.raises(TypeError):
        plot_wal_strip(["not a record"], good)
    with pytest.raises(ValueError, match="at least one"):
        plot_wal_strip([], good)


def test_in_a_long_log_the_torn_cell_is_drawn_wider_than_one_record():
    records = [Record(0, seq, {"op": "append"}, 0) for seq in range(96, 150)]  # 54 after 95
    report = {"checkpoint_seq": 95, "records_replayed": 54, "torn_bytes": 11, "discarded_records": 0}
    fig = plot_wal_strip(records, report)
    (torn,) = _cells(fig, "torn")
    assert torn.get_x() == 149.5 and torn.get_width() == pytest.approx(0.06 * 150)  # 9 records wide
    (ax,) = fig.axes
    assert ax.get_xlim()[1] == pytest.approx(149.5 + 9)  # the cell ends at the axis' end, not cut


def test_tick_and_row_labels_are_at_least_14_px_in_an_808_px_cell():
    """808 px: the narrowest cell a learner measured it in; 14 px keeps a margin over 13."""
    records = [Record(0, seq, {"op": "append"}, 0) for seq in range(96, 150)]
    report = {"checkpoint_seq": 95, "records_replayed": 54, "torn_bytes": 11, "discarded_records": 0}
    fig = plot_wal_strip(records, report)
    fig.canvas.draw()
    # the PNG a notebook shows is cropped to the drawn content, then shrunk to the cell's width
    png_px = fig.get_tightbbox(fig.canvas.get_renderer()).width * fig.dpi
    (ax,) = fig.axes
    torn_number = [t for t in ax.texts if t.get_gid() == "torn number"]
    labels = ax.get_xticklabels() + ax.get_yticklabels() + torn_number
    assert len(labels) == 3 + 2 + 1  # 1, 95, 149; the two rows; the torn record's 150
    shown = [label.get_fontsize() * fig.dpi / 72 * 808 / png_px for label in labels]
    assert min(shown) >= 14, shown
