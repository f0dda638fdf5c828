"""Prometheus metrics: scraped text, parsed with prometheus_client's own parser, must equal
what a known workload does (counted by hand) and the pool's counters."""

from __future__ import annotations

import sys
import threading

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pagedkv import CacheConfig, KVCachePool, SequenceManager
from pagedkv.engine.scheduler import Scheduler
from pagedkv.service.concurrency import LockedManager, ReadWriteLock
from pagedkv.service.engine import ServiceEngine
from pagedkv.service.metrics import ServiceMetrics

CONFIG = CacheConfig(num_pages=16, page_size=4, num_layers=1, num_kv_heads=1, head_dim=2)


def scrape(metrics: ServiceMetrics) -> dict[str, float]:
    """sample name (with labels) -> value, from the exposition text."""
    samples = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            samples[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return samples


def test_known_workload_gives_known_numbers():
    # Pages of 4 tokens, 8 pages. Every number below is counted by hand from the rules in docs/design.md.
    engine = ServiceEngine(num_pages=8, page_size=4)
    a = list(b"the pages")  # 9 tokens: two full pages and one partial
    engine.create(a + [33], "A")  # 10 tokens: 3 pages, 10 queried, 0 hit
    engine.free("A")  # pages 1, 0 turn CACHED, partial page 2 FREE
    b = engine.create(a + [33, 34], "B")  # 11 tokens: hits pages 0 and 1 (8 tokens), 1 new page
    assert b["num_cached_tokens"] == 8 and b["block_table"] == [0, 1, 2]
    engine.fork("B", "C")
    engine.generate("C", 1)  # C's shared half page 2 is copied (COW) to page 3, then filled
    engine.free("C")  # page 3 (full, hashed) CACHED; 0 and 1 stay with B
    engine.create(list(range(100, 117)), "D")  # 17 tokens, 5 pages: 4 FREE + page 3 evicted
    m = scrape(engine.metrics)
    assert m["pagedkv_prefix_cache_queries_total"] == 10 + 11 + 17
    assert m["pagedkv_prefix_cache_hits_total"] == 8
    assert m["pagedkv_prefix_cache_hit_ratio"] == pytest.approx(8 / 38)  # tokens, not pages
    assert m["pagedkv_page_allocations_total"] == 3 + 1 + 1 + 5
    assert m["pagedkv_cow_copies_total"] == 1
    assert m["pagedkv_evictions_total"] == 1
    assert m["pagedkv_kv_cache_pages{state=active}"] == 3 + 5  # B's 3 pages, D's 5
    assert m["pagedkv_kv_cache_pages{state=free}"] == 0
    assert m["pagedkv_kv_cache_pages{state=cached}"] == 0
    assert m["pagedkv_kv_cache_usage_perc"] == 1.0
    assert m["pagedkv_kv_cache_used_token_slots"] == 11 + 17
    assert m["pagedkv_kv_cache_token_usage_perc"] == pytest.approx(28 / 32)
    assert m["pagedkv_num_requests_running"] == 2
    assert m["pagedkv_num_requests_waiting"] == 0
    assert m["pagedkv_num_preemptions_total"] == 0  # no Scheduler, so nothing is preempted
    assert m["pagedkv_allocation_latency_seconds_count"] == 4  # three adds, one append
    assert m["pagedkv_allocation_latency_seconds_sum"] > 0
    # ... and every counter equals the pool's own.
    stats = engine.pool.stats
    assert (
        stats.prefix_queries,
        stats.prefix_hits,
        stats.allocations,
        stats.evictions,
        stats.cow_copies,
    ) == (
        m["pagedkv_prefix_cache_queries_total"],
        m["pagedkv_prefix_cache_hits_total"],
        m["pagedkv_page_allocations_total"],
        m["pagedkv_evictions_total"],
        m["pagedkv_cow_copies_total"],
    )
    assert m["pagedkv_kv_cache_usage_perc"] == engine.pool.usage
    assert "pagedkv_wal_records_total" not in m  # no write-ahead log


def test_every_metric_is_named_pagedkv_and_registries_are_separate():
    first, second = ServiceEngine(num_pages=8, page_size=4), ServiceEngine(num_pages=8, page_size=4)
    first.create(list(b"hello"), "x")
    assert first.metrics.registry is not second.metrics.registry
    one, two = scrape(first.metrics), scrape(second.metrics)
    assert all(name.startswith("pagedkv_") for name in one)
    assert one["pagedkv_prefix_cache_queries_total"] == 5 and two["pagedkv_prefix_cache_queries_total"] == 0


def test_requests_waiting_for_the_lock_are_counted():
    engine = ServiceEngine(num_pages=8, page_size=4)
    with engine.locked.exclusive():  # this thread holds the service lock ...
        blocked = [threading.Thread(target=engine.create, args=(list(b"abc"), f"w{i}")) for i in range(3)]
        for t in blocked:
            t.start()
        while engine.metrics.num_waiting < 3:
            pass
        waiting = scrape(engine.metrics)["pagedkv_num_requests_waiting"]  # (re-entrant scrape)
    for t in blocked:
        t.join()
    assert waiting == 3
    assert scrape(engine.metrics)["pagedkv_num_requests_waiting"] == 0
    assert scrape(engine.metrics)["pagedkv_num_requests_running"] == 3


def test_write_ahead_log_metrics(tmp_path):
    engine = ServiceEngine(num_pages=8, page_size=4, wal=tmp_path / "s", fsync="always")
    engine.create(list(b"abcdef"), "a")  # records: begin, add, computed, commit
    engine.generate("a", 2)  # records: begin, (append, computed) x 2, commit
    m = scrape(engine.metrics)
    assert m["pagedkv_wal_records_total"] == 10 == engine.durable.last_seq
    assert m["pagedkv_wal_fsyncs_total"] == 2  # fsync "always": one per request, at its commit
    engine.close()


def test_scheduler_preemptions_running_and_waiting():
    engine = ServiceEngine(num_pages=6, page_size=4)  # only for its model
    seqs = SequenceManager(KVCachePool(engine.model.cache_config(num_pages=6, page_size=4)))
    sched = Scheduler(seqs, engine.model, max_num_seqs=8, max_num_batched_tokens=64)
    preempt_events = []
    sched.add_listener(lambda e: preempt_events.append(e) if e.kind == "preempt" else None)
    for i, text in enumerate(["abcdefg", "hijklmn", "opqrstu", "vw"]):
        sched.add_request(f"r{i}", engine.model.encode(text), 6)
    metrics = ServiceMetrics(LockedManager(seqs), scheduler=sched)
    seen = []
    while sched.has_unfinished:
        sched.step()
        m = scrape(metrics)
        seen.append((m["pagedkv_num_requests_running"], m["pagedkv_num_requests_waiting"]))
        assert seen[-1] == (len(sched.running), len(sched.waiting))
        assert m["pagedkv_num_preemptions_total"] == len(preempt_events)
    assert len(preempt_events) >= 1 and sched.stats.preemptions == len(preempt_events)
    assert any(waiting for _, waiting in seen) and seen[-1] == (0, 0)


def test_scrapes_never_deadlock_with_a_read_write_lock_and_waiting_writers():
    """A scrape reads under the read lock; writers queue meanwhile. Were a scrape's read
    not re-entrant, a writer queuing between its outer and inner read would deadlock both."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often, inside the scrape
    try:
        locked = LockedManager(SequenceManager(KVCachePool(CONFIG)), ReadWriteLock())
        metrics = ServiceMetrics(locked)
        stop = threading.Event()

        def write() -> None:
            while not stop.is_set():
                with locked.exclusive() as m:
                    m.add("w", [1, 2, 3])
                    m.free("w")

        scrapes = []
        scraper = threading.Thread(
            target=lambda: scrapes.extend(scrape(metrics) for _ in range(300)), daemon=True
        )
        writers = [threading.Thread(target=write, daemon=True) for _ in range(2)]
        for t in (*writers, scraper):
            t.start()
        scraper.join(20)
        stop.set()
        for w in writers:
            w.join(5)
        assert not scraper.is_alive() and len(scrapes) == 300, "a scrape deadlocked"
        assert not any(w.is_alive() for w in writers), "a writer deadlocked"
    finally:
        sys.setswitchinterval(old)


def test_created_series_only_when_asked():
    plain, asked = (
        ServiceEngine(num_pages=8, page_size=4),
        ServiceEngine(num_pages=8, page_size=4, metrics_created=True),
    )
    for engine in (plain, asked):
        engine.create(list(b"abcdef"), "a")
    assert b"_created" not in plain.metrics.exposition()
    assert b"pagedkv_allocation_latency_seconds_created" in asked.metrics.exposition()
