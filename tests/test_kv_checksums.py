"""K/V checksums: after a power loss, recovery serves no page whose K/V never reached kv.bin.

A power loss cannot be made in a test; its outcome can. Under fsync "never" or "batch N"
the log may reach the disk while kv.bin does not (it is flushed only at a checkpoint and at
close). So each test runs a server engine, closes it, puts back the kv.bin of an earlier
moment (the K/V the disk still held), and restarts. The oracle is TinyLM's generation with
no cache at all (`generate_reference`) and the pool rules: the prompt's pages must not be
hit, and the tokens must be the model's.
"""

from __future__ import annotations

import os

import numpy as np

from pagedkv.model.tinylm import TinyLM
from pagedkv.service import recover
from pagedkv.service.engine import ServiceEngine
from pagedkv.service.wal import WriteAheadLog, read_log

PROMPT = list(b"the power went out")  # 18 tokens: 4 full pages of 4, and 2 tokens in a fifth


def _engine(store, fsync="never"):
    return ServiceEngine(num_pages=16, page_size=4, wal=store, fsync=fsync)


def test_cached_pages_whose_kv_never_reached_the_disk_are_not_hit(tmp_path):
    store = tmp_path / "store"
    engine = _engine(store)
    engine.close()
    empty_kv = (store / "kv.bin").read_bytes()  # the disk's kv.bin: nothing written yet
    engine = _engine(store)
    engine.create(PROMPT, "A")
    engine.free("A")  # its 4 full pages stay CACHED
    engine.close()
    (store / "kv.bin").write_bytes(empty_kv)  # the log reached the disk, the K/V did not
    manager = recover(store)
    # the 4 CACHED pages fail their checksum and turn FREE
    assert len(manager.recovery["kv_checksum_failed_pages"]) == 4
    assert manager.pool.num_cached_pages == 0
    manager.close()
    engine = _engine(store)
    answer = engine.create(PROMPT, "B")
    assert answer["num_cached_tokens"] == 0  # no prefix hit on K/V that were lost
    new = engine.generate("B", 6)["new_token_ids"]
    assert new == TinyLM.pretrained().generate_reference(PROMPT, 6)
    engine.check()
    engine.close()


def test_a_live_sequence_whose_kv_were_lost_is_computed_again(tmp_path):
    store = tmp_path / "store"
    engine = _engine(store, "batch 64")
    engine.close()
    empty_kv = (store / "kv.bin").read_bytes()
    engine = _engine(store, "batch 64")
    engine.create(PROMPT, "A")
    engine.close()
    (store / "kv.bin").write_bytes(empty_kv)
    manager = recover(store)
    failed = manager.recovery["kv_checksum_failed_pages"]
    assert failed == sorted(manager.sequences["A"].block_table)  # all 5 pages, ACTIVE
    assert manager.sequences["A"].num_computed_tokens == 0  # to compute again from the start
    manager.close()
    engine = _engine(store, "batch 64")  # computes A's tokens before serving anything
    new = engine.generate("A", 6)["new_token_ids"]
    assert new == TinyLM.pretrained().generate_reference(PROMPT, 6)
    engine.close()


def test_kv_overwritten_for_a_lost_record_are_caught(tmp_path):
    # The other way round: kv.bin reached the disk later than the log. The log ends with A
    # CACHED; K/V of a later request, whose records were lost, overwrote those pages.
    store = tmp_path / "store"
    engine = _engine(store)
    engine.create(PROMPT, "A")
    engine.free("A")
    engine.close()
    log = (store / "wal.log").read_bytes()
    engine = _engine(store)
    engine.create(list(b"z" * 56), "C")  # 14 pages: 12 FREE, then 2 of A's CACHED ones
    engine.close()
    (store / "wal.log").write_bytes(log)  # C's records never reached the disk
    manager = recover(store)
    assert len(manager.recovery["kv_checksum_failed_pages"]) == 2
    manager.close()
    engine = _engine(store)
    hit = engine.create(PROMPT, "B")["num_cached_tokens"]
    new = engine.generate("B", 6)["new_token_ids"]
    assert new == TinyLM.pretrained().generate_reference(PROMPT, 6)
    assert hit == 8  # the 2 overwritten pages are not hit: A's first 2 pages are
    engine.close()


def test_an_intact_store_fails_no_checksum(tmp_path):
    store = tmp_path / "store"
    engine = _engine(store)
    engine.create(PROMPT, "A")
    engine.fork("A", "B")
    engine.generate("B", 5)
    engine.free("A")
    engine.close()
    manager = recover(store)
    assert manager.recovery["kv_checksum_failed_pages"] == []
    assert manager.kv_crc  # the log carried checksums
    assert np.count_nonzero(manager.pool.kv_cache)  # and kv.bin holds K/V
    manager.close()


def _power_loss_mid_request(store, monkeypatch, defer_overwrites: bool):
    """Under fsync "always": `old`'s 4 pages CACHED, `story` on the other 4, then an 8-token
    generate of `story` that must evict 2 of them. The power goes out just before the
    commit's fsync: the log keeps what it had fsynced, kv.bin keeps every K/V written (the
    kernel may write back the file's pages at any time). Returns (evicted, recovery report).
    `defer_overwrites` leaves evict/copy-on-write records to the commit's fsync as well."""
    synced = []  # log size at each fsync
    sync, append = WriteAheadLog.sync, WriteAheadLog.append

    def spy_sync(log):
        before = log.fsyncs
        sync(log)
        if log.fsyncs > before:
            synced.append(log.size)

    def deferring_append(log, payload, sync=True):
        if defer_overwrites and payload["op"] != "commit" and (payload.get("evict") or payload.get("cow")):
            sync = False
        return append(log, payload, sync)

    monkeypatch.setattr(WriteAheadLog, "sync", spy_sync)
    monkeypatch.setattr(WriteAheadLog, "append", deferring_append)
    engine = ServiceEngine(num_pages=8, page_size=4, wal=store, fsync="always")
    engine.create(list(b"A shared prefix!"), "old")
    engine.free("old")
    engine.create(list(b"Once upon a time"), "story")
    engine.generate("story", 8)
    engine.close()
    monkeypatch.undo()
    evicted = sorted(p for r in read_log(store / "wal.log")[0] for p in r.payload.get("evict") or [])
    os.truncate(store / "wal.log", synced[-2])  # [-1] is the commit's fsync, never reached
    manager = recover(store)
    report = dict(manager.recovery)
    assert manager.pool.num_cached_pages == 2  # old's 2 pages that were not evicted
    manager.close()
    return evicted, report


def test_evict_records_fsynced_at_once_let_the_log_explain_a_power_loss(tmp_path, monkeypatch):
    # What the immediate fsync of evict/copy-on-write records buys under "always": the log
    # on disk names the overwritten pages, so recovery drops them itself and no checksum fails.
    evicted, report = _power_loss_mid_request(tmp_path / "s", monkeypatch, defer_overwrites=False)
    assert evicted == [2, 3]
    assert report["discarded_records"] > 0 and report["dropped_cached_pages"] == evicted
    assert report["kv_checksum_failed_pages"] == []
    # Without it the log on disk lacks the whole request: only the checksums catch the pages.
    evicted, report = _power_loss_mid_request(tmp_path / "d", monkeypatch, defer_overwrites=True)
    assert evicted == [2, 3]
    assert report["discarded_records"] == 0 and report["dropped_cached_pages"] == []
    assert report["kv_checksum_failed_pages"] == evicted


def test_still_matching_names_the_pages_whose_kv_equal_their_newest_logged_crc(tmp_path):
    """`still_matching` against an oracle built here: a freed prompt's 4 CACHED pages all
    match (nothing wrote them since); after one page's K/V are changed by hand, it alone
    does not; a page handed out again by a later record has no entry left, so it never matches."""
    from pagedkv.service.kv_checksums import still_matching

    store = tmp_path / "store"
    engine = _engine(store, "always")
    engine.create(PROMPT, "A")
    pages = engine.sequence("A")["block_table"][:4]
    engine.free("A")
    engine.close()
    payloads = [r.payload for r in read_log(store / "wal.log")[0]]
    manager = recover(store)
    kv = np.array(manager.pool.kv_cache)  # a copy, changed below
    manager.close()
    assert still_matching(kv, payloads, pages) == sorted(pages)
    kv[:, :, pages[1], 0] += 1.0
    assert still_matching(kv, payloads, pages) == sorted(p for p in pages if p != pages[1])
    handed_out = payloads + [{"op": "append", "alloc": [pages[0]]}]
    assert pages[0] not in still_matching(kv, handed_out, pages)


def test_after_an_operators_cut_every_cached_page_has_a_logged_crc(tmp_path):
    """Notebook 07b, section 3b: after `truncate -s OFFSET wal.log` at any record, no CACHED page lacks
    a logged CRC, so a page a lost record overwrote is always checked. A page turns CACHED
    at a `free`, logged after the `computed` record carrying its CRC; a cut keeps a prefix."""
    import shutil

    from pagedkv.core.page import PageState
    from pagedkv.service import DurableSequenceManager
    from pagedkv.service.workload import run_workload, workload_config

    model = TinyLM(seed=0)
    store = tmp_path / "store"
    manager = DurableSequenceManager.create(store, workload_config(model), "never")
    run_workload(manager, model, 7, 60)
    manager.close()
    records, _ = read_log(store / "wal.log")
    cached = 0
    for record in records[::4]:
        cut = tmp_path / "cut"
        shutil.rmtree(cut, ignore_errors=True)
        shutil.copytree(store, cut)
        os.truncate(cut / "wal.log", record.offset)
        manager = recover(cut)
        pages = [p for p in range(manager.pool.num_pages) if manager.pool.page(p).state == PageState.CACHED]
        assert all(p in manager.kv_crc for p in pages), (record.seq, pages)
        cached += len(pages)
        manager.close()
    assert cached > 0  # the cuts left CACHED pages to check


def test_record_lengths_do_not_depend_on_the_kv_values(tmp_path):
    """K/V are floats whose last bits differ between machines, and so do their CRCs: the
    log's offsets (which notebooks print) must not. Two models with other weights write
    other K/V, so other CRCs, on the same workload: every record must start at the same offset."""
    from pagedkv.service import DurableSequenceManager
    from pagedkv.service.workload import run_workload, workload_config

    logs = []
    for seed in (0, 1):
        model = TinyLM(seed=seed)
        manager = DurableSequenceManager.create(tmp_path / f"s{seed}", workload_config(model), "never")
        run_workload(manager, model, seed=7, steps=40)
        manager.close()
        logs.append(read_log(tmp_path / f"s{seed}" / "wal.log")[0])
    crcs = [[r.payload["kv_crc"] for r in log if "kv_crc" in r.payload] for log in logs]
    assert crcs[0] != crcs[1]  # the K/V, so the CRCs, differ
    assert [r.offset for r in logs[0]] == [r.offset for r in logs[1]]
