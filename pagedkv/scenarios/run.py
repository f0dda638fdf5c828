"""ScenarioRun: a scenario applied step by step to a real pool, recorded, replayable.

An `Action` is one step as plain data (add, decode, fork, free, a beam-search step, a request
queued with the scheduler, a scheduler step). A `ScenarioRun` applies a scenario's actions to
a `KVCachePool` + `SequenceManager` with TinyLM generating every token through the paged
cache (greedy, or seeded sampling) and records what each did (`ActionRecord`: pool events,
tokens, slots, a note) plus a snapshot after every step. After each action every sequence
the run drives is fully computed (`model.forward` runs after appends and before anything is
freed), so pages indexed for prefix reuse always hold real K/V. An action that cannot be
carried out whole (an unknown or duplicate id, a decode step the pool has no pages for) is
refused before anything changes, and its record says why.

Because actions are data and everything is seeded, `back()` is exact time travel: it
replays the history minus its last action. Controls such as "add a request" append ordinary
actions. A scenario has a fixed number of steps, known before the first one: a scenario
with a scheduler ends with one "schedule" step, which a dry run at construction repeats
until the scheduler has finished every request, so its total never grows while a learner
steps. After the last step `step()` refuses; `decode_all()` (an action of your own) goes on
generating for every live sequence the run decodes itself (with a scheduler: the ones you
added), or runs the scheduler once more if your actions left it work.

vLLM's engine loop is the production relative (requests in, one scheduler step at a time);
this one exists to be stepped by hand and rewound. Leaves out: persistence of a run.
"""

from __future__ import annotations

from collections.abc import Hashable
from functools import lru_cache
from typing import Any

import numpy as np

from pagedkv.core.plumbing.events import Event
from pagedkv.core.plumbing.validation import check_instance, check_int
from pagedkv.core.pool import KVCachePool, OutOfPagesError
from pagedkv.core.sequence import SequenceManager, UnknownSequenceError
from pagedkv.engine.scheduler import Scheduler
from pagedkv.model.tinylm import TinyLM
from pagedkv.scenarios.actions import Action, ActionRecord, Scenario
from pagedkv.scenarios.operations import ScenarioOperations

MAX_STEPS = 1000  # a scenario never grows longer (the Play widget's range)


@lru_cache(maxsize=1)
def default_model() -> TinyLM:
    """The TinyLM every scenario uses (the shipped trained weights): loaded once, shared, never mutated."""
    return TinyLM.pretrained()


class ScenarioRun(ScenarioOperations):
    """A scenario applied step by step to a real pool, with its history for time travel."""

    def __init__(
        self,
        scenario: str | Scenario = "walkthrough",
        num_pages: int | None = None,
        page_size: int | None = None,
        model: TinyLM | None = None,
    ) -> None:
        if isinstance(scenario, str):
            from pagedkv.scenarios.library import (
                get_scenario,  # only a name needs the library (built on .actions)
            )

            scenario = get_scenario(scenario)
        self.scenario = scenario
        if not isinstance(self.scenario, Scenario):
            raise TypeError(f"scenario must be a name or a Scenario, got {type(scenario).__name__}")
        self.num_pages = self.scenario.num_pages if num_pages is None else num_pages
        self.page_size = self.scenario.page_size if page_size is None else page_size
        self.model = default_model() if model is None else model
        self.config = self.model.cache_config(self.num_pages, self.page_size)  # validates both
        self._planned: list[Action] | None = None
        self._start()
        self._planned = self._plan()
        self._start()

    def _plan(self) -> list[Action]:
        """The scenario's steps for this geometry, its final "schedule" step repeated as
        often as a dry run needs to finish every request (while it makes progress)."""
        if not self.scenario.scheduler:
            return list(self.steps)
        while self.cursor < len(self.steps):
            action = self.steps[self.cursor]
            self._apply(action, True)
            if (
                action.op == "schedule"
                and self.cursor == len(self.steps)
                and self.scheduler is not None
                and self.scheduler.has_unfinished
                and self._progressed  # a token computed (prompt chunks count) or a preemption
                and len(self.steps) < MAX_STEPS
            ):
                self.steps.append(action)
        return list(self.steps)

    def _start(self) -> None:
        self.steps = (
            self.scenario.steps(self.num_pages, self.page_size)
            if self._planned is None
            else list(self._planned)
        )
        self.pool = KVCachePool(self.config)
        self.seqs = SequenceManager(self.pool)
        self.pool.add_listener(self._on_event)
        self.scheduler = None
        if self.scenario.scheduler:
            options: dict[str, Any] = dict(self.scenario.scheduler)  # Scheduler checks each value
            self.scheduler = Scheduler(self.seqs, self.model, **options)
            self.scheduler.add_listener(self._on_event)  # "preempt" and "resume"
        self.rng = np.random.default_rng(self.scenario.seed)
        self.logits: dict[Hashable, np.ndarray] = {}  # seq id -> last-position logits [vocab]
        self.scores: dict[Hashable, float] = {}  # beam id -> cumulative log-probability
        self.records: list[ActionRecord] = []
        self.snapshots = [self.seqs.snapshot()]  # [0] before any step, [i] after step i
        self.cursor = 0  # scenario steps applied
        self.history: list[tuple[Action, bool]] = []  # (action, was a scenario step)
        self.seen_ids: set[Hashable] = set()  # every sequence id this run admitted or forked
        self._record: ActionRecord | None = None
        self._progressed = False  # the last "schedule" computed a token or preempted

    def _on_event(self, event: Event) -> None:
        if self._record is not None:
            self._record.events.append(event)

    @property
    def events(self) -> list[Event]:
        """Every pool event of the run so far, in order."""
        return [event for record in self.records for event in record.events]

    @property
    def done(self) -> bool:
        """All of the scenario's own steps have been applied."""
        return self.cursor >= len(self.steps)

    @property
    def can_step(self) -> bool:
        """Whether `step()` has a scenario step left (False once the scenario is done)."""
        return not self.done

    @property
    def can_decode_all(self) -> bool:
        """Whether `decode_all()` has anything to do: a live sequence this run decodes, or,
        once the scenario is done, a request the scheduler has not finished."""
        return bool(self.own_sequences) or self._scheduler_goes_on

    @property
    def _scheduler_goes_on(self) -> bool:
        """Decode all runs one more scheduler step: the scenario is done, no sequence of
        yours is left, and the scheduler has a request unfinished."""
        scheduling = self.scheduler is not None and self.scheduler.has_unfinished
        return scheduling and self.done and not self.own_sequences

    @property
    def next_action(self) -> Action | None:
        """What `step()` applies next (None once the scenario is done)."""
        return None if self.done else self.steps[self.cursor]

    @property
    def own_actions(self) -> int:
        """How many actions of your own the run holds, refused ones included
        (`ActionRecord.yours`)."""
        return sum(record.yours for record in self.records)

    @property
    def steps_past_end(self) -> int:
        """How many scheduler steps Decode all ran once the scenario was done: records of
        your own that are not `yours` (the scheduler chose what they did)."""
        return sum(record.own and not record.yours for record in self.records)

    def step(self) -> ActionRecord:
        """Apply the next scenario step; ValueError once the scenario is done."""
        if self.done:
            raise ValueError(
                f"the scenario is done (step {self.cursor} of {len(self.steps)}): "
                "use decode_all() to go on, or reset()"
            )
        return self._apply(self.steps[self.cursor], True)

    def decode_all(self) -> ActionRecord:
        """An action of your own: one token for every live sequence this run decodes (with a
        scheduler, the ones you added: Step moves its requests). Once the scenario is done,
        with none of those left and a request unfinished, one more scheduler step instead."""
        if self._scheduler_goes_on:
            return self.apply(Action("schedule", caption="the scenario is done: one more scheduler step"))
        # Sampled as the scenario samples (parallel sampling draws a token per sample), else greedy.
        temperature = next((a.temperature for a in reversed(self.steps) if a.op == "decode"), 0.0)
        caption = (
            "you decoded one token for everyone"
            if self.scheduler is None
            else "you decoded one token for each sequence you added (Step moves the scheduler's requests)"
        )
        return self.apply(Action("decode", temperature=temperature, caption=caption))

    def goto(self, step: int) -> None:
        """Jump to just after scenario step `step` (0 = before the first), keeping your own
        actions taken before it. Forward it steps; backward it replays the history."""
        step = check_int("step", step, 0, len(self.steps))
        if step < self.cursor:
            seen, keep = 0, []
            for action, scenario_step in self.history:
                if scenario_step and seen == step:
                    break
                seen += scenario_step
                keep.append((action, scenario_step))
            self._replay(keep)
        while self.cursor < step:
            self.step()

    def rebuilt(self, num_pages: int, page_size: int) -> ScenarioRun:
        """The same scenario on another pool geometry, with this run's history replayed on
        it: as many scenario steps, and your own actions where you took them (an action the
        new pool cannot carry out is refused, and its record says why)."""
        run = ScenarioRun(self.scenario, num_pages, page_size, self.model)
        for action, scenario_step in self.history:
            if not scenario_step:
                run.apply(action)
            elif not run.done:
                run.step()
        return run

    def apply(self, action: Action) -> ActionRecord:
        """Apply an action of your own (a control, not a scenario step) and record it."""
        return self._apply(check_instance("action", action, Action), False)

    def _apply(self, action: Action, scenario_step: bool) -> ActionRecord:
        # A refused action (out of pages, unknown or duplicate id) changes nothing: each
        # operation below checks everything it can fail on before its first change (the
        # core's calls refuse without changing anything too), and says why in the note.
        record = self._record = ActionRecord(len(self.records) + 1, action)
        held = self.pool.table.ref_count.copy()  # a hit on a page held already shares it
        try:
            getattr(self, f"_{action.op}")(action, record)
        except (OutOfPagesError, UnknownSequenceError, ValueError) as error:
            record.note = f"refused: {error}"
        finally:
            self._record = None
        self._note_spans(record)
        self._note_shared(record, held)
        self.cursor += scenario_step
        record.step, record.own = self.cursor, not scenario_step
        self.history.append((action, scenario_step))
        self.records.append(record)
        self.snapshots.append(self.seqs.snapshot())
        return record

    def _note_spans(self, record: ActionRecord) -> None:
        """Which token positions each page allocated in this step has room for (1-based),
        from the block table that holds it now: when a step reserves a page, and for which
        tokens, is what the log shows (vLLM's `allocate_slots` in `schedule()`)."""
        for event in record.events:
            if event.kind == "allocate" and event.seq_id in self.seqs:
                table = self.seqs.block_table(event.seq_id)
                if event.page_id in table:
                    k = table.index(event.page_id)
                    record.spans[event.page_id] = (k * self.page_size + 1, (k + 1) * self.page_size)
                    record.lengths[event.seq_id] = self.seqs.get(event.seq_id).num_tokens

    def _note_shared(self, record: ActionRecord, held) -> None:
        """The pages a prefix hit of this step found ACTIVE (`held`: ref counts before the
        step), each with the other sequences that hold it now: a share, not a revival."""
        for event in record.events:
            if event.kind == "prefix_hit" and event.page_id >= 0 and held[event.page_id] > 0:
                others = [
                    s for s in self.seqs.sequences
                    if s != event.seq_id and event.page_id in self.seqs.block_table(s)
                ]  # fmt: skip
                record.shared[event.page_id] = tuple(others)

    def back(self) -> bool:
        """Undo the last step exactly; False when there is none.

        Replays the history from a fresh pool rather than keeping a copy of every state:
        pool, manager, K/V store, logits and the sampling generator are linked objects, and
        a replay of the same actions (seeded sampling, logical clock) rebuilds all of them
        bit for bit in a few ms at classroom sizes, where per-step copies would each hold a
        K/V store and risk sharing state between copies."""
        if not self.history:
            return False
        self._replay(self.history[:-1])
        return True

    def reset(self) -> None:
        """Back to step 0 (same scenario and geometry: the pool keeps its size), with none of
        your own actions."""
        self._replay([])

    def _replay(self, history: list[tuple[Action, bool]]) -> None:
        self._start()
        for action, scenario_step in history:
            self._apply(action, scenario_step)

    def __repr__(self) -> str:
        return (
            f"ScenarioRun({self.scenario.name!r}, num_pages={self.num_pages}, page_size="
            f"{self.page_size}, step {len(self.history)}, {self.cursor}/{len(self.steps)} "
            f"scenario steps)"
        )
