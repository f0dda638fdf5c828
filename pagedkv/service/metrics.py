"""Prometheus metrics of a paged KV cache service, with the meanings vLLM gives them.

Each `ServiceMetrics` has its own `CollectorRegistry`, so several services (or tests) in one
process never share counters. Cache state comes from the counts the service lock publishes
after every request (`LockedManager.published`), so a scrape never waits for the lock, sees
one instant, and its counters equal `pool.stats` as of the last request. (With a
`Scheduler` passed in — a program stepping it outside the service — they are read under
the lock instead.) Every series is present from the start, at 0.

pagedkv metric (type)                        vLLM metric: meaning here
- `pagedkv_kv_cache_usage_perc` (gauge)      `vllm:kv_cache_usage_perc`: ACTIVE pages / all
                                             pages, 0-1 (CACHED pages count as free, as in vLLM)
- `pagedkv_kv_cache_token_usage_perc` (gauge) none (vLLM reports blocks): filled token slots of
                                             ACTIVE pages / all slots, 0-1
- `pagedkv_kv_cache_used_token_slots` (gauge) none: filled token slots of ACTIVE pages
- `pagedkv_kv_cache_pages{state}` (gauge)    none (`vllm:cache_config_info` has num_gpu_blocks):
                                             pages FREE / ACTIVE / CACHED
- `pagedkv_prefix_cache_queries_total`       `vllm:prefix_cache_queries`: prompt tokens looked
  (counter)                                  up at admission
- `pagedkv_prefix_cache_hits_total`          `vllm:prefix_cache_hits`: of those, tokens served
  (counter)                                  by cached pages
- `pagedkv_prefix_cache_hit_ratio` (gauge)   `vllm:gpu_prefix_cache_hit_rate` (v0; v1 leaves
                                             hits / queries to PromQL): hits / queries, so
                                             per prompt token, not per page (a hit page
                                             counts its page_size tokens)
- `pagedkv_page_allocations_total` (counter) none: pages handed out (FREE or evicted; COW too)
- `pagedkv_evictions_total` (counter)        none (nearest: the count of the sampled
                                             `vllm:kv_block_idle_before_evict_seconds`):
                                             CACHED pages reclaimed
- `pagedkv_cow_copies_total` (counter)       none (v1 never copies on write): pages copied
                                             before a shared page was written
- `pagedkv_num_preemptions_total` (counter)  `vllm:num_preemptions`: preemptions of the
                                             `Scheduler` passed in; 0 without one (the HTTP
                                             service runs none, so never preempts)
- `pagedkv_out_of_pages_refusals_total`      none (vLLM queues such a request instead):
  (counter)                                  requests the HTTP server answered 503
                                             `out_of_pages` (too few FREE or CACHED pages
                                             now); the server's sign of too few pages
- `pagedkv_num_requests_running` (gauge)     `vllm:num_requests_running`: the Scheduler's
                                             running requests; without one, live sequences
- `pagedkv_num_requests_waiting` (gauge)     `vllm:num_requests_waiting`: the Scheduler's
                                             waiting queue; without one, requests waiting
                                             for the service lock
- `pagedkv_allocation_latency_seconds`       none: wall time of `add` / `append_slot` (lookup,
  (histogram)                                allocation, eviction, COW, WAL record)
- `pagedkv_wal_records_total`,               none: with a write-ahead log, its last record
  `pagedkv_wal_fsyncs_total` (counters)      number and the fsyncs since it was opened

- `pagedkv_recovery_discarded_bytes{reason}`, none: what start-up recovery discarded:
  `pagedkv_recovery_discarded_records{reason}`  reason "torn" (a damaged or torn final
  (gauges)                                   record) or "uncommitted" (a transaction cut off)
- `pagedkv_recovery_dropped_cached_pages`    none: CACHED pages recovery made FREE (the cut-off
  (gauge)                                    transaction may have overwritten their K/V)
- `pagedkv_recovery_kv_checksum_failed_pages` none: pages whose K/V in kv.bin differ from
  (gauge)                                    the checksum the log holds (kv_checksums.py),
                                             not served

With a tokens file (quota.py), per client, labelled `client` by the file's names only (at
most `MAX_CLIENTS` values, never anything a request sent): `pagedkv_client_pages`,
`pagedkv_client_sequences`, `pagedkv_client_requests_inflight` (gauges: its use),
`pagedkv_client_quota{client, quota}` (gauge: its limits) and
`pagedkv_client_quota_refusals_total{client, quota}` (counter: its 429s).

With `vllm_names`, the metrics vLLM also has are exported a second time under vLLM's own
names and labels (`vllm:kv_cache_usage_perc{model_name, engine}`, `vllm:prefix_cache_queries`,
`vllm:prefix_cache_hits`, `vllm:num_preemptions`, `vllm:num_requests_running`,
`vllm:num_requests_waiting`), so dashboards and alerts written for vLLM work unchanged.
The `_created` series prometheus_client adds to counters and histograms are left out unless
`created=True` (they are a Unix time, nothing here restarts counters without a new process).

Leaves out: request-level latency histograms (TTFT, inter-token latency), which belong to a
scheduler loop the HTTP service does not run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pagedkv.core.plumbing.validation import check_instance
from pagedkv.core.sequence import SequenceManager
from pagedkv.service.concurrency import LockedManager
from pagedkv.service.wal import WriteAheadLog

if TYPE_CHECKING:
    from pagedkv.engine.scheduler import Scheduler
    from pagedkv.service.quota import Quotas

LATENCY_BUCKETS = (1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 0.1)


class ServiceMetrics:
    """The metrics of one service: cache state read at scrape time, latency and waits observed."""

    def __init__(
        self,
        locked: LockedManager,
        log: WriteAheadLog | None = None,
        scheduler: Scheduler | None = None,
        recovery: dict | None = None,
        vllm_names: bool = False,
        created: bool = False,
        model_name: str = "pagedkv-tinylm",
        quotas: Quotas | None = None,
    ) -> None:
        self.locked = check_instance("locked", locked, LockedManager)
        self.log = log  # the write-ahead log of a durable manager
        # A program that drives a pagedkv Scheduler over this manager passes it here to
        # export its running / waiting queues and preemptions.
        self.scheduler = scheduler
        self.recovery = recovery or {}  # what recover() discarded at start-up
        self.quotas = quotas  # per-client use and quotas (a tokens file's clients)
        self.vllm_names, self.created, self.model_name = vllm_names, created, model_name
        self.registry = CollectorRegistry(auto_describe=True)
        self.allocation_latency = Histogram(
            "pagedkv_allocation_latency_seconds",
            "Wall time of add / append_slot: prefix lookup, allocation, eviction, COW, WAL record.",
            buckets=LATENCY_BUCKETS,
            registry=None,  # collected by _CacheCollector, which drops _created unless asked
        )
        self._waiting = 0  # requests blocked on the service lock
        self._waiting_lock = threading.Lock()
        self.out_of_pages_refusals = 0  # 503 out_of_pages answers (count_out_of_pages)
        self.registry.register(_CacheCollector(self))

    @contextmanager
    def time_allocation(self) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.allocation_latency.observe(time.perf_counter() - start)

    @contextmanager
    def exclusive(self) -> Iterator[SequenceManager]:
        """`locked.exclusive()`, counting the callers still waiting for it."""
        with self._waiting_lock:
            self._waiting += 1
        with self.locked.exclusive() as manager:
            with self._waiting_lock:
                self._waiting -= 1
            yield manager

    @property
    def num_waiting(self) -> int:
        return self._waiting

    def count_out_of_pages(self) -> None:
        """Count one request refused for want of pages (the HTTP server's 503 out_of_pages)."""
        with self._waiting_lock:
            self.out_of_pages_refusals += 1

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric."""
        return generate_latest(self.registry)


class _CacheCollector(Collector):
    def __init__(self, metrics: ServiceMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        c, running, waiting, preemptions = self._read()
        yield from _cache_metrics(c, m.locked.pool.config.num_slots)
        yield _counter("num_preemptions", "Preemptions by the scheduler.", preemptions)
        yield _counter(
            "out_of_pages_refusals",
            "Requests refused with 503 out_of_pages: too few FREE or CACHED pages now.",
            m.out_of_pages_refusals,
        )
        yield _gauge("num_requests_running", "Running requests (live sequences).", running)
        yield _gauge(
            "num_requests_waiting",
            "Waiting requests: the scheduler's queue; without one, requests waiting for the lock.",
            waiting,
        )
        if m.log is not None:  # plain ints, read without the lock
            yield from _wal_metrics(m.log)
            yield from _recovery_metrics(m.recovery)
        for metric in m.allocation_latency.collect():
            if not m.created:
                metric.samples = [s for s in metric.samples if not s.name.endswith("_created")]
            yield metric
        if m.quotas is not None:
            yield from m.quotas.metrics()
        if m.vllm_names:
            yield from _vllm_metrics(m.model_name, c, preemptions, running, waiting)

    def _read(self) -> tuple[dict, float, float, float]:
        """(pool counts, running, waiting, preemptions) as of one instant."""
        locked, scheduler = self.metrics.locked, self.metrics.scheduler
        if scheduler is None:  # published after the last request: never waits for the lock
            c = locked.published
            return c, c["num_sequences"], self.metrics.num_waiting, 0
        with locked.lock.read():  # stepped outside the service: read one instant under the lock
            running, waiting = len(scheduler.running), len(scheduler.waiting)
            return locked.counts(), running, waiting, scheduler.stats.preemptions


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"pagedkv_{name}", doc, value=value)


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(f"pagedkv_{name}", doc, value=value)


def _cache_metrics(c: dict, num_slots: int) -> Iterator[Metric]:
    """Usage, pages by state, prefix hits and the pool's counters, from its counts `c`."""
    ratio = c["prefix_hits"] / c["prefix_queries"] if c["prefix_queries"] else 0.0
    yield _gauge("kv_cache_usage_perc", "ACTIVE pages / all pages (0-1).", c["usage"])
    yield _gauge(
        "kv_cache_token_usage_perc",
        "Filled slots of ACTIVE pages / all slots (0-1).",
        c["token_usage"],
    )
    yield _gauge(
        "kv_cache_used_token_slots",
        "Filled token slots of ACTIVE pages.",
        round(c["token_usage"] * num_slots),
    )
    pages = GaugeMetricFamily("pagedkv_kv_cache_pages", "Pages by state.", labels=["state"])
    for state in ("free", "active", "cached"):
        pages.add_metric([state], c[f"num_{state}_pages"])
    yield pages
    yield _counter(
        "prefix_cache_queries",
        "Prompt tokens looked up in the prefix cache.",
        c["prefix_queries"],
    )
    yield _counter("prefix_cache_hits", "Prompt tokens served by cached pages.", c["prefix_hits"])
    yield _gauge(
        "prefix_cache_hit_ratio",
        "Prompt tokens served by cached pages / prompt tokens looked up.",
        ratio,
    )
    yield _counter("page_allocations", "Pages handed out for writing.", c["allocations"])
    yield _counter("evictions", "CACHED pages reclaimed.", c["evictions"])
    yield _counter("cow_copies", "Pages copied on write.", c["cow_copies"])


def _wal_metrics(log: WriteAheadLog) -> Iterator[Metric]:
    yield _counter(
        "wal_records",
        "Write-ahead log records written (the last record number).",
        log.last_seq,
    )
    yield _counter(
        "wal_fsyncs",
        "fsync calls on the write-ahead log since it was opened.",
        log.fsyncs,
    )


def _recovery_metrics(r: dict) -> Iterator[Metric]:
    discarded = GaugeMetricFamily(
        "pagedkv_recovery_discarded_bytes",
        "Log bytes start-up recovery discarded, by reason.",
        labels=["reason"],
    )
    records = GaugeMetricFamily(
        "pagedkv_recovery_discarded_records",
        "Log records start-up recovery discarded, by reason (a torn record counts 1).",
        labels=["reason"],
    )
    discarded.add_metric(["torn"], r.get("torn_bytes", 0))
    discarded.add_metric(["uncommitted"], r.get("discarded_bytes", 0))
    records.add_metric(["torn"], 1 if r.get("torn_bytes") else 0)
    records.add_metric(["uncommitted"], r.get("discarded_records", 0))
    yield discarded
    yield records
    yield GaugeMetricFamily(
        "pagedkv_recovery_dropped_cached_pages",
        "CACHED pages recovery turned FREE (a cut-off transaction may have overwritten their K/V).",
        value=len(r.get("dropped_cached_pages", ())),
    )
    yield GaugeMetricFamily(
        "pagedkv_recovery_kv_checksum_failed_pages",
        "Pages whose K/V differ from their logged checksum; recovery serves none of them.",
        value=len(r.get("kv_checksum_failed_pages", ())),
    )


def _vllm_metrics(
    model_name: str, c: dict, preemptions: float, running: float, waiting: float
) -> Iterator[Metric]:
    """The same values under vLLM v1's names and labels."""
    labels, values = ["model_name", "engine"], [model_name, "0"]
    for kind, name, doc, value in (
        (GaugeMetricFamily, "kv_cache_usage_perc", "Same as pagedkv_kv_cache_usage_perc.", c["usage"]),
        (
            CounterMetricFamily,
            "prefix_cache_queries",
            "Same as pagedkv_prefix_cache_queries.",
            c["prefix_queries"],
        ),
        (CounterMetricFamily, "prefix_cache_hits", "Same as pagedkv_prefix_cache_hits.", c["prefix_hits"]),
        (CounterMetricFamily, "num_preemptions", "Same as pagedkv_num_preemptions.", preemptions),
        (GaugeMetricFamily, "num_requests_running", "Same as pagedkv_num_requests_running.", running),
        (GaugeMetricFamily, "num_requests_waiting", "Same as pagedkv_num_requests_waiting.", waiting),
    ):
        family = kind(f"vllm:{name}", doc, labels=labels)
        family.add_metric(values, value)
        yield family
