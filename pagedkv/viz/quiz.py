"""Questions for learners, as ipywidgets: predict-then-step before a key step, check
questions at the end of a notebook, and open questions with an answer to reveal.

- `PredictStep("05-preempt")`: a question about the *next* step of a scenario (which page is
  allocated or evicted, which request is preempted, ...). The learner picks and presses "Step
  and check": the step runs, and the widget grades the pick against what the step did.
- `Quiz("05-check")`: multiple-choice questions, one at a time, "k of n done" above them and,
  in grey, any question Next or Previous left unanswered, with a button to the first of them:
  shown until that question is answered, through answers to the others.
- `Discuss("05-reserve")` (pagedkv.viz.discuss): an open question; "Show an answer" reveals one.

`PredictStep` and `Quiz` grade a pick the same way (`grade`): a first wrong pick gets "Not
quite. Think it over" and a second try, with nothing given away; a right pick, or a second
wrong one, shows the answer and why, and what the wrong pick overlooked (a prediction adds
its `after` text and the pool after the step). Either locks the question ("Answered" or
"Answer shown"): a later click is no try. A quiz titled "Predict" asks about the cells below
it; its Result boxes made right after it (`reveal.await_result`) stay locked until all is answered.

The questions, answers and explanations come from `pagedkv.viz.questions` by id, so a
notebook's code never shows them; nothing is sent to the browser before the learner answers.
Options appear in the question's shuffled order (`shown_options`), the same on every run. No
cell output on a click (strict nbval); `answer()` / `check()` press the buttons, for tests;
each `PredictStep` owns its run. Leaves out: scoring and storing answers."""

from __future__ import annotations

import html

import ipywidgets as widgets

from pagedkv.core.plumbing.validation import check_instance
from pagedkv.scenarios import ActionRecord, ScenarioRun
from pagedkv.viz.grading import WRONG, already, grade, markdown_html
from pagedkv.viz.grading import box as _box
from pagedkv.viz.grading import inline as _inline
from pagedkv.viz.grading import verdict as _verdict
from pagedkv.viz.heatmap import PoolHeatmap
from pagedkv.viz.palette import SequencePalette
from pagedkv.viz.questions import lru_caption, prediction, quiz
from pagedkv.viz.reveal import ClosedBox, await_result, hold_box, register_hold

PREDICT_NOTE = (
    "<div style='color:#555555;font-size:14px;font-style:italic'>Pick yours first: what"
    " follows shows the answer.</div>"
)


PENDING = "#555555"  # grey: questions not answered yet are a reminder, not an error
PICTURE_PX = 340  # a prediction's pool picture is shown at most this tall

# Where the pool picture will appear: one line (its own room would be an empty box half a screen tall).
ROOM = (
    "<div style='box-sizing:border-box;border:2px dashed #C8C8C8;border-radius:6px;"
    "padding:4px 10px;color:#555555;font-size:15px'>"
    "The pool after the step appears here with the answer.</div>"
)

# The pick: a selected toggle is only a darker grey, faint on a projector, so it gets a blue
# frame and bold text (an icon would sit glued after the label; a check mark reads as "right").
PICK_STYLE = (
    "<style>.pagedkv-predict-choices button.mod-active{outline:3px solid #1D4ED8;"
    "outline-offset:-3px;font-weight:bold}</style>"
)
# Labels grow (at one line's height a long one spilled under Check); order: radio first, as float was
_L, _GROW = ".pagedkv-quiz-options label", "{height:auto;line-height:1.4;display:flex}"
OPTION_STYLE = f"<style>{_L}{_GROW}{_L} input{{order:-1}}</style>"


class PredictStep(widgets.VBox):
    """Ask what the next step of a scenario will do, then run it and compare.

    `question_id` names a stored prediction (its scenario, starting step, question, options,
    outcome reader and explanation); `run` replaces the fresh run it would start, if given
    (it must be positioned where the question expects)."""

    def __init__(self, question_id: str, run: ScenarioRun | None = None) -> None:
        self.data = prediction(question_id)
        if run is not None:
            check_instance("run", run, ScenarioRun)
        super().__init__()
        self.run = self.data.start_run() if run is None else run
        self.result_boxes: list[ClosedBox] = []  # `revealed(..., after=question_id)`: opened once settled
        register_hold(question_id, self.hold)
        options, question, views = list(self.data.shown_options), self.data.question, self.data.views
        self.actual: str | None = None  # the step's outcome, once it has run
        self._record: ActionRecord | None = None  # the step's record, once it has run
        self.misses = 0  # wrong picks so far: one more try after the first
        self.settled = False  # True after a right pick or a second wrong one
        self.graded: str | None = None  # the last pick graded: a locked question keeps it shown
        self.choices = widgets.ToggleButtons(options=[(self.data.label(o), o) for o in options], value=None)
        self.choices.add_class("pagedkv-predict-choices")
        self.button = widgets.Button(
            description="Step and check", icon="step-forward", button_style="primary"
        ).add_class("pagedkv-predict-step")
        self.result = widgets.HTML().add_class("pagedkv-predict-result")
        self.after = widgets.HTML().add_class("pagedkv-predict-after")  # filled once answered
        self.caption = widgets.HTML().add_class("pagedkv-predict-caption")  # names the picture's step
        # Hidden until the step has run (an empty Image shows a broken icon); margin 0: 2-px margins
        # beside 100% scroll sideways; ≤ PICTURE_PX tall: the reason above stays on the screen
        full_width = {"width": "100%", "margin": "0", "max_height": f"{PICTURE_PX}px"}
        self.picture = widgets.Image(
            format="png",
            layout=widgets.Layout(
                **full_width, display="none", object_fit="contain", object_position="left top"
            ),
        )
        self.palette = SequencePalette().restart(self.run.steps)  # the dashboard's colours for this scenario
        self._heatmap = PoolHeatmap(
            self.run.num_pages,
            self.run.page_size,
            views=tuple(views),
            palette=self.palette,
            show_clock=False,  # no pool clock beside the notebook's steps: one counter, as on the dashboard
        )
        self._lru = self._heatmap.active_owners = "lru" in views  # it names ACTIVE pages' holders too
        self.placeholder = widgets.HTML(ROOM, layout=widgets.Layout(width="100%", margin="0"))
        self.placeholder.add_class("pagedkv-predict-placeholder")
        self.button.on_click(lambda _: self.check())
        self.choices.observe(self._picked_again, names="value")
        head = widgets.HTML(PICK_STYLE + _box(f"<b>Predict:</b> {_inline(question)}"))
        # `after` under the picture: the answer's reason and the pool fit one screen
        above = [head, self.choices, self.button, self.result, self.placeholder, self.caption]
        self.children = [*above, self.picture, self.after]
        self.add_class("pagedkv-predict")

    def hold(self, box: ClosedBox) -> None:
        """Keep `box` locked until the question is settled (`reveal.hold_box`)."""
        hold_box(box, self, self.settled, self.result_boxes)

    def answer(self, choice: str) -> None:
        """Pick `choice` and press "Step and check" (what a learner does)."""
        self.choices.value = str(choice)
        self.check()

    def check(self) -> None:
        """Run the step (on the first press only) and grade the pick against what it did; the
        step's picture, caption and `after` text show once the question is settled."""
        if self.choices.value is None:
            self.result.value = _box("Pick an answer first, then press Step and check.", WRONG)
            return
        if self.button.disabled:  # locked: the question is settled
            return
        if self.choices.value == self.graded:  # no second try (see `already`)
            self.result.value = already(str(self.graded), self.button.description)
            return
        if self.actual is None:  # the step runs once; a second try is graded on the same step
            if self.run.done:
                self.result.value = _box("This scenario has no step left.", WRONG)
                return
            self._record = self.run.step()
            self.actual = self.data.read(self._record, self.run)
        self.graded = picked = self.choices.value
        hint = self.data.hints.get(picked, "")
        shown, actual = self.data.label(picked), self.data.label(self.actual)
        self.result.value, self.settled = grade(shown, actual, self.data.why, self.misses, hint)
        if self.settled:
            self._reveal(self._record)
        else:
            self.misses += 1
            self.button.description, self.button.icon = "Check again", "check"  # the step has run

    def _picked_again(self, _change=None) -> None:
        if self.settled and self.choices.value != self.graded:  # a late pick: pagedkv.viz.grading
            self.choices.value = self.graded
            return
        if self.misses and not self.settled:
            self.result.value = _box(f"New pick: press {self.button.description} to grade it.")

    def _reveal(self, record: ActionRecord | None) -> None:
        """Show the pool after the step, its caption and the `after` text, and lock the
        question (as a quiz does): the learner's pick stays selected, the answer is named."""
        self._heatmap.update(self.run.snapshots[-1], self.run.events)  # lru: "last held by"
        self.picture.value = self._heatmap.png()
        self.picture.layout.display = ""
        step = "" if record is None else f" {record.step}"
        lru = lru_caption(record) * self._lru
        self.caption.value = _box(f"<b>The pool after step{step}</b>, the step you predicted.{lru}")
        self.placeholder.layout.display = "none"
        self.choices.disabled = self.button.disabled = True
        self.button.button_style = ""  # grey: the settled button looks as locked as it is
        self.button.description, self.button.icon = ("Answer shown", "Answered")[bool(self.correct)], "check"
        if self.data.after:
            self.after.value = _box(markdown_html(self.data.after))
        for box in self.result_boxes:
            box.unlock(self)

    @property
    def correct(self) -> bool | None:
        """Whether the current pick is what the step did (None before the step)."""
        return None if self.actual is None else self.choices.value == self.actual


def _numbered(questions: list[int]) -> str:
    """ "question 2" or "questions 2, 3" for 0-based indices."""
    word = "questions " if len(questions) > 1 else "question "
    return word + ", ".join(str(j + 1) for j in questions)


class Quiz(widgets.VBox):
    """Check questions: pick, press Check, read why (graded as `grade` says; a settled question
    locks). Several show one at a time, Previous / Next and "question k of n (d of n done)"
    above them; `summary` counts first-try rights once all (2+) are done. A quiz titled
    "Predict" shows `note` under its questions until all are done. The Result boxes it holds
    stay locked (`ClosedBox.lock`) until every question is settled; the last widget made for
    an id holds the boxes made after it for that id (`reveal.register_hold`)."""

    def __init__(self, question_id: str) -> None:
        data = quiz(question_id)
        super().__init__()
        register_hold(question_id, self.hold)  # `revealed(..., after=question_id)` boxes
        self.questions, title = list(data.questions), data.title
        self.pickers: list[widgets.RadioButtons] = []
        self.buttons: list[widgets.Button] = []
        self.feedback: list[widgets.HTML] = []
        self.pages: list[widgets.VBox] = []  # one box per question; only `current` is displayed
        self.misses = [0] * len(self.questions)  # wrong picks so far: the answer shows after two
        self.settled = [False] * len(self.questions)  # right, or wrong twice
        self.first_try: list[bool | None] = [None] * len(self.questions)  # right at the first pick?
        self.graded: list[str | None] = [None] * len(self.questions)  # the last pick graded
        self.seen = [False] * len(self.questions)  # shown once: left undone, the position line says so
        for k, q in enumerate(self.questions):
            picker = widgets.RadioButtons(
                options=list(q.shown_options), value=None, layout=widgets.Layout(width="100%", height="auto")
            ).add_class("pagedkv-quiz-options")
            button = widgets.Button(description="Check").add_class("pagedkv-quiz-check")
            button.on_click(lambda _, k=k: self.check(k))
            picker.observe(lambda change, k=k: self._picked(k, change["new"]), names="value")
            feedback = widgets.HTML().add_class("pagedkv-quiz-feedback")
            self.pickers.append(picker)
            self.buttons.append(button)
            self.feedback.append(feedback)
            number = f"{k + 1}. " if len(self.questions) > 1 else ""
            page = widgets.VBox([widgets.HTML(_box(number + _inline(q.text))), picker, button, feedback])
            self.pages.append(page.add_class("pagedkv-quiz-question"))
        self.current = 0
        make = widgets.Button
        self.previous = make(description="Previous", icon="arrow-left").add_class("pagedkv-quiz-previous")
        self.next = make(description="Next", icon="arrow-right").add_class("pagedkv-quiz-next")
        self.position = widgets.HTML().add_class("pagedkv-quiz-position")
        self.pending = widgets.HTML()  # "You skipped ...": its own line, so the header never wraps
        self.goto = make(description="Go to it", icon="arrow-up").add_class("pagedkv-quiz-goto")
        self.goto_target: int = 0  # the first question left open
        self.goto.on_click(lambda _: self.show(self.goto_target))
        self.previous.on_click(lambda _: self.show(self.current - 1))
        self.next.on_click(lambda _: self.show(self.current + 1))
        # Next before the position line: the line grows ("; 1 try left here"), the buttons stay put
        nav = widgets.HBox(
            [self.previous, self.next, self.position], layout=widgets.Layout(align_items="center")
        )
        nav.layout.display = "" if len(self.questions) > 1 else "none"
        # a prediction about the cells below: a note that they hold the answer, until answered
        shown = "" if title == "Predict" else "none"
        self.result_boxes: list[widgets.Accordion] = []  # opened once every question is done
        await_result(self.hold if title.startswith("Predict") else None)
        self.note = widgets.HTML(PREDICT_NOTE, layout=widgets.Layout(width="100%", margin="0", display=shown))
        self.note.add_class("pagedkv-quiz-note")
        self.summary = widgets.HTML(layout=widgets.Layout(display="none")).add_class("pagedkv-quiz-summary")
        head = widgets.HTML(OPTION_STYLE + _box(f"<b>{html.escape(title)}</b>"))
        reminder = widgets.HBox([self.pending, self.goto], layout=widgets.Layout(align_items="center"))
        self.children = [head, nav, reminder, *self.pages, self.summary, self.note]
        self.add_class("pagedkv-quiz")
        self.show(0)

    def hold(self, box: ClosedBox) -> None:
        """Keep `box` locked until every question is settled (`reveal.hold_box`)."""
        hold_box(box, self, all(self.settled), self.result_boxes)

    def show(self, k: int) -> None:
        """Show question k alone (what Previous and Next do); others keep their picks."""
        if not 0 <= k < len(self.questions):
            raise ValueError(f"k must be a question index from 0 to {len(self.questions) - 1}, got {k!r}")
        self.current = k
        for j, page in enumerate(self.pages):
            page.layout.display = "" if j == k else "none"
        n, done, first = len(self.questions), sum(self.settled), sum(bool(r) for r in self.first_try)
        self.seen[k] = True  # a skipped question is named as it is left and at the tally
        open_ = [j for j in range(n) if self.seen[j] and not self.settled[j] and j != k]
        skipped = [j for j in open_ if not self.misses[j]]  # never tried, not one wrong try
        tried = [j for j in open_ if self.misses[j]]
        said = []
        if skipped:
            said.append(f"You skipped {_numbered(skipped)}")
        if tried:
            has = "has" if len(tried) == 1 else "have"
            said.append(f"{_numbered(tried)} {has} one more try left")
        text = "; ".join(said)
        left = _verdict(text[:1].upper() + text[1:], PENDING) if said else ""
        # kept while a question is open, through answers to others (a learner answered question 3
        # after skipping 2 and lost the only way back but Previous); grey, so never read as an error
        now = "; 1 try left here" if self.misses[k] and not self.settled[k] else ""
        head = f"question {k + 1} of {n} ({done} of {n} done, {first} right at first try{now})"
        self.position.value = _box(head)
        self.pending.value = _box(left) if left else ""
        self.pending.layout.display = self.goto.layout.display = "" if left else "none"
        self.goto_target = open_[0] if open_ else k
        self.goto.description = f"Go to question {self.goto_target + 1}"
        self.previous.disabled, self.next.disabled = k == 0, k == len(self.questions) - 1
        self.next.button_style = "primary" if self.settled[k] and not self.next.disabled else ""

    def check(self, k: int, choice: str | None = None) -> bool:
        """Check question k (with `choice` picked first, if given); True when right."""
        q, picker = self.questions[k], self.pickers[k]
        if choice is not None:
            picker.value = choice
        if picker.value is None:
            self.feedback[k].value = _box("Pick an answer first.", WRONG)
            return False
        if self.buttons[k].disabled:  # locked: the right answer was picked
            return True
        if picker.value == self.graded[k]:  # no second try (see `already`)
            self.feedback[k].value = already(picker.value, self.buttons[k].description)
            return False
        self.graded[k] = picker.value
        right, hint = picker.value == q.answer, q.hints.get(picker.value, "")
        self.feedback[k].value, settled = grade(picker.value, q.answer, q.why, self.misses[k], hint)
        if self.first_try[k] is None:
            self.first_try[k] = right
        if not settled:  # one more try, named as PredictStep names it
            self.misses[k], self.buttons[k].description = 1, "Check again"
        self.settled[k] = self.settled[k] or settled
        if settled:  # a right pick, or a second wrong one (the answer named in the feedback), locks
            picker.disabled = True  # it, the learner's own pick still selected
            self.buttons[k].disabled, self.buttons[k].description = True, ("Answer shown", "Answered")[right]
        if all(self.settled):
            self._all_done()
        if k == self.current:
            self.show(k)  # the done count
        return right

    def _all_done(self) -> None:
        """Every question settled: unlock the Result boxes (those no other quiz still holds
        open) and show the score line."""
        for box in self.result_boxes:
            box.unlock(self)
        opened = [box for box in self.result_boxes if not box.holders]  # none waits for another quiz
        self.note.layout.display = "" if opened else "none"
        said = "The box below is" if len(opened) < 2 else "The boxes below are"
        self.note.value = _box(f"<i>{said} open now, with the answer.</i>", "#555555")
        n, first = len(self.questions), sum(bool(r) for r in self.first_try)
        self.summary.value = _box(f"<b>All {n} done</b>, {first} right at the first try.")
        self.summary.layout.display = "" if n > 1 else "none"  # one question: its feedback says it

    def _picked(self, k: int, picked: str | None) -> None:
        """A pick reaching question k: on a locked question it is a late one (the race in
        pagedkv.viz.grading), put back to the graded pick; after a first wrong pick, that pick's
        "Not quite" goes."""
        if self.settled[k] and picked != self.graded[k]:
            self.pickers[k].value = self.graded[k]
        elif self.misses[k] and not self.settled[k] and picked != self.graded[k]:
            self.feedback[k].value = _box(f"New pick: press {self.buttons[k].description} to grade it.")
