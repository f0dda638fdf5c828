"""reveal: a collapsed accordion whose one panel holds the text, escaped."""

from __future__ import annotations

import ipywidgets as widgets
import pytest

from pagedkv.viz.reveal import reveal


def test_the_accordion_starts_collapsed_with_its_title():
    acc = reveal("Show the runs", "line 1\nline 2")
    assert isinstance(acc, widgets.Accordion)
    assert acc.selected_index is None
    assert acc.get_title(0) == "Show the runs"
    assert len(acc.children) == 1


def test_the_text_is_shown_exactly_with_html_escaped():
    text = "a < b & c > d\nmean batch = 18,119 / 1,027"
    (body,) = reveal("t", text).children
    inner = body.value.split(">", 1)[1].rsplit("</pre>", 1)[0]
    # an independent oracle: undo the five escapes by hand
    for esc, ch in (("&lt;", "<"), ("&gt;", ">"), ("&quot;", '"'), ("&#x27;", "'"), ("&amp;", "&")):
        inner = inner.replace(esc, ch)
    assert inner == text
    assert "<b" not in body.value.split(">", 1)[1]


PNG = b"\x89PNG\r\n\x1a\n"


def pngs_shown(html_text: str) -> list[bytes]:
    """The bytes a browser decodes from each `data:image/png;base64,...` picture."""
    import base64
    import re

    found = re.findall(r"data:image/png;base64,([^'\"]*)", html_text)
    return [base64.b64decode(payload, validate=True) for payload in found]


@pytest.mark.slow
def test_in_a_kernel_what_a_revealed_block_prints_stays_inside_the_accordion():
    """A real kernel runs a cell with `revealed`: the cell's own outputs hold the accordion's
    view only, no printed line and no picture (those go into the widget's Output)."""
    import nbformat
    from nbclient import NotebookClient

    code = (
        "%matplotlib inline\n"
        "from matplotlib.figure import Figure\n"
        "from pagedkv.viz.reveal import revealed\n"
        "with revealed('What step 1 did'):\n"
        "    print('step 1: allocate page 0')\n"
        "    fig = Figure(figsize=(1, 1))\n"
        "    fig.add_subplot()\n"
        "    display(fig)\n"  # IPython formats a figure as base64 text ...
        "    from pagedkv.scenarios import ScenarioRun\n"
        "    from pagedkv.viz import plot_pool\n"
        "    display(plot_pool(ScenarioRun('walkthrough').seqs.snapshot()))"  # ... a pool picture as bytes
    )
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    NotebookClient(nb, timeout=120).execute()
    outputs = nb.cells[0].outputs
    assert [o.output_type for o in outputs] == ["display_data"], outputs  # the accordion only
    assert "application/vnd.jupyter.widget-view+json" in outputs[0].data
    assert "allocate page 0" not in str(outputs)
    assert outputs[0].data["text/plain"] == "[What step 1 did: a closed box; run this cell to show it]"
    # ... and the accordion's widget (kept in the notebook's widget state) holds both
    state = str(nb.metadata["widgets"])
    assert "step 1: allocate page 0" in state
    pictures = pngs_shown(state)
    assert len(pictures) == 2 and all(p.startswith(PNG) for p in pictures), "not PNGs a browser decodes"


def test_the_accordion_holds_the_printed_lines_then_the_pictures():
    from IPython.display import display
    from matplotlib.figure import Figure

    from pagedkv.viz.reveal import revealed

    with revealed("What step 1 did") as accordion:
        print("step 1: allocate page 0 <for A>")
        display(Figure(figsize=(1, 1)))
    assert accordion.selected_index is None and accordion.get_title(0) == "What step 1 did"
    (holder,) = accordion.children
    assert "step 1: allocate page 0 &lt;for A&gt;" in holder.value  # escaped, as printed


def _answer_right(quiz) -> None:
    for k, q in enumerate(quiz.questions):
        quiz.check(k, q.answer)


def test_a_predictions_result_box_opens_once_it_is_answered():
    """The closed box made right after a "Predict" quiz stays closed while a question is
    open (a first wrong pick leaves a second try) and opens when the last is settled; the
    line under the quiz then says so."""
    from pagedkv.viz import Quiz
    from pagedkv.viz.reveal import revealed

    quiz = Quiz("11-predict-routing")
    with revealed("Result (open after answering)") as box:
        print("the answer")
    q = quiz.questions[0]
    quiz.check(0, next(o for o in q.options if o != q.answer))
    assert box.selected_index is None  # a second try is left: the answer stays closed
    quiz.check(0, q.answer)
    assert box.selected_index == 0 and quiz.note.layout.display != "none"
    assert "box below is open" in quiz.note.value


def test_every_box_made_right_after_a_prediction_opens_but_not_after_a_check_quiz():
    """Notebook 09 makes three boxes in the cell after a prediction: all three open once it is
    answered (only the first did). A check quiz made later stops the prediction from taking
    later boxes (in a notebook, so does a cell two or more after the prediction's)."""
    from pagedkv.viz import Quiz

    quiz = Quiz("11-predict-routing")
    first, second = reveal("Result", "answer"), reveal("Result, part two", "more")
    check = Quiz("11-check")  # a check quiz at a notebook's end: no box of its own
    later = reveal("Some later box", "text")
    _answer_right(quiz)
    assert first.selected_index == 0 and second.selected_index == 0
    assert "boxes below are open" in quiz.note.value
    _answer_right(check)
    assert later.selected_index is None


def test_a_result_box_stays_locked_until_its_prediction_is_answered():
    """Learner 0809 opened a Result box with one click before answering: a box a prediction
    holds shows only the "locked" line, and its contents are not in any widget's value (so not
    in the browser) until the prediction is settled; then it shows them, open."""
    from pagedkv.viz import Quiz
    from pagedkv.viz.reveal import LOCKED

    quiz = Quiz("09-predict-indexes")
    box = reveal("Result (open after answering)", "the secret answer")
    (panel,) = box.children
    assert panel.value == LOCKED and "secret" not in panel.value
    box.selected_index = 0  # the learner clicks the title: the panel shows the lock only
    assert panel.value == LOCKED
    q = quiz.questions[0]
    quiz.check(0, next(o for o in q.options if o != q.answer))
    assert panel.value == LOCKED  # a second try is left
    quiz.check(0, q.answer)
    assert "the secret answer" in panel.value and box.selected_index == 0


def test_an_answer_box_opens_only_when_every_quiz_it_follows_is_answered():
    """Notebook 09's summary follows two check quizzes: answering the first leaves it locked,
    and the first quiz's note does not claim a box below is open."""
    from pagedkv.viz import Quiz
    from pagedkv.viz.answer_box import answer_box
    from pagedkv.viz.questions import note
    from pagedkv.viz.reveal import LOCKED

    first, second = Quiz("09-check"), Quiz("09-check-2")
    box = answer_box("09-summary")
    assert box.children[0].value == LOCKED and box.get_title(0) == note("09-summary").title
    _answer_right(first)
    assert box.children[0].value == LOCKED and box.selected_index is None
    assert first.note.layout.display == "none"
    _answer_right(second)
    assert box.selected_index == 0 and "radix tree keeps the tokens" in box.children[0].value
    assert "box below is open" in second.note.value
    later = answer_box("09-summary")  # made after both are answered: open at once
    assert later.selected_index == 0 and later.children[0].value != LOCKED


def test_an_answer_box_renders_a_pipe_table_and_escapes_its_text():
    from pagedkv.viz.answer_box import note_html

    shown = note_html("| a | b |\n|---|---|\n| `x` < 1 | **y** |\n\nafter")
    assert shown.count("<tr>") == 2 and "<th" in shown and "<code>x</code> &lt; 1" in shown
    assert "<b>y</b>" in shown and "<p>after</p>" in shown and "---" not in shown


def test_a_box_revealed_after_a_quiz_stays_locked_until_that_quiz_is_answered():
    """`revealed(..., after=id)` in a later cell (a check quiz in between stops the prediction
    from taking boxes by position): opened before the answer it shows only the locked line,
    its contents not in the browser; once every question of that quiz is right, it opens."""
    from pagedkv.viz import Quiz
    from pagedkv.viz.reveal import LOCKED, revealed

    quiz = Quiz("10-predict-streams")
    Quiz("10-check")  # no box of its own: a box made now is not the prediction's by position
    with revealed("Result: the verdicts", after="10-predict-streams") as box:
        print("the secret verdicts")
    box.selected_index = 0  # the learner opens it before answering
    (panel,) = box.children
    assert panel.value == LOCKED and "secret" not in panel.value
    q = quiz.questions[0]
    quiz.check(0, q.answer)  # one of two questions answered: still locked
    assert panel.value == LOCKED
    _answer_right(quiz)
    assert "the secret verdicts" in panel.value and box.selected_index == 0


def test_a_box_revealed_after_a_quiz_not_made_yet_stays_locked():
    from pagedkv.viz.reveal import LOCKED, revealed

    with revealed("Result", after="no-such-quiz-made") as box:
        print("hidden")
    assert box.children[0].value == LOCKED


def test_a_box_made_after_its_quiz_is_answered_opens_at_once():
    """The title says the box opens when the question is answered: one made (or re-made by
    running its cell again) after the answer is open, with its contents, not left closed."""
    from pagedkv.viz import Quiz
    from pagedkv.viz.reveal import revealed

    quiz = Quiz("10-predict-streams")
    _answer_right(quiz)
    with revealed("Result: the verdicts", after="10-predict-streams") as box:
        print("the verdicts")
    assert box.selected_index == 0 and "the verdicts" in box.children[0].value


def test_a_box_made_after_its_quiz_is_answered_no_longer_says_when_it_opens():
    """An answer box made once its quiz is answered is open: its title drops "(opens ...)", as
    a box unlocked by the answer does (notebook 10's Mine box is made this way)."""
    from pagedkv.viz import Quiz
    from pagedkv.viz.answer_box import answer_box

    _answer_right(Quiz("10-predict-mine"))
    box = answer_box("10-mine-why")
    assert box.get_title(0) == "Why Mine beats LRU where it does"
    assert box.selected_index == 0


def test_a_locked_box_says_in_its_title_that_it_opens_when_answered():
    """A box a question holds opens by itself: its title says so (once), a free box's does not,
    and a title that already says when it opens is left as it is."""
    from pagedkv.viz import Quiz
    from pagedkv.viz.reveal import OPENS, ClosedBox, await_result, reveal

    await_result(None)  # no prediction waits for a box
    assert reveal("Result", "x").get_title(0) == "Result"  # no question holds it
    Quiz("10-predict-streams")
    held = reveal("Result", "x")  # made in the prediction's cell: it holds the box
    assert held.get_title(0) == "Result" + OPENS
    held.lock("another question")
    assert held.get_title(0) == "Result" + OPENS
    own = ClosedBox("The summary (opens once both quizzes above are answered)")
    own.lock("a quiz")
    assert own.get_title(0) == "The summary (opens once both quizzes above are answered)"


def test_a_box_revealed_after_a_step_prediction_opens_once_it_is_settled():
    """`revealed(..., after=id)` with a PredictStep (notebook 04's step 5): locked, its title
    says it opens, and it opens when the prediction is answered (here wrong twice)."""
    from pagedkv.viz import PredictStep
    from pagedkv.viz.reveal import LOCKED, OPENS, revealed

    predict = PredictStep("04-cow")
    with revealed("Result: step 5", after="04-cow") as box:
        print("what step 5 did")
    assert box.children[0].value == LOCKED and box.get_title(0) == "Result: step 5" + OPENS
    wrong = [o for o in predict.data.shown_options if o != predict.data.read(predict.run.step(), predict.run)]
    predict = PredictStep("04-cow")  # a fresh run: the one above has taken its step
    with revealed("Result: step 5", after="04-cow") as box:
        print("what step 5 did")
    predict.answer(wrong[0])
    assert box.children[0].value == LOCKED
    predict.answer(wrong[1])
    assert predict.settled and box.selected_index == 0 and "what step 5 did" in box.children[0].value


def test_no_notebook_asks_to_open_a_box_that_opens_by_itself():
    """A box a question holds opens by itself when the question is answered, and clicking its
    title then closes it: a notebook that says "open after answering" sends the learner to close
    the answer (two learners did). The package writes the title's "(opens when you answer)"."""
    import json
    import re
    from pathlib import Path

    stale = re.compile(r"open (it )?after (answering|you answer|predicting)")
    for path in sorted((Path(__file__).resolve().parents[1] / "notebooks").rglob("*.ipynb")):
        for i, cell in enumerate(json.loads(path.read_text())["cells"]):
            found = stale.search("".join(cell["source"]))
            assert found is None, f"{path.name} cell {i}: {found.group(0)!r}"


def test_no_notebook_makes_a_second_quiz_widget_just_to_read_its_data():
    """A quiz made for an id holds the boxes revealed after that id from then on: a cell that
    builds `Quiz("05-try")` only to read its text registers an unanswered quiz no learner sees,
    and 05's Try-it box locked again on a rerun (a learner's report). Read `questions.quiz`."""
    import json
    import re
    from pathlib import Path

    hidden = re.compile(r"""(Quiz|PredictStep)\(["'][^"']*["']\)\.""")
    for path in sorted((Path(__file__).resolve().parents[1] / "notebooks").rglob("*.ipynb")):
        for i, cell in enumerate(json.loads(path.read_text())["cells"]):
            found = hidden.search("".join(cell["source"]))
            assert found is None, f"{path.name} cell {i}: {found.group(0)!r}"


def test_an_answer_box_after_a_step_prediction_opens_once_it_is_settled():
    """03's note follows a step prediction, not a quiz: locked until the prediction is settled
    (here wrong twice), then open with its text."""
    from pagedkv.viz import PredictStep
    from pagedkv.viz.answer_box import answer_box
    from pagedkv.viz.reveal import LOCKED

    predict = PredictStep("03-evict")
    box = answer_box("03-evict-after")
    assert box.children[0].value == LOCKED
    probe = PredictStep("03-evict")  # a second run, only to learn the step's outcome
    actual = probe.data.read(probe.run.step(), probe.run)
    predict = PredictStep("03-evict")  # the learner's widget, made last for the id
    box = answer_box("03-evict-after")
    for wrong in [o for o in predict.data.shown_options if o != actual][:2]:
        predict.answer(wrong)
    assert predict.settled and box.selected_index == 0 and "doc_D" in box.children[0].value


def test_a_boxs_plain_text_form_does_not_change_when_a_question_holds_it():
    """Whether a prediction holds a box depends on execution counts, which a notebook runner
    (nbval) need not advance as JupyterLab does: the saved text names the title as made."""
    from pagedkv.viz.reveal import ClosedBox

    box = ClosedBox("Result: step 5")
    before = repr(box)
    box.lock("a prediction")
    assert repr(box) == before == "[Result: step 5: a closed box; run this cell to show it]"


def test_an_opened_box_no_longer_says_it_opens_when_you_answer():
    """Once its last question is answered the box is open, and a click closes it: its title
    drops "(opens when you answer)" (a learner clicked it expecting it to open)."""
    from pagedkv.viz.reveal import OPENS, ClosedBox

    box = ClosedBox("Result: step 5")
    box.lock("a prediction")
    assert box.get_title(0) == "Result: step 5" + OPENS
    box.unlock("a prediction")
    assert box.selected_index == 0 and box.get_title(0) == "Result: step 5"


def test_an_opened_box_drops_a_notebooks_own_opens_once_too():
    """A notebook may say which questions a box waits for ("(opens once all five are
    answered)"); the package adds no second note, and the opened box drops that one too."""
    from pagedkv.viz.reveal import OPENS, ClosedBox

    box = ClosedBox("The summary (opens once both quizzes above are answered)")
    box.lock("quiz 1")
    box.lock("quiz 2")
    assert OPENS not in box.get_title(0) and box.get_title(0).endswith("are answered)")
    box.unlock("quiz 1")
    assert box.selected_index is None and "(opens once" in box.get_title(0)
    box.unlock("quiz 2")
    assert box.selected_index == 0 and box.get_title(0) == "The summary"


def test_a_box_opened_by_a_click_drops_click_to_open_from_its_title():
    """A box titled "(click to open)" no longer says so once a click opened it; its
    plain-text form keeps the title as made."""
    from pagedkv.viz.reveal import ClosedBox

    box = ClosedBox("best mean of the three seeds (click to open)")
    assert box.get_title(0).endswith("(click to open)")
    box.selected_index = 0  # what a click does
    assert box.get_title(0) == "best mean of the three seeds"
    assert "(click to open)" in repr(box)
    locked = ClosedBox("Result (click to open)")
    locked.lock("a quiz")
    locked.selected_index = 0  # a click on a locked box shows LOCKED: the title stays
    assert "(click to open)" in locked.get_title(0)
