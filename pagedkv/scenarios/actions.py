"""What a scenario is made of: `Action`s (steps as plain data), `ActionRecord`s (what an
applied action did, in words), and `Scenario` (a named list of actions for a pool geometry).

Plain data is what makes a run replayable: `ScenarioRun.back()` re-applies the recorded
actions. `ActionRecord.event_lines()` is the one place pool events become the words of the
event log (allocate, prefix hit, evict, copy-on-write, preempt), shared by the dashboard and
the demo. (The scheduler's own per-step record is `pagedkv.engine.scheduler_output.StepRecord`; a
"schedule" action keeps its one-line `summary()` as the note.) Leaves out: serialising
actions to files.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from pagedkv.core.plumbing.events import Event
from pagedkv.core.plumbing.validation import check_choice, check_number, check_seq_id
from pagedkv.core.plumbing.words import noun

OPS = ("add", "decode", "fork", "free", "beam", "request", "schedule", "abort")


@dataclass(frozen=True)
class Action:
    """One step: what happens to which sequences (plain data, so runs can be replayed)."""

    op: str  # add | decode | fork | free | beam | request (to the scheduler) | schedule | abort
    seq_id: Hashable | None = None  # add/free/request/abort: the sequence; fork: the child; beam: group
    parent: Hashable | None = None  # fork: the parent; add: start the prompt with its tokens
    text: str = ""  # add: the prompt (after the parent's tokens, if any)
    seq_ids: tuple[Hashable, ...] = ()  # decode: these sequences (empty: every live one)
    temperature: float = 0.0  # decode: 0 = greedy, else seeded sampling
    width: int = 0  # beam: beams kept; request: max_new_tokens
    caption: str = ""  # what the step shows, for people

    def __post_init__(self) -> None:
        check_choice("op", self.op, OPS)
        for name, value in (("seq_id", self.seq_id), ("parent", self.parent)):
            if value is not None:
                check_seq_id(name, value)
        for k, seq_id in enumerate(self.seq_ids):
            check_seq_id(f"seq_ids[{k}]", seq_id)
        self._check_what_the_op_needs()
        if not 0 <= check_number("temperature", self.temperature, 0.0) <= 10:
            raise ValueError(f"temperature must be in [0, 10], got {self.temperature}")

    def _check_what_the_op_needs(self) -> None:
        if self.op in ("add", "fork", "free", "beam", "request", "abort") and self.seq_id is None:
            raise ValueError(f"op {self.op!r} needs a seq_id")
        if self.op == "add" and not (self.text or self.parent is not None):
            raise ValueError("op 'add' needs a text or a parent to share a prefix with")
        if self.op == "fork" and self.parent is None:
            raise ValueError("op 'fork' needs a parent")
        if self.op == "beam" and not 1 <= self.width <= 16:
            raise ValueError(f"op 'beam' needs a width in [1, 16], got {self.width}")
        if self.op == "request" and not (self.text and self.width >= 1):
            raise ValueError("op 'request' needs a text and width = max_new_tokens >= 1")


@dataclass
class ActionRecord:
    """What one applied action did."""

    index: int  # 1-based step number in the run
    action: Action
    events: list[Event] = field(default_factory=list)  # pool events, in order
    tokens: dict[Hashable, int] = field(default_factory=dict)  # seq id -> token appended
    slots: dict[Hashable, int] = field(default_factory=dict)  # seq id -> slot it went to
    numbers: dict[Hashable, int] = field(default_factory=dict)  # seq id -> its token count (1-based)
    cached_tokens: int = 0  # add: prompt tokens served by prefix hits
    note: str = ""  # outcome, e.g. a refused admission or an out-of-pages stop
    waits: str = ""  # a scheduler step: why the waiting queue's head was not admitted, if it was tried
    appends: list[tuple[int, Hashable]] = field(default_factory=list)  # (events so far, seq id)
    step: int = 0  # scenario steps applied once this action was (the run's one counter)
    own: bool = False  # an action of your own, not one of the scenario's steps
    spans: dict[int, tuple[int, int]] = field(
        default_factory=dict
    )  # new page -> (first, last) token it holds
    shared: dict[int, tuple[Hashable, ...]] = field(
        default_factory=dict
    )  # page a prefix hit found ACTIVE -> the other sequences holding it
    lengths: dict[Hashable, int] = field(default_factory=dict)  # seq id -> its tokens after the step
    drops: list[tuple[int, str]] = field(default_factory=list)  # (events so far, a beam drop's words)

    @property
    def refused(self) -> bool:
        """The action was refused and changed nothing (its note says why)."""
        return self.note.startswith("refused")

    @property
    def yours(self) -> bool:
        """An action you chose: not a scenario step, and not the scheduler step Decode all
        runs once the scenario is done (the scheduler picks what that step does)."""
        return self.own and self.action.op != "schedule"

    def event_lines(self) -> list[str]:
        """The action's events in words (allocate, prefix hit, evict, copy-on-write, ...)."""
        return [text for kind, text in self._event_entries(self.events)]

    def _event_entries(self, events: list[Event], grouped: bool = False) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        run: list[Event] = []  # consecutive events of one kind for one sequence
        copies = {e.page_id: e for e in events if e.kind == "cow"} if grouped else {}
        headed: set[int] = set()  # copies whose heading the log has given
        # a prefix hit's pages grouped by who else holds them (the log names the holders)
        key = lambda e: (e.kind, e.seq_id, _copying(e, copies), self.shared.get(e.page_id))  # noqa: E731
        for event in [*events, None]:
            if run and (event is None or key(event) != key(run[0]) or event.kind == "cow"):
                if grouped:
                    out += _grouped(run, self, copies, headed)
                else:
                    out.append((run[0].kind, _describe(run, self.spans)))  # "(it has n…)": the log only
                run = []
            if event is not None:
                run.append(event)
        return out

    def entries(self, grouped: bool = False) -> list[tuple[str, str]]:
        """Everything the action did as (kind, words), cause before effect: a scheduler
        step's decision comes first, each append follows the events it caused (an eviction,
        then the allocation, then the token in its slot), and any other action's outcome
        comes last. Kinds are event kinds, "append", "decision" or "note". `grouped` (the
        dashboard's log) puts a copy-on-write's eviction, allocation and copy under one
        heading, and tells a prefix hit that shares an ACTIVE page from one that revives a
        CACHED page."""
        decides = self.action.op == "schedule" and not self.refused
        out: list[tuple[str, str]] = [("decision", self.note)] if decides and self.note else []
        if decides and grouped and self.waits:  # the dashboard's log
            out.append(("note", self.waits))
        start, events = 0, _causes_first(self.events)
        # a beam drop's line goes before the releases it causes; appends after their events
        marks = [(at, 0, words) for at, words in self.drops] + [(at, 1, s) for at, s in self.appends]
        marks.sort(key=lambda mark: mark[:2])  # stable: appends at one place keep their order
        for end, is_append, seq_id in marks:
            out += self._event_entries(events[start:end], grouped)
            start = end
            if not is_append:
                out.append(("note", str(seq_id)))  # the drop's words
                continue
            t = self.tokens[seq_id]
            if seq_id in self.slots:
                n, slot = self.numbers.get(seq_id), self.slots[seq_id]
                nth = f"its token {n}, " if n else ""  # counted from 1, as "room for its tokens 21-24"
                out.append(("append", f"{seq_id} appends {nth}id {t} {_show(t)}, in slot {slot}"))
            else:
                out.append(("append", f"{seq_id} samples its next token, id {t} {_show(t)}"))
        out += self._event_entries(events[start:], grouped)
        out += [
            ("append", f"{s} samples its next token, id {t} {_show(t)}")
            for s, t in self.tokens.items()
            if s not in self.slots and s not in {a for _, a in self.appends}
        ]
        if self.note and not decides:
            out.append(("refused" if self.refused else "note", self.note))
        return out

    def lines(self) -> list[str]:
        """Everything the action did in words, in the order of `entries()`."""
        return [text for _, text in self.entries()]

    def log_lines(self) -> list[str]:
        """The same in the dashboard log's words (`entries(grouped=True)`): a copy-on-write
        under one heading, "copy-on-write for sample.0: its last page 4 is shared, ...",
        then its allocation and copy as "– " lines."""
        return [text for _, text in self.entries(grouped=True)]


_CAUSED = {
    "preempt": ("cache", "free"),
    "abort": ("cache", "free"),
    "resume": ("prefix_hit", "allocate", "evict"),
}


def _causes_first(events: list[Event]) -> list[Event]:
    """The events with each scheduler "preempt" / "resume" moved before the page events it
    caused: the scheduler announces them after the release or admission they explain.
    Example: [cache 3 (req2), free 4 (req2), preempt req2] -> [preempt req2, cache 3, free 4]."""
    out: list[Event] = []
    for event in events:
        j = len(out)
        if event.kind in _CAUSED:
            while j and out[j - 1].seq_id == event.seq_id and out[j - 1].kind in _CAUSED[event.kind]:
                j -= 1
        out.insert(j, event)
    return out


def drop_words(seq_id: Hashable, table: list[int], shared: list[int]) -> str:
    """The log's line for a beam a beam step drops (said before the releases it causes):
    "beam.2 dropped: releases pages 0, 1, 2, 3, 6; pages 0, 1, 2, 3 stay with the other beams
    (ref count down by one)". Its own pages then show as "cache" or "free" lines."""
    said = f"{seq_id} dropped: releases {noun(len(table), 'page')} {', '.join(map(str, table))}"
    if not shared:
        return said
    stay = f"{noun(len(shared), 'page')} {', '.join(map(str, shared))}"
    verb = "stays" if len(shared) == 1 else "stay"
    return f"{said}; {stay} {verb} with the other beams (ref count down by one)"


def _show(token: int) -> str:
    """A token id's character as the log shows it: quoted, a space said in words (a quoted
    space could wrap across two lines), a byte outside printable ASCII in hex."""
    if token == 32:
        return "(a space)"
    return repr(chr(token)) if 32 < token < 127 else f"(byte 0x{token:02x})"


_WORDS = {  # event kind -> how the log says it (other kinds are said as they are)
    "evict": "evict (LRU victim)",
    "prefix_hit": "prefix hit",
    "fork": "fork shares",
    "cache": "cache (ref count 0, kept for reuse)",
}


def _describe(
    run: list[Event],
    spans: dict[int, tuple[int, int]],
    lengths: dict | None = None,
    evicted: frozenset = frozenset(),
) -> str:
    """One log line for a run of events of one kind and sequence. An allocation says which
    tokens the pages have room for: "allocate page 10 for req1: room for its tokens 25-28";
    when the sequence has fewer tokens (`lengths`), it says so: "(it has 35: 36 waits for its
    next token)" (a page is taken whole: its free slots wait for the tokens it generates). When
    some of its pages were just `evicted`, it says where each came from: "(page 8 was FREE;
    10, 11 evicted)". A release of several pages says its order: "cache (...) tail first: pages"."""
    first = run[0]
    who = f" for {first.seq_id}" if first.seq_id is not None else ""
    if first.page_id < 0:  # a scheduler event about a request: preempt, resume, abort
        return f"{first.kind} {first.seq_id}: {first.detail}"
    if first.kind == "cow":
        return f"copy-on-write: {first.detail} to page {first.page_id}{who}"
    pages = ", ".join(str(e.page_id) for e in run)
    order = " tail first:" if first.kind == "cache" and len(run) > 1 else ""  # release order
    line = f"{_WORDS.get(first.kind, first.kind)}{order} {noun(len(run), 'page')} {pages}{who}"
    held = [spans[e.page_id] for e in run if e.page_id in spans]
    taken = [e.page_id for e in run if e.page_id in evicted]
    if first.kind == "allocate" and taken:  # "(page 8 was FREE; 10, 11 evicted)"
        free = [e.page_id for e in run if e.page_id not in evicted]
        verb = "was" if len(free) == 1 else "were"
        was = f"{noun(len(free), 'page')} {', '.join(map(str, free))} {verb} FREE; "
        line += f" ({was if free else ''}{', '.join(map(str, taken))} evicted)"
    if first.kind == "allocate" and held:
        first_token, last = min(a for a, _ in held), max(b for _, b in held)
        has = (lengths or {}).get(first.seq_id, 0)  # a decode's new page: its one token, said next
        line += f": room for its tokens {first_token}-{last}"
        rest = (
            f"{last} waits for its next token"
            if has + 1 == last
            else f"{has + 1}-{last} wait for its next ones"
        )
        if first_token < has < last:
            line += f" (it has {has}: {rest})"
    return line


def _copying(event: Event, copies: dict) -> bool:
    """Whether `event` is part of a copy-on-write: its page is the copy and its sequence the
    writer (the same page freed by another sequence earlier in the step is not)."""
    cow = copies.get(event.page_id)
    return cow is not None and cow.seq_id == event.seq_id


def _grouped(run: list[Event], record: ActionRecord, copies: dict, headed: set[int]) -> list[tuple[str, str]]:
    """The dashboard log's entries for a run of events of one kind and sequence: a
    copy-on-write's heading (before the first of its eviction, allocation and copy), then
    "– " lines for them; a prefix hit says whether it shares ACTIVE pages (and with whom)
    or revives CACHED ones."""
    spans, shared = record.spans, record.shared
    first, pages = run[0], ", ".join(str(e.page_id) for e in run)
    if first.kind == "prefix_hit" and first.page_id in shared:
        others = ", ".join(str(s) for s in shared[first.page_id]) or "another sequence"
        held = f"(ACTIVE, held by {others} too)"
        return [(first.kind, f"prefix hit shares pages {pages} for {first.seq_id} {held}")]
    if first.kind == "prefix_hit":
        return [
            (
                first.kind,
                f"{_describe(run, spans, record.lengths)} (revived from CACHED, in block-table order)",
            )
        ]
    if not _copying(first, copies):
        evicted = frozenset(e.page_id for e in record.events if e.kind == "evict")
        return [(first.kind, _describe(run, spans, record.lengths, evicted))]
    source = copies[first.page_id].detail.removeprefix("copied from page ")
    out = []
    if first.page_id not in headed:
        headed.add(first.page_id)
        heading = (
            f"copy-on-write for {first.seq_id}: its last page {source} is shared, so it writes into a copy"
        )
        out.append(("cow", heading))
    if first.kind == "allocate":
        a, b = spans.get(first.page_id, (0, 0))
        tokens = f" (room for its tokens {a}-{b})" if a else ""
        out.append(("allocate", f"– allocate page {pages} for its copy of the shared last page{tokens}"))
    elif first.kind == "cow":
        out.append(("cow", f"– copy the K/V of page {source} into page {pages}"))
    else:
        out.append((first.kind, f"– {_describe(run, spans, record.lengths)}"))
    return out


@dataclass(frozen=True)
class Scenario:
    """A named trace: default geometry and the steps for any geometry."""

    name: str
    title: str
    summary: str
    num_pages: int
    page_size: int
    build: Callable[[int, int], list[Action]]  # (num_pages, page_size) -> steps
    seed: int = 0  # of the sampling generator
    scheduler: tuple[tuple[str, object], ...] = ()  # Scheduler keyword arguments, if it has one

    def steps(self, num_pages: int | None = None, page_size: int | None = None) -> list[Action]:
        return self.build(num_pages or self.num_pages, page_size or self.page_size)
