"""Questions for learners, as ipywidgets: predict-then-step before a key step, and check
questions at the end of a notebook.

- `PredictStep`: a question about the *next* step of a `ScenarioRun` (which page is
  allocated, how many pages a prompt needs, which page is evicted, which page a forked
  append copies, which request is preempted). The learner picks an answer and presses
  "Step and check": the step runs, and the widget says what it did, whether that is what
  they predicted, and why — with the pool heatmap after the step.
- `Quiz`: multiple-choice check questions, each answered with a short explanation.

Widgets only (no cell output on a click), so notebooks pass strict nbval; `answer()` /
`check()` press the buttons from code, for tests. Each `PredictStep` owns its run: the
dashboards and cells around it are not moved. Leaves out: scoring and storing answers
(nbgrader does that for graded work).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import ipywidgets as widgets

from pagedkv.core.plumbing.validation import check_instance
from pagedkv.scenarios import ActionRecord, ScenarioRun
from pagedkv.viz.heatmap import PoolHeatmap

RIGHT, WRONG = "#007A5A", "#B91C1C"


def _box(text: str, color: str = "#111111") -> str:
    return f"<div style='font-size:15px;line-height:1.45;color:{color}'>{text}</div>"


class PredictStep(widgets.VBox):
    """Ask what the next step of `run` will do, then run it and compare.

    `outcome(record, run)` reads what the step did (one of `options`, as a string) from the
    step's record; `why` explains it, whatever the learner answered."""

    def __init__(
        self,
        run: ScenarioRun,
        question: str,
        options: Sequence[str],
        outcome: Callable[[ActionRecord, ScenarioRun], str],
        why: str,
        views: Sequence[str] = ("state", "owner"),
    ) -> None:
        check_instance("run", run, ScenarioRun)
        options = [str(o) for o in options]
        if len(options) < 2 or len(set(options)) != len(options):
            raise ValueError(f"options must be 2 or more distinct answers, got {options!r}")
        super().__init__()
        self.run, self.outcome, self.why = run, outcome, why
        self.actual: str | None = None  # the step's outcome, once it has run
        self.choices = widgets.ToggleButtons(options=options, value=None).add_class("pagedkv-predict-choices")
        self.button = widgets.Button(
            description="Step and check", icon="step-forward", button_style="primary"
        ).add_class("pagedkv-predict-step")
        self.result = widgets.HTML().add_class("pagedkv-predict-result")
        self.picture = widgets.Image(format="png", layout=widgets.Layout(width="100%"))
        self._heatmap = PoolHeatmap(run.num_pages, run.page_size, views=tuple(views))
        self.button.on_click(lambda _: self.check())
        self.children = [
            widgets.HTML(_box(f"<b>Predict:</b> {html.escape(question)}")),
            self.choices,
            self.button,
            self.result,
            self.picture,
        ]
        self.add_class("pagedkv-predict")

    def answer(self, choice: str) -> None:
        """Pick `choice` and press "Step and check" (what a learner does)."""
        self.choices.value = str(choice)
        self.check()

    def check(self) -> None:
        if self.choices.value is None:
            self.result.value = _box("Pick an answer first, then press Step.", WRONG)
            return
        if self.actual is None:  # the step runs once; pressing again only re-reads it
            if self.run.done:
                self.result.value = _box("This scenario has no step left.", WRONG)
                return
            record = self.run.step()
            self.actual = str(self.outcome(record, self.run))
            self._heatmap.update(self.run.snapshots[-1])
            self.picture.value = self._heatmap.png()
            self.choices.disabled = self.button.disabled = True
        guessed = self.choices.value
        if guessed == self.actual:
            verdict = f"<b>Right: {html.escape(self.actual)}.</b> "
            color = RIGHT
        else:
            verdict = (
                f"<b>Not this time:</b> you predicted {html.escape(guessed)}, the step did "
                f"<b>{html.escape(self.actual)}</b>. "
            )
            color = WRONG
        self.result.value = _box(verdict + html.escape(self.why), color)

    @property
    def correct(self) -> bool | None:
        """Whether the prediction came true (None before the step)."""
        return None if self.actual is None else self.choices.value == self.actual


@dataclass(frozen=True)
class Question:
    """One multiple-choice check question."""

    text: str
    options: tuple[str, ...]
    answer: str  # one of options
    why: str

    def __post_init__(self) -> None:
        if self.answer not in self.options:
            raise ValueError(f"answer must be one of {self.options!r}, got {self.answer!r}")


class Quiz(widgets.VBox):
    """Check questions: pick an answer, press Check, read why."""

    def __init__(self, questions: Sequence[Question | tuple], title: str = "Check yourself") -> None:
        super().__init__()
        self.questions = [q if isinstance(q, Question) else Question(*q) for q in questions]
        if not self.questions:
            raise ValueError("questions must hold at least one question")
        self.pickers: list[widgets.RadioButtons] = []
        self.feedback: list[widgets.HTML] = []
        rows: list[widgets.Widget] = [widgets.HTML(_box(f"<b>{html.escape(title)}</b>"))]
        for k, q in enumerate(self.questions):
            picker = widgets.RadioButtons(
                options=list(q.options), value=None, layout=widgets.Layout(width="auto")
            ).add_class("pagedkv-quiz-options")
            button = widgets.Button(description="Check").add_class("pagedkv-quiz-check")
            button.on_click(lambda _, k=k: self.check(k))
            feedback = widgets.HTML().add_class("pagedkv-quiz-feedback")
            self.pickers.append(picker)
            self.feedback.append(feedback)
            rows += [widgets.HTML(_box(f"{k + 1}. {html.escape(q.text)}")), picker, button, feedback]
        self.children = rows
        self.add_class("pagedkv-quiz")

    def check(self, k: int, choice: str | None = None) -> bool:
        """Check question k (with `choice` picked first, if given); True when right."""
        q, picker = self.questions[k], self.pickers[k]
        if choice is not None:
            picker.value = choice
        if picker.value is None:
            self.feedback[k].value = _box("Pick an answer first.", WRONG)
            return False
        right = picker.value == q.answer
        said = "Right." if right else f"Not quite: the answer is “{html.escape(q.answer)}”."
        self.feedback[k].value = _box(f"<b>{said}</b> {html.escape(q.why)}", RIGHT if right else WRONG)
        return right


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
