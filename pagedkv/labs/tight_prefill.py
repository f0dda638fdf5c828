"""A prompt in chunks in a full pool (notebook 05b, section 6), read one small view at a time.

`TightRun` serves two requests to the end in a small pool with a small token budget, with
chunked prefill and preemption by recompute, as vLLM v1's `Scheduler.schedule()` does
(vllm/v1/core/sched/scheduler.py). It keeps, for every step, the running list before it, the
pool's page events, the block tables and counts after it, and why the waiting queue's head
was not admitted. Each view prints one small fact of the run from what it kept: the page
counts a step, what a request holds, who is preempted and why, where its pages go, why it
waits and what its resume recomputes.

Leaves out: timing and swap (the run preempts by recompute only).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

from pagedkv.core.plumbing.events import Event
from pagedkv.core.plumbing.words import count
from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.engine.scheduler import Scheduler
from pagedkv.engine.scheduler_output import Refusal, StepRecord
from pagedkv.model.tinylm import TinyLM

# req id -> (prompt text, max_new_tokens), in arrival order
PAIR = {"chat2": ("Hi", 24), "long2": ("A long prompt is prefilled in chunks of 8.", 4)}


class TightRun:
    """Serve `requests` (req id -> (prompt text, new tokens)) to the end in `num_pages` pages
    of `page_size` tokens with a token budget of `budget` a step, keeping every step."""

    def __init__(
        self,
        model: TinyLM,
        requests: Mapping[str, tuple[str, int]] = PAIR,
        *,
        num_pages: int = 12,
        page_size: int = 4,
        budget: int = 8,
    ) -> None:
        pool = KVCachePool(model.cache_config(num_pages=num_pages, page_size=page_size))
        sched = Scheduler(
            SequenceManager(pool), model, max_num_seqs=len(requests), max_num_batched_tokens=budget
        )
        self.scheduler, self.pool, self.page_size = sched, pool, page_size
        # The tables' order: latest arrival first, the request the running list preempts.
        self.req_ids: list[str] = list(requests)[::-1]
        self.events: list[Event] = []  # the scheduler's: preempt, resume
        self.records: list[StepRecord] = []
        self.page_events: dict[int, list[Event]] = {}  # step -> the pool's events in it
        self.running: dict[int, list[Hashable]] = {}  # step -> the running list before it
        self.before: dict[int, tuple[int, int]] = {}  # step -> (FREE, CACHED) before it
        self.after: dict[int, tuple[int, int]] = {}  # step -> (FREE, CACHED) after it
        self.tables: dict[int, dict[Hashable, list[int]]] = {}  # step -> req id -> block table after it
        self.computed: dict[int, dict[Hashable, int]] = {}  # step -> req id -> tokens computed after it
        self.refused: dict[int, Refusal] = {}  # step -> why the waiting queue's head was not admitted
        sched.add_listener(self.events.append)
        pending: list[Event] = []
        pool.add_listener(pending.append)
        for req_id, (text, new) in requests.items():
            sched.add_request(req_id, model.encode(text), new)
        while sched.has_unfinished:
            step = sched.stats.steps + 1
            self.running[step] = [s.req_id for s in sched.running]
            self.before[step] = (pool.num_free_pages, pool.num_cached_pages)
            self.records.append(sched.step())
            self.page_events[step], pending[:] = list(pending), []
            self.after[step] = (pool.num_free_pages, pool.num_cached_pages)
            live = [r for r in requests if r in sched.manager]
            self.tables[step] = {r: sched.manager.block_table(r) for r in live}
            self.computed[step] = {r: sched.manager.get(r).num_tokens for r in live}
            if sched.head_refused is not None:
                self.refused[step] = sched.head_refused
        self.same = all(sched.outputs[r] == model.generate_reference(t, n) for r, (t, n) in requests.items())

    def _pages(self, step: int, kind: str, req_id: Hashable | None = None) -> list[int]:
        """The pages of the step's events of `kind` (of `req_id`, if given), in event order."""
        return [e.page_id for e in self.page_events[step] if e.kind == kind and req_id in (None, e.seq_id)]

    def table_rows(self) -> list[list[object]]:
        """One row per step that prefills or preempts, up to the last prefill: step, FREE,
        CACHED, then each request's pages after it, then what ran. A run of steps that only
        decode is one row ("after 24" for steps 9-24), with the counts after its last step and
        its evictions."""
        last = max(r.step for r in self.records if r.prefill)
        rows: list[list[object]] = []
        quiet: list[StepRecord] = []  # decode-only steps since the last row
        for rec in self.records[:last]:
            if not (rec.prefill or rec.preempted):
                quiet.append(rec)
                continue
            if quiet:
                evicted = sum(r.evicted_pages for r in quiet)
                first, step = quiet[0].step, quiet[-1].step
                what = f"steps {first}-{step}: {quiet[-1].decision}; {count(evicted, 'CACHED page')} evicted"
                rows.append(self._row(step, f"after {step}", what))
                quiet = []
            rows.append(self._row(rec.step, rec.step, rec.decision))
        return rows

    def table_columns(self) -> list[str]:
        """The header of `table_rows`: each request's pages in `req_ids` order."""
        return ["step", "FREE", "CACHED", *(f"{r} pages" for r in self.req_ids), "what ran"]

    def _row(self, step: int, label: object, what: str) -> list[object]:
        held = [len(self.tables[step].get(r, [])) for r in self.req_ids]
        return [label, *self.after[step], *held, what]

    def holds(self, step: int, req_id: Hashable) -> str:
        """What `req_id` holds after `step`: its block table, its tokens, its partial last page."""
        table, tokens = self.tables[step][req_id], self.computed[step][req_id]
        line = f"after step {step}: {req_id} holds pages {table}, its tokens 1-{tokens}"
        first = (len(table) - 1) * self.page_size + 1
        if tokens % self.page_size:
            line += f"\n  its last page, {table[-1]}, is partial: tokens {first}-{tokens}"
        return line

    def preempted(self, step: int) -> str:
        """Who needed pages at `step` and how many (the step's record names it), how many
        FREE and CACHED pages there were, and the victim: the last of the running list."""
        rec = self.records[step - 1]
        (victim, mode), short, running = rec.preempted[0], rec.short_of_pages[0], self.running[step]
        free, cached = self.before[step]
        first, last = short.first_token, short.last_token
        tokens = f"token {first}" if first == last else f"tokens {first}-{last}"
        return (
            f"step {step}: {short.req_id} needs {count(short.pages_needed, 'new page')} for its {tokens}; "
            f"{free} FREE, {cached} CACHED\n"
            f"  the running list is {running}: its last, {victim}, is preempted ({mode})"
        )

    def released(self, step: int, req_id: Hashable) -> str:
        """Where `req_id`'s pages went at `step`: full ones CACHED, in release order (tail
        first), the partial one FREE, and who took a FREE page back in the same step."""
        cached, freed = self._pages(step, "cache", req_id), self._pages(step, "free", req_id)
        line = f"step {step}: {req_id}'s full pages {cached} turn CACHED (tail first)"
        for page in freed:
            takers = [e.seq_id for e in self.page_events[step] if e.kind == "allocate" and e.page_id == page]
            line += f"\n  its partial page {page} turns FREE"
            line += f", and {takers[-1]} takes it" if takers and takers[-1] != req_id else ""
        return line

    def wait_columns(self, req_id: Hashable) -> list[str]:
        """The header of `wait_rows(req_id)`."""
        others = " or ".join(str(r) for r in self.req_ids if r != req_id)
        chunk = f"{req_id}'s next chunk"
        return [
            "step",
            f"{others} evicts page",
            chunk,
            "new pages",
            "FREE",
            "evictable CACHED",
            "its own hits",
        ]

    def wait_rows(self, req_id: Hashable) -> list[list[object]]:
        """One row per step `req_id` waited at the queue's head and the wait changed: the
        step, the page another request evicted in it, then from the pool's refusal at the
        step's admissions: its next chunk's tokens, the new pages they need, FREE, evictable
        CACHED pages and CACHED pages that are its own hits."""
        rows: list[list[object]] = []
        for step, why in self.refused.items():
            if why.req_id != req_id or why.own_hits is None:
                continue  # another request's refusal, or not the pool's (no counts)
            evicted = [p for p in self._pages(step, "evict") if p not in self._pages(step, "evict", req_id)]
            if rows and not evicted:
                continue  # nothing changed since the last row
            chunk = f"tokens {why.own_hits * self.page_size + 1}-{why.tokens}"
            counts = [why.pages_needed, why.free, why.evictable, why.own_hits]
            rows.append([step, ", ".join(map(str, evicted)) or "-", chunk, *counts])
        return rows

    def resumed(self, step: int, req_id: Hashable) -> str:
        """`req_id`'s resume at `step`: its prefix hits, the pages it takes, and the tokens it
        computes again from there on (in this step and the next ones)."""
        hits, taken = self._pages(step, "prefix_hit", req_id), self._pages(step, "allocate", req_id)
        evicted = [p for p in taken if p in self._pages(step, "evict", req_id)]
        took = f"takes pages {taken}" + (f" ({', '.join(map(str, evicted))} evicted)" if evicted else "")
        again = [r for r in self.records[step - 1 :] if r.recomputed_tokens]
        again = again[: next((i for i, r in enumerate(again) if r.step != step + i), len(again))]
        first = len(hits) * self.page_size + 1
        total = sum(r.recomputed_tokens for r in again)
        parts = " + ".join(str(r.recomputed_tokens) for r in again)
        said = (
            f"step {step} recomputes {parts}"
            if len(again) == 1
            else f"steps {step}-{again[-1].step} recompute {parts} = {total}"
        )
        return (
            f"step {step}: {req_id} resumes: prefix hits on pages {hits} (tokens 1-{first - 1}); {took}\n"
            f"  {said} tokens: its tokens {first}-{first + total - 1}, computed before"
        )
