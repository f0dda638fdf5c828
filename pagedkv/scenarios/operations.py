"""The operations of a scenario run: what each `Action` op does to the pool and the model.

`ScenarioOperations` is the working half of `pagedkv.scenarios.run.ScenarioRun`: one method
per op (`_add`, `_decode`, `_fork`, `_free`, `_beam`, `_request`, `_schedule`, `_abort`),
each checking everything it can fail on before its first change, then driving the real
`SequenceManager`, `Scheduler` and TinyLM (every token computed through the paged cache)
and writing what happened into the step's `ActionRecord` note. `ScenarioRun` records,
snapshots and replays; this module only acts.

vLLM's engine core does the same per request (add_request, abort_request, one scheduler
step, sampling); beam search is its beam-search front end. Leaves out: recording,
snapshots and time travel (`pagedkv.scenarios.run`).
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from pagedkv.core.plumbing.words import count, noun
from pagedkv.core.pool import KVCachePool, OutOfPagesError
from pagedkv.core.sequence import SequenceManager
from pagedkv.engine.scheduler import Scheduler
from pagedkv.model.tinylm import TinyLM
from pagedkv.scenarios.actions import Action, ActionRecord, drop_words
from pagedkv.scenarios.text import waiting_words


class ScenarioOperations:
    """The per-op handlers `ScenarioRun._apply` dispatches to (by `_{action.op}`)."""

    pool: KVCachePool
    seqs: SequenceManager
    model: TinyLM
    scheduler: Scheduler | None
    rng: np.random.Generator
    logits: dict[Hashable, np.ndarray]  # seq id -> last-position logits [vocab]
    scores: dict[Hashable, float]  # beam id -> cumulative log-probability
    seen_ids: set[Hashable]  # every sequence id this run admitted or forked
    steps: list[Action]  # the scenario's own steps, in order
    records: list[ActionRecord]  # what each applied action did
    num_pages: int
    page_size: int
    _progressed: bool  # the last "schedule" computed a token or preempted

    @property
    def own_sequences(self) -> list[Hashable]:
        """The live sequences this run decodes itself: every one without a scheduler; with one,
        those you added or forked (the scheduler decodes its own requests, on Step)."""
        return [s for s in self.seqs.sequences if s in self.logits]

    @property
    def unfinished_requests(self) -> list[Hashable]:
        """The scheduler's requests not finished yet (waiting, running or preempted)."""
        if self.scheduler is None:
            return []
        return [r for r, state in self.scheduler.requests.items() if state.status != "finished"]

    def new_id(self, prefix: str) -> str:
        """The first of prefix1, prefix2, ... that no sequence of this run has used, nor any
        of the scenario's own steps names (a learner's request must not take the id of one
        the scenario adds later)."""
        taken = self.seen_ids | {step.seq_id for step in self.steps}
        return next(f"{prefix}{k}" for k in range(1, len(taken) + 2) if f"{prefix}{k}" not in taken)

    def _scheduled(self, seq_id: Hashable) -> bool:
        """The scheduler holds this id (a request waiting or running)."""
        if self.scheduler is None:
            return False
        state = self.scheduler.requests.get(seq_id)
        return state is not None and state.status != "finished"

    def _check_new_id(self, seq_id: Hashable) -> None:
        # The manager refuses a live id itself; a request still waiting in the scheduler is
        # not in the manager yet, and admitting its id here would break the scheduler's step.
        if self._scheduled(seq_id):
            raise ValueError(f"{seq_id!r} is a request of the scheduler; pick another id")

    def _add(self, action: Action, record: ActionRecord) -> None:
        self._check_new_id(action.seq_id)
        tokens = (self.seqs.get(action.parent).token_ids if action.parent is not None else []) + (
            self.model.encode(action.text)
        )
        record.lengths[action.seq_id] = len(tokens)  # kept if refused: `_never_admitted` says why
        record.cached_tokens = self.seqs.add(action.seq_id, tokens)
        self.seen_ids.add(action.seq_id)
        self.logits[action.seq_id] = self.model.forward(self.seqs, [action.seq_id])[0]
        n = self.seqs.get(action.seq_id).num_tokens
        record.note = (
            f"{action.seq_id}: {record.cached_tokens} of {n} prompt tokens from the "
            f"prefix cache, block table {self.seqs.block_table(action.seq_id)}"
        )

    def _never_admitted(self, seq_id: str) -> str:
        """Why a request refused at admission never ran: its prompt needs more pages than the
        pool has, or there was no room for them when it arrived."""
        n = next((r.lengths[seq_id] for r in self.records if r.refused and seq_id in r.lengths), 0)
        pages = -(-n // self.page_size)
        said = f"{seq_id} never admitted: its {n}-token prompt needs {pages} pages"
        if pages > self.num_pages:
            return f"{said}; the pool has {self.num_pages}"
        return f"{said}, and too few were FREE or CACHED when it came"

    def _sample(self, seq_id: Hashable, temperature: float) -> int:
        return self.model.sample(self.logits[seq_id][None], temperature, self.rng)[0]

    def _decode(self, action: Action, record: ActionRecord) -> None:
        # The scheduler decodes its own sequences: "everyone" means the ones this run drives.
        wanted = action.seq_ids or tuple(self.own_sequences)
        live = [s for s in wanted if s in self.seqs]
        if not live:
            done = [str(s) for s in wanted if s in self.seen_ids]  # admitted once: finished since
            never = [str(s) for s in wanted if s not in self.seen_ids]  # refused at admission
            said = [f"{', '.join(done)} finished"] if done else []
            said += [self._never_admitted(s) for s in never]
            record.note = f"nothing to decode: {'; '.join(said) or 'no live sequence'}"
            return
        # Everything is checked before the first token is sampled or appended, so a refused
        # step leaves no uncomputed token in an indexed page and no draw taken from the rng.
        for seq_id in live:
            if seq_id not in self.logits:
                raise ValueError(f"{seq_id!r} is decoded by the scheduler, not by this step")
        needed = self.seqs.pages_needed_for_decode(live)  # also refuses a repeated id
        if needed > self.pool.num_available_pages:
            full = [str(s) for s in live if self.seqs.get(s).num_tokens % self.seqs.page_size == 0]
            shared = [str(s) for s in live if str(s) not in full and self.seqs.pages_needed_to_append(s)]
            have = self.pool.num_available_pages  # FREE, or CACHED and evictable
            raise OutOfPagesError(
                f"out of pages: {_why_pages(full, shared)}, so the step needs "
                f"{count(needed, 'new page')}, and {have} {'is' if have == 1 else 'are'} "
                "FREE or CACHED (a scheduler would preempt)"
            )
        for seq_id in live:
            token = self._sample(seq_id, action.temperature)
            record.slots[seq_id] = self.seqs.append_slot(seq_id, token)
            record.numbers[seq_id] = len(self.seqs.slot_mapping(seq_id))
            record.tokens[seq_id] = token
            record.appends.append((len(record.events), seq_id))
        self._compute(live)

    def _compute(self, seq_ids: list[Hashable]) -> None:
        if seq_ids:
            for seq_id, row in zip(seq_ids, self.model.forward(self.seqs, seq_ids), strict=True):
                self.logits[seq_id] = row

    def _check_unscheduled(self, seq_id: Hashable) -> None:
        if self._scheduled(seq_id):
            raise ValueError(f"{seq_id!r} belongs to the scheduler; it cannot be forked or finished")

    def _fork(self, action: Action, record: ActionRecord) -> None:
        self._check_unscheduled(action.parent)
        self._check_new_id(action.seq_id)
        self.seqs.fork(action.parent, action.seq_id)
        self.seen_ids.add(action.seq_id)
        self.logits[action.seq_id] = self.logits[action.parent]
        if action.parent in self.scores:
            self.scores[action.seq_id] = self.scores[action.parent]
        pages = len(self.seqs.block_table(action.seq_id))
        record.note = f"{action.seq_id} shares all {pages} pages of {action.parent}"

    def _free(self, action: Action, record: ActionRecord) -> None:
        self._check_unscheduled(action.seq_id)
        table = self.seqs.block_table(action.seq_id)
        shared = sum(1 for page in table if self.pool.ref_count(page) > 1)
        # in release order (tail first), as the log's events list them
        fates = self._fates([page for page in reversed(table) if self.pool.ref_count(page) == 1])
        self.seqs.free(action.seq_id)
        del self.logits[action.seq_id]
        self.scores.pop(action.seq_id, None)
        if record.action.op == "free":  # not a beam dropped inside a beam step
            record.note = _finish_note(action.seq_id, len(table), shared) + fates

    def _fates(self, pages: list[int]) -> str:
        """Why each page a finish releases turns CACHED or FREE (the pool's rule, `free_blocks`):
        a full page indexed under its hash stays CACHED for reuse; a partial page has no hash,
        and a full copy whose hash indexes another page is not the one a hit would find: FREE."""
        table, index = self.pool.table, self.pool.prefix_index
        kept = [p for p in pages if index.holds_page(p)]
        partial = [p for p in pages if p not in kept and table.num_tokens(p) < self.seqs.page_size]
        copies = [p for p in pages if p not in kept and p not in partial]
        said = []
        if kept:
            said.append(f"{_pages(kept)} CACHED (full and hashed: kept for reuse)")
        if partial:
            said.append(f"{_pages(partial)} FREE (partial: no hash)")
        if copies:
            said.append(f"{_pages(copies)} FREE (full, but another page holds its hash)")
        return "; " + ", ".join(said) if pages else ""

    def _beam(self, action: Action, record: ActionRecord) -> None:
        """One beam-search step: every beam proposes its best tokens, the `width` best
        continuations overall survive; a beam chosen twice is forked (its pages shared), a
        beam not chosen is freed. vLLM's v0 beam search managed beams the same way."""
        group = f"{action.seq_id}."
        beams = [s for s in self.seqs.sequences if str(s).startswith(group)]
        if not beams:
            raise ValueError(f"no live beam of group {action.seq_id!r}")
        for beam in beams:
            if beam not in self.logits:
                raise ValueError(f"{beam!r} is decoded by the scheduler, not by a beam step")
        chosen = self._best_continuations(beams, action.width)
        picked = {k for _, k, _ in chosen}
        self._check_room_for_beams(len(chosen), [b for k, b in enumerate(beams) if k not in picked])
        for beam in (b for k, b in enumerate(beams) if k not in picked):
            table = self.seqs.block_table(beam)
            shared = [p for p in table if self.pool.ref_count(p) > 1]
            record.drops.append((len(record.events), drop_words(beam, table, shared)))
            self._free(Action("free", beam), record)
        taken, plan = set(), []
        for score, k, token in chosen:
            beam = beams[k]
            if beam in taken:  # a second continuation of the same beam: fork it
                child = self.new_id(group)
                self.seqs.fork(beam, child)
                self.seen_ids.add(child)
                self.logits[child] = self.logits[beam]
                beam = child
            taken.add(beam)
            plan.append((beam, token, score))
        for beam, token, score in plan:
            record.slots[beam] = self.seqs.append_slot(beam, token)
            record.numbers[beam] = len(self.seqs.slot_mapping(beam))
            record.tokens[beam] = token
            record.appends.append((len(record.events), beam))
            self.scores[beam] = score
        self._compute(list(record.tokens))

    def _best_continuations(self, beams: list[Hashable], width: int) -> list[tuple[float, int, int]]:
        """The `width` best (score, beam index, token) over every beam's `width` best tokens,
        by total log-probability (ties: the earlier beam, then the smaller token)."""
        candidates = []  # (score, beam index, token)
        for k, beam in enumerate(beams):
            z = self.logits[beam].astype(np.float64)
            logp = z - z.max() - np.log(np.exp(z - z.max()).sum())
            for token in np.argsort(-logp, kind="stable")[:width]:
                candidates.append((self.scores.get(beam, 0.0) + float(logp[token]), k, int(token)))
        return sorted(candidates, key=lambda c: (-c[0], c[1], c[2]))[:width]

    def _check_room_for_beams(self, num_survivors: int, dropped: list[Hashable]) -> None:
        """Each survivor appends one token: at most one page each (a new page or a copy).
        Like vLLM v0 (`can_append_slots`: a free block per sequence), the step runs only
        when that many pages can be had once the `dropped` beams are freed, so it never
        stops halfway."""
        holders: dict[int, int] = {}  # page id -> dropped block tables holding it
        for page in (p for beam in dropped for p in self.seqs.block_table(beam)):
            holders[page] = holders.get(page, 0) + 1
        released = sum(1 for p, n in holders.items() if self.pool.ref_count(p) == n)
        if num_survivors > self.pool.num_available_pages + released:
            raise OutOfPagesError(
                f"out of pages: {num_survivors} beams may each need a new page and "
                f"{self.pool.num_available_pages + released} can be had"
            )

    def _request(self, action: Action, record: ActionRecord) -> None:
        if self.scheduler is None:
            raise ValueError("this scenario has no scheduler to queue a request with")
        if action.seq_id in self.seqs:
            raise ValueError(f"{action.seq_id!r} is a live sequence; pick another id")
        self.scheduler.add_request(action.seq_id, self.model.encode(action.text), action.width)
        self.seen_ids.add(action.seq_id)
        record.note = f"{action.seq_id} waits in the scheduler's queue ({len(action.text)} prompt tokens)"

    def _schedule(self, action: Action, record: ActionRecord) -> None:
        """One scheduler step: decode the running, admit the waiting, preempt when short."""
        if self.scheduler is None:
            raise ValueError("this scenario has no scheduler")
        step = self.scheduler.step()
        self._progressed = bool(step.num_batched_tokens or step.preempted)  # chunks count
        record.tokens = dict(step.sampled)
        # A request's token is sampled before a finish releases its pages: its log line goes
        # just before the first release event of that request (or after everything).
        for seq_id in step.sampled:
            end = next(
                (
                    k
                    for k, e in enumerate(record.events)
                    if e.seq_id == seq_id and e.kind in ("cache", "free") and seq_id in step.finished
                ),
                len(record.events),
            )
            record.appends.append((end, seq_id))
        record.appends.sort(key=lambda mark: mark[0])
        record.waits, said = waiting_words(self.scheduler, step), step.decision
        if said == "idle" and self.scheduler.has_unfinished:
            said = self._stalled()  # not idle: requests wait, and the note says for what
        record.note = "scheduler: " + said

    def _stalled(self) -> str:
        """Why a step with unfinished requests ran nothing: pages held by your sequences, if any."""
        names = ", ".join(map(str, self.unfinished_requests))
        held = [s for s in self.own_sequences if self.seqs.block_table(s)]
        if not held:
            return f"{names} wait for free pages"
        yours = ", ".join(map(str, held))
        if len(held) == 1:
            return f"{names} wait for pages your sequence {yours} holds (Finish it)"
        return f"{names} wait for pages your sequences {yours} hold (Finish one of yours)"

    def _abort(self, action: Action, record: ActionRecord) -> None:
        """End a request of the scheduler: its pages go as a finish releases them."""
        if self.scheduler is None or action.seq_id not in self.scheduler.requests:
            raise ValueError(f"{action.seq_id!r} never reached the scheduler on this pool: nothing to abort")
        was = self.scheduler.request(action.seq_id).status
        if not self.scheduler.abort(action.seq_id):
            raise ValueError(f"{action.seq_id!r} already finished")
        record.note = f"{action.seq_id} aborted ({was}): full pages stay CACHED, like a finish"


def _why_pages(full: list[str], shared: list[str]) -> str:
    """Why a decode step needs pages, in words: 'the last page of a is full', 'the last pages
    of a and b are full', 'b writes into a shared last page (copy-on-write)', or both."""

    def names(seqs: list[str]) -> str:
        return seqs[0] if len(seqs) == 1 else f"{', '.join(seqs[:-1])} and {seqs[-1]}"

    said = []
    if full:
        said.append(
            f"the last {noun(len(full), 'page')} of {names(full)} {'are' if len(full) > 1 else 'is'} full"
        )
    if shared:
        said.append(
            f"{names(shared)} {'write' if len(shared) > 1 else 'writes'} into a shared last page"
            " (copy-on-write)"
        )
    return "; ".join(said)


def _pages(pages: list[int]) -> str:
    verb = "goes" if len(pages) == 1 else "go"
    return f"{noun(len(pages), 'page')} {', '.join(map(str, pages))} {verb}"


def _finish_note(seq_id: Hashable, pages: int, shared: int) -> str:
    """The log's words for a finished request: its own pages released, `shared` ones kept."""
    if not shared:
        said = "1 page was released" if pages == 1 else f"{pages} pages were released, tail first"
        return f"{seq_id} finished: its {said}"
    own = pages - shared
    released = "1 own page was" if own == 1 else f"{own} own pages were"
    stay = "1 shared page stays" if shared == 1 else f"{shared} shared pages stay"
    if not own:  # a fork that never wrote: nothing of its own to release
        return f"{seq_id} finished: it had no page of its own; {stay} with the others (ref count down by one)"
    return (
        f"{seq_id} finished: its {released} released, tail first; "
        f"{stay} with the others (ref count down by one)"
    )
