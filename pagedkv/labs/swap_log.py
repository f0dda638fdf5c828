"""Each swap preemption of a run, page by page: what went out, what came back, and why.

`bench preempt` reports swap bytes as totals. `swap_log` serves the same requests with swap
preemption and lists every preemption: the pages copied out (all of the victim's pages, its
partial last page included), and at its resume the pages copied back. The two differ by the
victim's full pages that were still CACHED when it came back: those are prefix hits, not
copies. A partial page has no block hash, so it always comes back from swap; a full page comes
back only if it was evicted while the request waited.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.engine.scheduler import Scheduler
from pagedkv.labs.workloads import Request, token_budget
from pagedkv.model.tinylm import TinyLM


@dataclass
class SwapPreemption:
    """One swap preemption and the resume that ended it (step numbers count from 1)."""

    req_id: Hashable
    step: int  # the step that preempted it
    tokens: int  # tokens whose K/V it held then
    pages_out: int  # pages copied to the swap space: every page it held
    partial_out: int  # of those, a partial last page (0 or 1)
    resume_step: int = 0
    pages_back: int = 0  # pages copied back at the resume

    @property
    def full_out(self) -> int:
        """Full pages copied out: hashed, so they stayed CACHED in the pool too."""
        return self.pages_out - self.partial_out

    @property
    def prefix_hits(self) -> int:
        """Full pages still CACHED at the resume: found by the prefix cache, not copied back."""
        return self.pages_out - self.pages_back

    @property
    def evicted(self) -> int:
        """Full pages evicted while it waited: copied back, like the partial page."""
        return self.pages_back - self.partial_out

    def row(self) -> list[object]:
        """Its row under `COLUMNS`."""
        return [
            self.req_id,
            self.step,
            self.tokens,
            self.pages_out,
            self.partial_out,
            self.resume_step,
            self.prefix_hits,
            self.evicted,
            self.pages_back,
        ]


COLUMNS = [
    "request",
    "out at step",
    "tokens in pages",
    "pages out",
    "partial",
    "back at step",
    "prefix hits",
    "evicted",
    "pages back",
]


def swap_log(
    model: TinyLM,
    requests: list[Request],
    *,
    num_pages: int,
    page_size: int = 16,
    max_num_seqs: int = 16,
    max_num_batched_tokens: int | None = None,
    swap_space_pages: int = 1024,
) -> list[SwapPreemption]:
    """Serve `requests` with swap preemption (as `preempt.compare`'s swap run, same
    defaults) and return every preemption, in order, with its resume."""
    if max_num_batched_tokens is None:
        max_num_batched_tokens = token_budget(requests)
    pool = KVCachePool(model.cache_config(num_pages, page_size))
    sched = Scheduler(
        SequenceManager(pool),
        model,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        preemption_mode="swap",
        swap_space_pages=swap_space_pages,
    )
    sched.add_requests(requests)
    resumed: list[Hashable] = []
    sched.add_listener(lambda e: resumed.append(e.seq_id) if e.kind == "resume" else None)
    log: list[SwapPreemption] = []
    waiting: dict[int, SwapPreemption] = {}  # swap slot -> the preemption that holds it
    while sched.has_unfinished:
        held = {s.req_id: (s.num_computed_tokens, sched.manager.block_table(s.req_id)) for s in sched.running}
        output = sched.schedule()
        step = output.step
        for slot, _ in output.swap_in:
            entry = waiting.pop(slot)
            entry.pages_back += 1
        for req_id, mode in output.preempted:
            if mode != "swap":
                raise RuntimeError(f"{req_id!r} fell back to recompute: the swap space is full")
            tokens, table = held[req_id]
            entry = SwapPreemption(req_id, step, tokens, len(table), int(tokens % page_size != 0))
            log.append(entry)
            waiting.update({slot: entry for page, slot in output.swap_out if page in table})
        for req_id in resumed:  # the same step's resumes (one whose pages all hit copies none)
            entry = next(e for e in log if e.req_id == req_id and not e.resume_step)
            entry.resume_step = step
        resumed.clear()
        sched.update_from_output(output, sched.runner.execute(output))
    return log


def swap_totals(log: list[SwapPreemption], page_bytes: int) -> list[list[object]]:
    """A swap run's accounting, one quantity a row with one number: pages out = prefix hits
    + pages back, pages back = partial + evicted, and the bytes each way (`page_bytes` a page)."""
    out, hits, back = (sum(getattr(e, a) for e in log) for a in ("pages_out", "prefix_hits", "pages_back"))
    return [
        ["pages out (every page a victim held)", out],
        ["bytes out", out * page_bytes],
        ["prefix hits at the resume (not copied)", hits],
        ["pages back (copied)", back],
        ["  of them partial", sum(e.partial_out for e in log)],
        ["  of them evicted", sum(e.evicted for e in log)],
        ["bytes back", back * page_bytes],
    ]
