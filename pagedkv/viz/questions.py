"""The questions the notebooks ask, keyed by a question id, kept out of the notebooks.

A notebook cell says only `PredictStep("05-preempt")` or `Quiz("05-check")`: the question, its
options, its answer and the explanation live in `pagedkv/data/questions.json`, so a learner
reading the code above a widget does not read the answer too. Three kinds:

- predictions: a question about the next step of a scenario (which scenario, from which
  step, which outcome reader says what the step did, and the answer the step gives);
- quizzes: multiple-choice check questions with an explanation each;
- discussions: open questions with the answer a teacher would give;
- notes (`note`): a longer text a notebook shows in a box that stays locked until the quizzes
  it names are answered (`pagedkv.viz.answer_box`), e.g. a notebook's summary.

`answer_key_markdown()` writes the teacher's answer key (docs/answer_key.md) from the same
data: `python -m pagedkv.viz.questions > docs/answer_key.md`. The outcome readers turn a
step's record into the words of an option ("5", "none", "req2"). Leaves out: scoring and storing answers.

Options are shown in an order shuffled by the question's key (`shown_order`): the same order
on every run and machine, and not the order they are written in, so the right answer's place
tells a learner nothing. A prediction may also have an `after` text (markdown): the longer
explanation of what the step did, which the widget shows only once the learner has answered.
Every wrong option has a hint (`hints`): one sentence on what that pick overlooks, shown with
a first wrong pick, before the learner's second try; it never names the answer.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from pagedkv.core.plumbing.validation import check_choice, check_instance
from pagedkv.scenarios import ActionRecord, ScenarioRun


def _check_hints(hints: Mapping[str, str], options: tuple[str, ...], answer: str) -> None:
    """Hints are for wrong options only: each key is an option other than the answer."""
    wrong = tuple(o for o in options if o != answer)
    for option in hints:
        check_choice("hint option", option, wrong)


def shown_order(options: tuple[str, ...], key: str) -> tuple[str, ...]:
    """`options` shuffled by `key` (a question's id): the order a widget shows them in.

    `random.Random(key)` seeds from the string's bytes, so the order is the same on every
    run and machine (it does not depend on Python's hash seed)."""
    check_instance("key", key, str)
    order = list(options)
    random.Random(key).shuffle(order)
    return tuple(order)


@dataclass(frozen=True)
class Question:
    """One multiple-choice check question; `key` (e.g. "05-check/2") seeds its option order."""

    text: str
    options: tuple[str, ...]
    answer: str  # one of options
    why: str
    key: str = ""
    hints: Mapping[str, str] = field(default_factory=dict)  # {wrong option: hint}

    def __post_init__(self) -> None:
        if self.answer not in self.options:
            raise ValueError(f"answer must be one of {self.options!r}, got {self.answer!r}")
        _check_hints(self.hints, self.options, self.answer)

    @property
    def shown_options(self) -> tuple[str, ...]:
        """The options in the order a learner sees them."""
        return shown_order(self.options, self.key or self.text)


@dataclass(frozen=True)
class QuizData:
    """A notebook's check questions under one id."""

    qid: str
    notebook: str  # "05"
    title: str
    questions: tuple[Question, ...]


@dataclass(frozen=True)
class Prediction:
    """A question about the next step of a scenario, from a given step."""

    qid: str
    notebook: str
    scenario: str  # a scenario name
    start: int | str  # steps to run first, or "before <seq id>": up to that id's first step
    question: str
    options: tuple[str, ...]
    outcome: str  # the name of an outcome reader below
    answer: str  # what the step does (one of options)
    why: str
    views: tuple[str, ...]  # heatmap panels shown after the step
    after: str = ""  # markdown shown under the verdict once answered: what the step did, at length
    hints: Mapping[str, str] = field(default_factory=dict)  # {wrong option: hint}

    def __post_init__(self) -> None:
        check_choice("outcome", self.outcome, tuple(OUTCOMES))
        if self.answer not in self.options:
            raise ValueError(f"answer must be one of {self.options!r}, got {self.answer!r}")
        _check_hints(self.hints, self.options, self.answer)

    def start_run(self) -> ScenarioRun:
        """A fresh run of the scenario, positioned just before the step asked about."""
        run = ScenarioRun(self.scenario)
        if isinstance(self.start, int):
            run.goto(self.start)
        else:
            seq_id = self.start.removeprefix("before ")
            while run.next_action is not None and run.next_action.seq_id != seq_id:
                run.step()
        return run

    @property
    def shown_options(self) -> tuple[str, ...]:
        """The options in the order a learner sees them."""
        return shown_order(self.options, self.qid)

    def label(self, option: str) -> str:
        """`option` as a learner reads it, with its unit: a count of pages "5" -> "5 pages",
        a page "5" -> "page 5", "0, 1" -> "pages 0, 1"; "none" and request names as they are."""
        if option == "none" or self.outcome == "request_preempted":
            return option
        if self.outcome == "num_pages_allocated":
            return f"{option} page{'' if option == '1' else 's'}"
        return f"page{'s' if ',' in option else ''} {option}"

    def read(self, record: ActionRecord, run: ScenarioRun) -> str:
        """What the step did, in the words of an option."""
        return str(OUTCOMES[self.outcome](record, run))


@dataclass(frozen=True)
class Discussion:
    """An open question and the answer a teacher would give."""

    qid: str
    notebook: str
    question: str
    answer: str


def pages_allocated(record: ActionRecord, run: ScenarioRun) -> str:
    """The pages a step allocated, e.g. "5" or "0, 1, 2" ("none" if it took none)."""
    pages = [e.page_id for e in record.events if e.kind == "allocate"]
    return ", ".join(map(str, pages)) or "none"


def num_pages_allocated(record: ActionRecord, run: ScenarioRun) -> str:
    """How many pages a step allocated, e.g. "5"."""
    return str(sum(1 for e in record.events if e.kind == "allocate"))


def page_evicted(record: ActionRecord, run: ScenarioRun) -> str:
    """The first page a step evicted ("none" if it evicted nothing)."""
    pages = [e.page_id for e in record.events if e.kind == "evict"]
    return str(pages[0]) if pages else "none"


def page_copied(record: ActionRecord, run: ScenarioRun) -> str:
    """The source page of the first copy-on-write of a step ("none" without one)."""
    for event in record.events:
        if event.kind == "cow":  # detail: "copied from page <src>"
            return event.detail.rsplit(" ", 1)[-1]
    return "none"


def request_preempted(record: ActionRecord, run: ScenarioRun) -> str:
    """The request a scheduler step preempted ("none" if it preempted nothing)."""
    names = [str(e.seq_id) for e in record.events if e.kind == "preempt"]
    return names[0] if names else "none"


def lru_caption(record: ActionRecord | None) -> str:
    """What a prediction's LRU picture shows after the step: the pages the step evicted (now
    ACTIVE for their new holder, so not outlined) and the next victim, outlined."""
    gone = list(dict.fromkeys(e.page_id for e in record.events if e.kind == "evict")) if record else []
    pages = f"page {gone[0]}" if len(gone) == 1 else f"pages {', '.join(map(str, gone))}, in that order"
    said = f" This step evicted {pages}: now blue, held by {'its' if len(gone) == 1 else 'their'} new owner."
    tail = " #1 (outlined) is the next victim; blue pages are ACTIVE, named by their holder;"
    return (said if gone else "") + tail + " CACHED ones by the request that released them."


OUTCOMES: dict[str, Callable[[ActionRecord, ScenarioRun], str]] = {
    f.__name__: f
    for f in (pages_allocated, num_pages_allocated, page_evicted, page_copied, request_preempted)
}


@lru_cache(maxsize=1)
def _bank() -> dict[str, dict[str, Any]]:
    """{kind: {question id: data}} from pagedkv/data/questions.json, built and checked once."""
    raw = json.loads(resources.files("pagedkv").joinpath("data/questions.json").read_text("utf-8"))
    quizzes = {
        qid: QuizData(
            qid,
            q["notebook"],
            q["title"],
            tuple(_question(x, f"{qid}/{k}") for k, x in enumerate(q["questions"], 1)),
        )
        for qid, q in raw["quiz"].items()
    }
    predictions = {
        qid: Prediction(
            qid,
            p["notebook"],
            p["scenario"],
            p["start"],
            p["question"],
            tuple(p["options"]),
            p["outcome"],
            p["answer"],
            p["why"],
            tuple(p["views"]),
            "\n".join(p.get("after", [])),  # a list of markdown lines in the file
            p.get("hints", {}),
        )
        for qid, p in raw["predict"].items()
    }
    discussions = {
        qid: Discussion(qid, d["notebook"], d["question"], d["answer"])
        for qid, d in raw["discussion"].items()
    }
    return {"quiz": quizzes, "predict": predictions, "discussion": discussions}


@dataclass(frozen=True)
class Note:
    """A text (markdown) shown in a box titled `title` once the quizzes `after` are answered."""

    qid: str
    notebook: str
    title: str
    after: tuple[str, ...]  # quiz ids
    text: str


@lru_cache(maxsize=1)
def _notes() -> dict[str, Note]:
    """{note id: Note} from the "notes" of pagedkv/data/questions.json; each names known quizzes."""
    raw = json.loads(resources.files("pagedkv").joinpath("data/questions.json").read_text("utf-8"))
    notes = {
        qid: Note(qid, n["notebook"], n["title"], tuple(n["after"]), "\n".join(n["text"]))
        for qid, n in raw.get("notes", {}).items()
    }
    known = (*_bank()["quiz"], *_bank()["predict"])  # a check quiz or a step prediction
    for n in notes.values():
        for qid in n.after:
            check_choice("a note's quiz id", qid, known)
    return notes


def note(qid: str) -> Note:
    """The note stored under `qid`, e.g. note("09-summary")."""
    check_instance("note_id", qid, str)
    check_choice("note_id", qid, tuple(_notes()))
    return _notes()[qid]


def _question(x: dict[str, Any], key: str) -> Question:
    return Question(x["text"], tuple(x["options"]), x["answer"], x["why"], key, x.get("hints", {}))


def _lookup(kind: str, qid: object) -> Any:
    check_instance("question_id", qid, str)
    bank = _bank()[kind]
    if qid not in bank:
        raise ValueError(f"question_id must be one of {sorted(bank)}, got {qid!r}")
    return bank[qid]


def quiz(qid: str) -> QuizData:
    """The check questions stored under `qid`, e.g. quiz("05-check")."""
    return _lookup("quiz", qid)  # type: ignore[no-any-return]


def prediction(qid: str) -> Prediction:
    """The prediction stored under `qid`, e.g. prediction("05-preempt")."""
    return _lookup("predict", qid)  # type: ignore[no-any-return]


def discussion(qid: str) -> Discussion:
    """The discussion question stored under `qid`, e.g. discussion("05-reserve")."""
    return _lookup("discussion", qid)  # type: ignore[no-any-return]


def all_questions() -> dict[str, dict[str, Any]]:
    """{"quiz" | "predict" | "discussion": {question id: data}} (a copy)."""
    return {kind: dict(items) for kind, items in _bank().items()}


def answer_key_markdown() -> str:
    """The teacher's answer key: every prediction, quiz and discussion question, by notebook."""
    bank = _bank()
    notebooks = sorted({x.notebook for items in [*bank.values(), _notes()] for x in items.values()})
    out = [
        "# Answer key",
        "",
        "For teachers: the answer to every prediction, check question and discussion question in",
        "the notebooks, by notebook. Generated from `pagedkv/data/questions.json` (the data the",
        "notebooks' widgets read) with `python -m pagedkv.viz.questions > docs/answer_key.md`; a",
        "test keeps it current. Learners see an explanation only after they answer. Options are",
        "listed in the order the widgets show them (shuffled once per question, the same on every run).",
    ]
    for nb in notebooks:
        out += ["", f"## Notebook {nb}"]
        for p in (p for p in bank["predict"].values() if p.notebook == nb):
            out += ["", f"**Prediction `{p.qid}`** ({p.scenario}): {p.question}", ""]
            options = " / ".join(map(p.label, p.shown_options))
            out += [f"- Options: {options}", f"- Answer: **{p.label(p.answer)}**", f"- Why: {p.why}"]
            out += _hint_lines(p.hints, p.shown_options, "- ", p.label)
            if p.after:  # quoted, so its own list items stay inside this one
                out += ["- Shown after answering:", ""]
                out += [f"  > {line}".rstrip() for line in p.after.splitlines()]
        for q in (q for q in bank["quiz"].values() if q.notebook == nb):
            out += ["", f"**Quiz `{q.qid}`** ({q.title})", ""]
            for k, x in enumerate(q.questions, 1):
                options = " / ".join(x.shown_options)
                out += [f"{k}. {x.text} ({options})", f"   Answer: **{x.answer}**. {x.why}"]
                out += _hint_lines(x.hints, x.shown_options, "   - ")
        for d in (d for d in bank["discussion"].values() if d.notebook == nb):
            out += ["", f"**Discussion `{d.qid}`**: {d.question}", "", f"Answer: {d.answer}"]
        for n in (n for n in _notes().values() if n.notebook == nb):
            after = ", ".join(f"`{q}`" for q in n.after)
            when = f"opened once {after} is answered" if after else "opened by the reader"
            out += ["", f"**Box `{n.qid}`** ({n.title}), {when}:", ""]
            out += [f"> {line}".rstrip() for line in n.text.splitlines()]
    return "\n".join(out) + "\n"


def _hint_lines(
    hints: Mapping[str, str], shown: tuple[str, ...], bullet: str, label: Callable[[str], str] = str
) -> list[str]:
    """The answer key's lines for a question's hints, in the order its options are shown (each
    option written by `label`)."""
    return [f"{bullet}Hint for “{label(o)}”: {hints[o]}" for o in shown if o in hints]


if __name__ == "__main__":
    print(answer_key_markdown(), end="")
