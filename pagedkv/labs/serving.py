"""The paper's serving run: requests arriving over time, served contiguous or paged.

`bench memory` queues every request at time 0 (the offline setting). A serving experiment,
like the vLLM paper's (Kwon et al., SOSP 2023, Sec. 6), lets requests arrive by a Poisson
process of `arrival_rate` requests per second and measures memory and latency while the
engine works through them. Here the engine's clock is the cost model's (`pagedkv.labs.costs`):
each step of continuous batching takes `step_seconds` for the tokens it computes (linear
layers, the LM head, each prompt's attention), the K/V its decode tokens read and a fixed CPU
time, on a named model and GPU (default: the paper's OPT-13B on an A100-40GB, in the paper's
15,728 slots).

Per step every slot of the KV memory is counted in the paper's Fig. 2 categories, and the
counts are averaged weighted by the step's duration two ways: over the steps during which
requests wait (the system under load, the terms of `bench memory`) and, as `run_*`, over
the whole run (free memory included). Per request, the normalized latency is
(finish - arrival) / output tokens, the paper's latency metric (Sec. 6.1). The same
requests are served by `ContiguousKVCache` as the paper's Orca baselines (Sec. 6.1: a buddy
allocator; `max` reserves the model's 2,048 tokens, `pow2` the prompt plus the next power of
two of the output, `oracle` exactly the final length) and by the paged `Scheduler` in
bookkeeping-only mode.

Leaves out: the model's real speed (the step time is a calibrated roofline, not a profile),
chunked prefill, request timeouts, and the allocator overheads a real Orca would add.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from operator import attrgetter, itemgetter

import numpy as np

from pagedkv.core.config import CacheConfig
from pagedkv.core.plumbing.validation import check_number
from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.engine.scheduler import Scheduler
from pagedkv.labs import costs
from pagedkv.labs.contiguous import POLICIES, ContiguousKVCache, NoContiguousHoleError
from pagedkv.labs.parallel import run_all
from pagedkv.labs.workloads import Request

CATEGORIES = ("token_states", "reserved", "internal_fragmentation", "external_fragmentation", "free")
SYSTEMS = (*POLICIES, "paged")
# The two roundings land in different buckets: a policy's rounding stays inside the request's
# reservation (internal); the buddy allocator's rounding lies beyond it (external, the paper's)
LEGEND_LABELS = {
    "internal_fragmentation": "internal fragmentation:\ninside the request's\nreservation, unused",
    "external_fragmentation": "external fragmentation:\nallocator's rounding\nbeyond it, and holes",
}
PAPER_SLOTS = costs.paper_slots()  # 15,728: OPT-13B's 12 GB of KV on an A100-40GB (paper, Table 1)
PAPER = {"max": 20.4, "pow2": 26.8, "oracle": 38.2, "paged": 96.3}  # % holding token states
PAPER_EXTERNAL = {"max": 8.9, "pow2": 41.6, "oracle": 36.6}  # % "external fragmentation & others"
# The paper's Sec. 6.2 on its Fig. 12: vLLM sustains 1.7-2.7x the request rate of Orca (Oracle)
# and 2.7-8x that of Orca (Max) "while maintaining similar latencies".
PAPER_RATE_RATIOS = {"oracle": (1.7, 2.7), "max": (2.7, 8.0)}
# Recorded data, not computed here: the sustainable rates (requests/s) of the full run,
# `python -m pagedkv bench serving` (8,000 requests, seed 0, about an hour of arrivals like the
# paper's traces; docs/calibration.md, rows R1 and R2). The run takes minutes, so notebook 11
# quotes it from here; tests/test_calibration.py runs it again (slow) and compares.
FULL_RUN_RATES = {"max": 0.707, "oracle": 1.217, "paged": 2.519}
FULL_RUN_REQUESTS = 8000


def poisson_arrivals(num_requests: int, arrival_rate: float, seed: int = 0) -> np.ndarray:
    """Arrival times of a Poisson process of `arrival_rate` requests per unit of time
    (exponential gaps, the first request at its first gap): float64 [num_requests], sorted."""
    if check_number("arrival_rate", arrival_rate, 0.0) == 0:
        raise ValueError(f"arrival_rate must be a finite number > 0, got {arrival_rate!r}")
    gaps = np.random.default_rng([seed, 3]).exponential(1 / arrival_rate, num_requests)
    return np.cumsum(gaps)


class _Meter:
    """Per step: its duration, whether requests waited (loaded), the batch and the memory
    categories; `result` averages them, weighted by duration, over loaded steps and the run."""

    def __init__(self, num_slots: int) -> None:
        self.num_slots = num_slots
        self.seconds: list[float] = []
        self.loaded: list[bool] = []
        self.categories: list[tuple[int, ...]] = []  # slots per category (CATEGORIES order)
        self.batches: list[int] = []  # requests running, loaded steps only
        self.latency: list[float] = []  # normalized: seconds per output token
        self.in_system: list[float] = []  # seconds from a request's arrival to its finish
        self.memory = True
        self._values = itemgetter(*CATEGORIES)

    def sample(self, categories: dict | None, seconds: float, batch: int, loaded: bool) -> None:
        """One step; `categories` None: latency only (the memory shares are not reported)."""
        if categories is None:
            self.memory = False
        else:
            self.categories.append(self._values(categories))
        self.seconds.append(seconds)
        self.loaded.append(loaded)
        if loaded:
            self.batches.append(batch)

    def finished(self, seconds_in_system: float, output_tokens: int) -> None:
        """A request finished `seconds_in_system` after it arrived, with `output_tokens` tokens."""
        self.in_system.append(seconds_in_system)
        self.latency.append(seconds_in_system / output_tokens)

    def result(self, clock: float) -> dict:
        out: dict = {}
        seconds, loaded = np.array(self.seconds), np.array(self.loaded, dtype=bool)
        loaded_seconds = float(_step_sum(seconds[loaded]))
        if self.memory:
            slot_seconds = np.array(self.categories, dtype=np.int64) * seconds[:, None]
            totals, run_totals = _step_sum(slot_seconds[loaded]), _step_sum(slot_seconds)
            scale = 100.0 / (self.num_slots * loaded_seconds) if loaded_seconds else 0.0
            out.update({name: float(totals[k] * scale) for k, name in enumerate(CATEGORIES)})
            run_scale = 100.0 / (self.num_slots * float(_step_sum(seconds)))
            out.update({f"run_{name}": float(run_totals[k] * run_scale) for k, name in enumerate(CATEGORIES)})
        out.update(
            normalized_latency=float(np.mean(self.latency)),  # s / token
            time_in_system=float(np.mean(self.in_system)),  # s, arrival to finish (Little's law)
            busy_seconds=float(_step_sum(seconds)),  # the steps' seconds, idle gaps left out
            mean_batch=float(np.mean(self.batches)) if self.batches else 0.0,
            loaded_share=loaded_seconds / clock,
            seconds=clock,
        )
        return out


def _step_sum(values: np.ndarray):
    """Column sums of `values`, added one step after the other (np.cumsum adds in order, unlike
    np.sum): the same floats as a running total kept step by step."""
    return np.cumsum(values, axis=0)[-1] if len(values) else np.zeros(values.shape[1:])


def serve(
    requests: Sequence[Request],
    system: str,
    *,
    arrival_rate: float,
    num_slots: int = PAPER_SLOTS,
    page_size: int = 16,
    max_seq_len: int = 2048,
    max_num_seqs: int = 256,
    model: str = "OPT-13B",
    gpu: str = "A100-40GB",
    seed: int = 0,
    memory: bool = True,
) -> dict:
    """Serve the requests arriving at `arrival_rate` per second with one system ("max",
    "pow2", "oracle" or "paged"); memory shares in % of slots and latency in s / token.
    `memory=False` skips the memory accounting (the same run and latencies, no shares)."""
    if system not in SYSTEMS:
        raise ValueError(f"system must be one of {SYSTEMS}, got {system!r}")
    clock = costs.step_clock(model, gpu)  # validates the names first
    arrivals = poisson_arrivals(len(requests), arrival_rate, seed)
    if system == "paged":
        sizes = (num_slots, page_size, max_seq_len, max_num_seqs)
        return _serve_paged(requests, arrivals, sizes, clock, memory)
    return _serve_contiguous(requests, arrivals, num_slots, system, max_seq_len, max_num_seqs, clock, memory)


def serve_grid(
    requests: Sequence[Request], grid: list[float], options: dict, workers: int = 1, memory_at=None
) -> dict:
    """`serve` every system at every rate of `grid`: {system: {rate: result}}. The memory
    shares are measured at the rates of `memory_at` (all rates when None); elsewhere the run
    gives its latencies only (`serve(memory=False)`: the same run). With workers > 1 the runs
    go to that many processes (`parallel.run_all`), the paged ones first (they take longest);
    each run is the same computation, so the results are the same."""
    measured = set(grid if memory_at is None else memory_at)
    jobs = [(system, rate, rate in measured) for rate in grid for system in SYSTEMS]
    results = run_all(
        _serve_job,
        jobs,
        (requests, options),
        workers,
        longest_first=lambda job: job[0] != "paged",
        desc="serving",
    )
    data: dict = {s: {} for s in SYSTEMS}
    for (system, rate, _), result in zip(jobs, results):  # rates in grid order, as a serial run fills them
        data[system][rate] = result
    return data


def _serve_job(job: tuple[str, float, bool], requests: Sequence[Request], options: dict) -> dict:
    system, rate, memory = job
    return serve(requests, system, arrival_rate=rate, memory=memory, **options)


def _serve_contiguous(
    requests, arrivals, num_slots, policy, max_seq_len, max_num_seqs, step_clock, memory
) -> dict:
    arena = ContiguousKVCache(num_slots, policy, max_seq_len, allocator="buddy", pow2_of="output")
    meter = _Meter(num_slots)
    arrivals = arrivals.tolist()  # floats: one at a time, cheaper to read than numpy's
    prompt_len = [r.prompt_len for r in requests]
    final_len = [r.final_len for r in requests]
    waiting: deque[int] = deque()  # request indices, FCFS
    # A running request gains one token per step, so the step it ends in is known when it is
    # admitted: step -> the requests that reach final_len in it, in admission order.
    finishing: dict[int, list[int]] = {}
    num_running = held = 0  # requests running, and the tokens they hold
    clock, nxt, step = 0.0, 0, 0
    blocked = -1  # the queue's head when it last found no hole; nothing freed since
    while nxt < len(requests) or waiting or num_running:
        if not waiting and not num_running:
            clock = max(clock, arrivals[nxt])
        while nxt < len(requests) and arrivals[nxt] <= clock:
            waiting.append(nxt)
            nxt += 1
        prompts, decoding, read = [], num_running, held  # K/V the decode tokens read
        while waiting and num_running < max_num_seqs and waiting[0] != blocked:
            i = waiting[0]
            try:
                arena.add(requests[i].req_id, prompt_len[i], final_len[i])
            except NoContiguousHoleError:
                blocked = i  # it cannot fit before a reservation is freed
                break
            waiting.popleft()
            finishing.setdefault(step + final_len[i] - prompt_len[i], []).append(i)
            num_running, held = num_running + 1, held + prompt_len[i]
            prompts.append(prompt_len[i])
        seconds = step_clock(decoding + sum(prompts), read, prompts, num_running)
        upcoming = waiting[0] if waiting else min(nxt, len(requests) - 1)
        accounting = arena.shares(final_len[upcoming], prompt_len[upcoming]) if memory else None
        meter.sample(accounting, seconds, num_running, bool(waiting))
        clock += seconds
        for i in finishing.pop(step, ()):  # one decode step: finish, or hold one more token
            arena.free(requests[i].req_id)
            blocked = -1
            meter.finished(clock - arrivals[i], requests[i].max_new_tokens)
            num_running, held = num_running - 1, held - final_len[i]
        held += num_running
        if memory:  # the tokens held count only in the memory shares
            arena.append_all()
        step += 1
    return meter.result(clock)


def paged_scheduler(num_slots: int, page_size: int, max_num_seqs: int, max_seq_len: int) -> Scheduler:
    """A Scheduler over a bookkeeping-only paged pool of `num_slots` slots, prefix caching
    off. Its token budget is the whole memory, so, like the contiguous arenas, a step admits
    every request that fits."""
    config = CacheConfig.bookkeeping(num_slots // page_size, page_size, enable_prefix_caching=False)
    seqs = SequenceManager(KVCachePool(config))
    return Scheduler(seqs, max_num_seqs=max_num_seqs, max_num_batched_tokens=max(num_slots, max_seq_len))


def paged_categories(sched: Scheduler) -> dict[str, int]:
    """Slots of `sched`'s pool per memory category (CATEGORIES), read from its live sequences.

    No prefix caching and no forks, so no page is shared: the slots holding tokens are the
    sequences' tokens (cheaper than reading every page); the rest of their pages is internal
    fragmentation."""
    held = sum(map(len, map(attrgetter("tokens"), sched.manager.sequences.values())))
    page_size = sched.pool.config.page_size
    categories = dict.fromkeys(CATEGORIES, 0)
    categories["token_states"] = held
    categories["internal_fragmentation"] = sched.pool.num_active_pages * page_size - held
    categories["free"] = sched.pool.num_available_pages * page_size
    return categories


def _serve_paged(requests, arrivals, sizes, step_clock, memory) -> dict:
    num_slots, page_size, max_seq_len, max_num_seqs = sizes
    sched = paged_scheduler(num_slots, page_size, max_num_seqs, max_seq_len)
    meter, clock, nxt = _Meter(sched.pool.config.num_slots), 0.0, 0
    arrivals = arrivals.tolist()  # floats: one at a time, cheaper to read than numpy's
    index = {r.req_id: i for i, r in enumerate(requests)}
    while nxt < len(requests) or sched.has_unfinished:
        if not sched.has_unfinished:
            clock = max(clock, arrivals[nxt])
        while nxt < len(requests) and arrivals[nxt] <= clock:
            r = requests[nxt]
            sched.add_request(r.req_id, r.prompt_token_ids, r.max_new_tokens, seed=r.seed)
            nxt += 1
        record = sched.step()
        categories = paged_categories(sched)
        # K/V read: what the live requests hold, plus the finished ones (freed at the step's end)
        read = categories["token_states"] + sum(requests[index[r]].final_len for r in record.finished)
        prompts = [n for _, n in record.prefill]
        seconds = step_clock(record.num_batched_tokens, read - sum(prompts), prompts, len(record.sampled))
        meter.sample(categories if memory else None, seconds, len(sched.running), bool(sched.waiting))
        clock += seconds
        for req_id in record.finished:
            i = index[req_id]
            meter.finished(clock - arrivals[i], requests[i].max_new_tokens)
    out = meter.result(clock)
    out["preemptions"] = sched.stats.preemptions
    return out


LATENCY_BOUND = 0.5  # s / token: "sustained" means below this (pagedkv's choice; the paper's
# Fig. 12 curves turn up steeply, so the ratios move little with the bound)


def sustainable_rate(rates: list[float], latencies: list[float], bound: float = LATENCY_BOUND) -> float:
    """The request rate at which the normalized latency first reaches `bound`, interpolated
    linearly between the measured rates; the top rate if it never does (a lower bound), the
    first if it starts above. Example: rates [1, 2, 3], latencies [0.1, 0.3, 0.9] -> 2.333."""
    for i, (rate, latency) in enumerate(zip(rates, latencies, strict=True)):
        if latency >= bound:
            if i == 0:
                return rate
            r0, l0 = rates[i - 1], latencies[i - 1]
            return r0 + (rate - r0) * (bound - l0) / (latency - l0)
    return rates[-1]


def latency_curve(
    rates: list[float], latencies: list[float], bound: float = LATENCY_BOUND, steps: int = 24
) -> tuple[list[float], list[float]]:
    """The line `sustainable_rate` reads its crossing from, as points to draw: between two
    measured rates, latency linear in the rate (on a log latency axis that line is a curve, so
    each segment is split into `steps` pieces), and the bound's crossing itself as a point.
    Example: rates [1, 2], latencies [0.3, 0.7], steps 1 -> [1, 1.5, 2], [0.3, 0.5, 0.7]."""
    xs, ys = [rates[0]], [latencies[0]]
    crossing = sustainable_rate(rates, latencies, bound)
    for (r0, l0), (r1, l1) in zip(zip(rates, latencies), zip(rates[1:], latencies[1:]), strict=False):
        for k in range(1, steps + 1):
            rate = r1 if k == steps else r0 + (r1 - r0) * k / steps  # the measured rate exactly
            if xs[-1] < crossing < rate and l0 < bound <= l1:
                xs.append(crossing)
                ys.append(bound)
            xs.append(rate)
            ys.append(l1 if k == steps else l0 + (l1 - l0) * (rate - r0) / (r1 - r0))
    return xs, ys


RATE_DIGITS = 3  # decimals of a printed sustainable rate: enough that the printed ratios follow


def rate_ratio(rate: float, other: float) -> float:
    """`rate / other` of the two rates as printed (rounded to RATE_DIGITS decimals), so a ratio
    printed beside them is their quotient. Example: 3.53108, 1.37485 -> 3.531 / 1.375 = 2.568."""
    return round(rate, RATE_DIGITS) / round(other, RATE_DIGITS)
