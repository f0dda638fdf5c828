"""Options a learner cannot guess by place or length, in the same order on every run, and a
click on the displayed button graded by what it shows.

Oracles: the widgets' own displayed labels (what the browser draws, `_options_labels`), a
fresh run of each prediction's scenario (what the step really does), and a second Python
process with another hash seed (the order must not depend on it).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from pagedkv.viz import questions
from pagedkv.viz.grading import inline

ROOT = Path(__file__).resolve().parents[1]
BANK = questions.all_questions()
QUIZ_IDS = sorted(BANK["quiz"])
PREDICTION_IDS = sorted(BANK["predict"])


def _every_question() -> list[tuple[str, tuple[str, ...], str]]:
    """(key, options as stored, answer) of every prediction and quiz question."""
    found = [(p.qid, p.options, p.answer) for p in BANK["predict"].values()]
    for quiz in BANK["quiz"].values():
        found += [(q.key, q.options, q.answer) for q in quiz.questions]
    return found


def _quiz_positions(qid: str) -> list[int]:
    """Where the right answer of each question sits among the buttons a Quiz widget shows."""
    from pagedkv.viz import Quiz

    quiz = Quiz(qid)
    return [list(p._options_labels).index(q.answer) for p, q in zip(quiz.pickers, quiz.questions)]  # noqa: SLF001


def test_the_right_answer_is_not_always_in_the_same_place():
    positions = Counter(pos for qid in QUIZ_IDS for pos in _quiz_positions(qid))
    total = sum(positions.values())
    assert total >= 40 and len(positions) >= 3
    assert max(positions.values()) <= total / 2, positions  # no favourite place


@pytest.mark.parametrize("qid", [q for q in QUIZ_IDS if len(BANK["quiz"][q].questions) >= 3])
def test_within_a_quiz_no_place_holds_most_answers(qid):
    """Notebook 10's check quiz had its answer first in all four questions."""
    positions = _quiz_positions(qid)
    assert max(Counter(positions).values()) <= max(2, len(positions) // 2), positions


def test_predictions_do_not_keep_their_answer_in_the_middle():
    """Six of seven predictions had the middle button right."""
    from pagedkv.viz import PredictStep

    positions = []
    for qid in PREDICTION_IDS:
        ask = PredictStep(qid)
        positions.append([value for _, value in ask.choices.options].index(ask.data.answer))
    assert max(Counter(positions).values()) <= math.ceil(len(positions) / 2), positions


def test_the_right_option_is_not_the_longest_one_as_a_rule():
    """At most a third of the questions have their answer as the one longest option."""
    longest = [
        key
        for key, options, answer in _every_question()
        if all(len(answer) > len(o) for o in options if o != answer)
    ]
    assert len(longest) <= len(_every_question()) / 3, longest


def test_every_question_shows_all_its_options_once():
    for key, options, _ in _every_question():
        shown = questions.shown_order(options, key)
        assert sorted(shown) == sorted(options) and len(set(shown)) == len(shown), key


def test_the_order_is_the_same_in_another_process_with_another_hash_seed():
    code = (
        "from pagedkv.viz import questions as q\n"
        "b = q.all_questions()\n"
        "print([p.shown_options for p in b['predict'].values()])\n"
        "print([x.shown_options for z in b['quiz'].values() for x in z.questions])\n"
    )
    outs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        outs.add(
            subprocess.run(
                [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
            ).stdout
        )
    here = (
        f"{[p.shown_options for p in BANK['predict'].values()]}\n"
        f"{[x.shown_options for z in BANK['quiz'].values() for x in z.questions]}\n"
    )
    assert outs == {here}


def test_the_order_depends_on_the_question_not_on_the_options_alone():
    options = ("a", "b", "c", "d", "e")
    orders = {questions.shown_order(options, f"q{k}") for k in range(20)}
    assert len(orders) > 10  # shuffled by key, so equal option lists still differ in order
    assert questions.shown_order(options, "q1") == questions.shown_order(options, "q1")
    with pytest.raises(TypeError, match="key must be a str"):
        questions.shown_order(options, 1)  # type: ignore[arg-type]


@pytest.mark.parametrize("qid", QUIZ_IDS)
def test_clicking_a_displayed_option_is_graded_by_what_it_shows(qid):
    from pagedkv.viz import Quiz

    quiz = Quiz(qid)
    for k, q in enumerate(quiz.questions):
        labels = list(quiz.pickers[k]._options_labels)  # noqa: SLF001 - what the browser draws
        wrong = next(i for i, label in enumerate(labels) if label != q.answer)
        quiz.pickers[k].index = wrong  # the learner clicks a wrong radio button ...
        quiz.buttons[k].click()
        assert "Not quite" in quiz.feedback[k].value
        assert inline(q.hints[labels[wrong]]) in quiz.feedback[k].value  # that pick's own hint
        quiz.pickers[k].index = labels.index(q.answer)  # ... then the right one
        quiz.buttons[k].click()
        assert quiz.feedback[k].value.count("Right.") == 1


@pytest.mark.parametrize("qid", PREDICTION_IDS)
def test_pressing_the_button_of_what_the_step_does_is_graded_right(qid):
    from pagedkv.viz import PredictStep

    run = questions.prediction(qid).start_run()
    done = questions.prediction(qid).read(run.step(), run)  # what the step does, on its own run
    right, wrong = PredictStep(qid), PredictStep(qid)
    shown = dict((value, label) for label, value in right.choices.options)
    assert shown[done] == right.data.label(done)  # the button names its unit: "5 pages", "page 8"
    right.choices.value = done
    right.button.click()
    assert right.correct is True and "Right" in right.result.value
    wrong.choices.value = picked = next(value for value in shown if value != done)
    wrong.button.click()
    assert wrong.correct is False and "Not quite.</b>" in wrong.result.value
    assert f"{inline(wrong.data.hints[picked])} Think it over" in wrong.result.value
    wrong.choices.value = done  # the second try, on the same step
    wrong.button.click()
    assert wrong.correct is True and "Right." in wrong.result.value


def test_the_after_text_is_rendered_as_html_and_only_once_answered():
    from pagedkv.viz import PredictStep
    from pagedkv.viz.quiz import markdown_html

    ask = PredictStep("05-preempt")
    assert ask.after.value == "" and ask.caption.value == ""
    ask.answer("req2")
    assert "The pool after step 11</b>" in ask.caption.value  # the step the question asks about
    shown = ask.after.value
    assert "<ul><li><code>req1</code> keeps its 6 ACTIVE pages" in shown and "<code>req2</code>" in shown
    assert "**" not in shown and "`" not in shown
    assert markdown_html("a `x<y` and **b**\n\n- *c*\n  d") == (
        "<p>a <code>x&lt;y</code> and <b>b</b></p><ul><li><i>c</i> d</li></ul>"
    )
    assert markdown_html("1. a\n   b;\n2. c\n\n3. d") == (  # a numbered list keeps its numbers
        "<ol start='1'><li>a b;</li><li>c</li></ol><ol start='3'><li>d</li></ol>"
    )
    quiet = PredictStep("01-step4")  # no after text: nothing extra appears
    quiet.answer(quiet.data.answer)
    assert quiet.after.value == ""


def _shown(ask) -> tuple[str, str, str, object, str]:
    """What a prediction shows of its answer: the after text, the caption, the picture (its
    bytes and whether it is displayed) and whether the placeholder still holds its room."""
    return (
        ask.after.value,
        ask.caption.value,
        bytes(ask.picture.value),
        ask.picture.layout.display,
        ask.placeholder.layout.display,
    )


def test_a_first_wrong_prediction_reveals_nothing_and_the_second_pick_reveals_it_all():
    """As in a quiz: a first wrong pick gets "Not quite" and one more try, with the step's
    answer, its after text, caption and picture held back; the second pick shows them, whether
    right or wrong, and says the answer then."""
    from pagedkv.viz import PredictStep

    data = questions.prediction("05-preempt")  # has an after text
    wrong = [o for o in data.options if o != data.answer]
    for second in (data.answer, wrong[1]):
        ask = PredictStep("05-preempt")
        before = _shown(ask)
        ask.answer(wrong[0])
        assert _shown(ask) == before and ask.after.value == "" and ask.picture.layout.display == "none"
        assert "Not quite" in ask.result.value and data.answer not in ask.result.value
        assert inline(data.why) not in ask.result.value and not ask.settled
        assert not ask.choices.disabled and not ask.button.disabled
        ask.answer(second)
        # the second pick, right or wrong, settles and locks the question
        assert ask.settled and ask.choices.disabled and ask.button.disabled
        assert ask.button.description == ("Answered" if second == data.answer else "Answer shown")
        assert inline(data.why) in ask.result.value
        assert ("Right." in ask.result.value) == (second == data.answer)
        assert second == data.answer or f"the answer is “{data.answer}”" in ask.result.value
        assert "<ul><li>" in ask.after.value and "The pool after step 11</b>" in ask.caption.value
        assert ask.picture.layout.display != "none" and ask.placeholder.layout.display == "none"
        assert bytes(ask.picture.value).startswith(b"\x89PNG")
        assert ask.run.cursor == 11  # the step ran once, for both picks
        if second != data.answer:  # then a later pick of the answer changes nothing
            after, verdict = ask.after.value, ask.result.value
            ask.answer(data.answer)
            assert ask.result.value == verdict and "Right." not in verdict
            assert ask.run.cursor == 11 and ask.after.value == after


def test_the_answer_key_lists_the_options_as_shown_and_names_each_answer():
    key = (ROOT / "docs" / "answer_key.md").read_text()
    for quiz in BANK["quiz"].values():
        for q in quiz.questions:
            assert f"{q.text} ({' / '.join(q.shown_options)})\n   Answer: **{q.answer}**." in key
    for p in BANK["predict"].values():
        options = " / ".join(map(p.label, p.shown_options))
        assert f"- Options: {options}\n- Answer: **{p.label(p.answer)}**" in key


def test_the_note_kept_for_the_picture_is_one_line():
    """Before an answer the picture's place is one dashed line (not an empty box as tall as
    the picture); the picture replaces it once the step has run."""
    from pagedkv.viz import PredictStep

    ask = PredictStep("03-evict")
    assert "appears here" in ask.placeholder.value
    assert not any(word in ask.placeholder.value for word in ("aspect-ratio", "height"))
    assert ask.placeholder.layout.height is None and ask.placeholder.layout.max_height is None
    ask.answer("3")
    assert ask.placeholder.layout.display == "none" and ask.picture.value


def _all_questions():
    """(id, options, answer, hints, why) of every prediction and quiz question."""
    found = [(p.qid, p.options, p.answer, p.hints, p.why) for p in BANK["predict"].values()]
    for quiz in BANK["quiz"].values():
        found += [(x.key, x.options, x.answer, x.hints, x.why) for x in quiz.questions]
    return found


@pytest.mark.parametrize("qid, options, answer, hints, why", _all_questions(), ids=lambda x: str(x)[:20])
def test_every_wrong_option_has_a_hint_that_does_not_name_the_answer(qid, options, answer, hints, why):
    assert set(hints) == set(options) - {answer}
    for option, hint in hints.items():
        assert 0 < len(hint) <= 240 and hint.strip() == hint and hint != why
        if len(answer) > 3:  # a short answer ("5", "req2") may stand in a hint for another reason
            assert answer.lower() not in hint.lower(), (option, hint)


def test_a_hint_is_for_a_wrong_option_only():
    with pytest.raises(ValueError, match="hint option must be one of"):
        questions.Question("q", ("a", "b"), "a", "why", hints={"a": "a is right"})
    with pytest.raises(ValueError, match="hint option must be one of"):
        questions.Question("q", ("a", "b"), "a", "why", hints={"c": "not an option"})
    fine = questions.Question("q", ("a", "b"), "a", "why", hints={"b": "b misses x"})
    assert fine.hints == {"b": "b misses x"}


def test_a_first_wrong_pick_shows_that_picks_hint_and_a_second_shows_the_answer():
    from pagedkv.viz import Quiz

    quiz = Quiz("01-check")
    q = quiz.questions[0]
    wrong = [o for o in q.options if o != q.answer]
    quiz.check(0, wrong[0])
    first = quiz.feedback[0].value
    assert inline(q.hints[wrong[0]]) in first and inline(q.hints[wrong[1]]) not in first
    assert inline(q.why) not in first and "the answer is" not in first
    quiz.check(0, wrong[1])
    second = quiz.feedback[0].value
    assert f"the answer is “{q.answer}”" in second and inline(q.why) in second
    # settled: the answer and its reason first, then what this second pick overlooked
    assert second.index(inline(q.why)) < second.index(inline(q.hints[wrong[1]]))
    assert inline(q.hints[wrong[0]]) not in second


def test_a_prediction_quiz_says_what_follows_holds_its_answer_until_answered():
    """After Run All what follows a "Predict" quiz holds its answer (in the next cells, or in a
    closed box to open after answering): the quiz says so under
    its question until every question is settled (right, or wrong twice); a check quiz at a
    notebook's end says nothing of the kind."""
    from pagedkv.viz import Quiz

    for qid in QUIZ_IDS:
        quiz = Quiz(qid)
        predict = BANK["quiz"][qid].title == "Predict"
        assert (quiz.note.layout.display != "none") == predict, qid
        assert quiz.children[-1] is quiz.note and "what follows shows the answer" in quiz.note.value
    quiz = Quiz("11-predict-routing")
    q = quiz.questions[0]
    wrong = [o for o in q.options if o != q.answer]
    quiz.check(0, wrong[0])
    assert quiz.note.layout.display != "none"  # a second try is left: still closed
    quiz.check(0, wrong[1])
    assert quiz.note.layout.display == "none"
    right = Quiz("11-predict-routing")
    right.check(0, q.answer)
    assert right.note.layout.display == "none"


def test_the_answer_key_gives_every_hint():
    key = (ROOT / "docs" / "answer_key.md").read_text()
    for key_id, *_, hints, _ in _all_questions():
        label = BANK["predict"][key_id].label if key_id in BANK["predict"] else str
        for option, hint in hints.items():
            assert f"Hint for “{label(option)}”: {hint}" in key


def test_a_quiz_shows_one_question_at_a_time_and_keeps_every_pick():
    """A quiz of several questions is as tall as one: Previous / Next move between them,
    a pick and its feedback survive the move, and the position line counts done ones."""
    from pagedkv.viz import Quiz

    quiz = Quiz("05-check")
    n = len(quiz.questions)
    assert n > 1
    shown = [p for p in quiz.pages if p.layout.display != "none"]
    assert shown == [quiz.pages[0]] and quiz.previous.disabled and not quiz.next.disabled
    assert f"question 1 of {n} (0 of {n} done, 0 right at first try)" in quiz.position.value
    quiz.check(0, quiz.questions[0].answer)
    assert (
        f"(1 of {n} done, 1 right at first try)" in quiz.position.value
        and quiz.next.button_style == "primary"
    )
    quiz.next.click()
    assert [p for p in quiz.pages if p.layout.display != "none"] == [quiz.pages[1]]
    quiz.previous.click()
    assert quiz.pickers[0].value == quiz.questions[0].answer and "Right." in quiz.feedback[0].value
    for _ in range(n):
        quiz.next.click()
    assert quiz.current == n - 1 and quiz.next.disabled
    with pytest.raises(ValueError, match="k must be a question index"):
        quiz.show(n)
    assert quiz.current == n - 1


def test_a_discussion_button_says_the_answer_is_shown_once_pressed():
    from pagedkv.viz import Discuss

    d = Discuss("05-reserve")
    assert d.button.description == "Show an answer" and d.shown.value == ""
    d.button.click()
    assert d.button.disabled and d.button.description != "Show an answer" and d.shown.value


def test_a_right_pick_locks_the_question_so_a_later_wrong_click_reveals_nothing():
    """A learner who had answered a question right clicked a wrong option again and read
    "Not quite: the answer is ..." as if it were a first try: a right pick now locks the
    question, as it locks a PredictStep."""
    from pagedkv.viz import Quiz

    quiz = Quiz("00-check")
    q = quiz.questions[0]
    wrong = [o for o in q.options if o != q.answer]
    quiz.check(0, wrong[0])
    assert "Not quite.</b>" in quiz.feedback[0].value and "the answer is" not in quiz.feedback[0].value
    assert "A second wrong pick shows the answer." in quiz.feedback[0].value
    assert quiz.check(0, q.answer) and "Right." in quiz.feedback[0].value
    assert quiz.pickers[0].disabled and quiz.buttons[0].disabled
    assert quiz.buttons[0].description == "Answered"
    quiz.pickers[0].value = wrong[1]  # a click after the lock is not graded
    quiz.buttons[0].click()
    assert "Right." in quiz.feedback[0].value and "the answer is" not in quiz.feedback[0].value


def test_the_quiz_counts_done_questions_and_sums_up_first_try_rights_at_the_end():
    from pagedkv.viz import Quiz

    quiz = Quiz("00-check")
    n = len(quiz.questions)
    assert quiz.summary.layout.display == "none"
    # question 0 wrong twice (done, not right at first), 1 wrong then right, the rest right
    plan = [[0, 1], [0, None], *[[None]] * (n - 2)]
    for k, picks in enumerate(plan):
        q = quiz.questions[k]
        wrong = [o for o in q.options if o != q.answer]
        for pick in picks:
            quiz.check(k, q.answer if pick is None else wrong[pick])
        if k < n - 1:
            assert quiz.summary.layout.display == "none"
        quiz.show(k)
        right = sum(1 for j in range(k + 1) if plan[j][0] is None)  # plan's first picks that were right
        assert f"({k + 1} of {n} done, {right} right at first try)" in quiz.position.value
    assert quiz.summary.layout.display != "none"
    assert f"All {n} done</b>, {n - 2} right at the first try." in quiz.summary.value


def test_a_second_wrong_pick_names_the_answer_keeps_the_pick_and_locks_the_question():
    from pagedkv.viz import Quiz

    quiz = Quiz("00-check")
    q = quiz.questions[2]
    wrong = [o for o in q.options if o != q.answer]
    quiz.check(2, wrong[0])
    quiz.check(2, wrong[1])
    assert f"the answer is “{q.answer}”" in quiz.feedback[2].value
    assert f"you picked “{wrong[1]}”" in quiz.feedback[2].value
    assert quiz.pickers[2].value == wrong[1] and quiz.pickers[2].disabled  # the learner's own pick
    assert quiz.buttons[2].disabled and quiz.buttons[2].description == "Answer shown"
    assert "emptied" not in q.why and "FREE" in q.why  # the notebook's words


def test_a_one_question_quiz_shows_no_all_done_summary():
    from pagedkv.viz import Quiz

    quiz = Quiz("09-predict-lock")
    assert len(quiz.questions) == 1
    quiz.check(0, quiz.questions[0].answer)
    assert quiz.settled == [True] and quiz.summary.layout.display == "none"


@pytest.mark.parametrize("k", [0, 2])
def test_a_question_counts_as_done_only_once_answered_right_or_its_answer_shown(k):
    """A first wrong pick leaves a second try open: the position line must not count it done."""
    from pagedkv.viz import Quiz

    quiz = Quiz("01-check")
    n, q = len(quiz.questions), quiz.questions[k]
    wrong = [o for o in q.options if o != q.answer]
    quiz.show(k)  # as a learner's Next does
    quiz.pickers[k].value = wrong[0]
    quiz.buttons[k].click()
    counted = f"(0 of {n} done, 0 right at first try; 1 try left here)"
    assert counted in quiz.position.value and not quiz.buttons[k].disabled  # the click registered
    quiz.pickers[k].value = wrong[1]
    quiz.buttons[k].click()  # the answer is shown: now it is done
    assert f"(1 of {n} done, 0 right at first try)" in quiz.position.value and quiz.buttons[k].disabled


def test_a_predictions_pick_is_framed_with_no_glyph_glued_on():
    """Selected toggles are only a darker grey, faint on a projector: the pick gets a blue frame
    and bold text by CSS, no icon (one sat glued after the label, "req1⦿")."""
    from pagedkv.viz import PredictStep

    predict = PredictStep("05-preempt")
    options = list(predict.data.shown_options)
    for pick in (options[1], options[0]):  # a new pick moves the mark
        predict.choices.value = pick
        assert predict.choices.value == pick and not any(predict.choices.icons)  # no glyph glued on
    assert "pagedkv-predict-choices button.mod-active{outline:3px" in predict.children[0].value


def test_next_after_a_wrong_pick_names_the_question_left_undone():
    """A learner picked wrong, pressed Next and finished the quiz believing every question was
    answered: the pending line now names each question left undone. One tried once and wrong
    has one more try left; it was not skipped (a learner read "You skipped question 2" after
    answering it wrong once). One passed over untried is skipped."""
    from pagedkv.viz import Quiz

    quiz = Quiz("06-check")
    n, q = len(quiz.questions), quiz.questions[0]
    quiz.check(0, next(o for o in q.options if o != q.answer))  # first wrong pick: not settled
    assert not quiz.pending.value  # still on it: nothing left behind
    quiz.next.click()
    assert "Question 1 has one more try left" in quiz.pending.value
    assert "skipped" not in quiz.pending.value
    quiz.next.click()  # question 2 passed over untried
    assert "You skipped question 2; question 1 has one more try left" in quiz.pending.value
    for k in range(1, n):
        quiz.show(k)
        quiz.check(k, quiz.questions[k].answer)
    assert "Question 1 has one more try left<" in quiz.pending.value
    assert quiz.summary.layout.display == "none"
    quiz.show(0)
    assert not quiz.pending.value  # on question 1 itself: its own page says so
    quiz.check(0, q.answer)
    quiz.show(1)
    assert not quiz.pending.value and quiz.summary.layout.display != "none"


def test_a_check_that_reaches_the_kernel_before_its_pick_never_grades_the_old_pick():
    """A learner picked "1 and 1" (wrong), pressed Check, picked "4 and 4" and pressed Check at
    once: the feedback said "you picked “1 and 1”" under "4 and 4" selected. The browser holds a
    pick back while the previous one is in flight, but sends a click at once, so the kernel got
    the second Check before the new pick. That Check must not grade the old pick a second time,
    and the feedback must never name a pick the options do not show."""
    from pagedkv.viz import Quiz

    quiz = Quiz("02-check")
    k = 2  # question 3, as in the learner's run
    q, picker, check = quiz.questions[k], quiz.pickers[k], quiz.buttons[k]
    first, second = "1 and 1", "4 and 4"
    assert q.answer not in (first, second) and {first, second} <= set(q.options)
    picker.value = first
    check.click()  # graded: a first wrong pick
    assert "Not quite." in quiz.feedback[k].value and not quiz.settled[k]
    check.click()  # the second Check, which arrives before ...
    picker.value = second  # ... the second pick
    shown = quiz.feedback[k].value
    assert f"you picked “{first}”" not in shown and not quiz.settled[k] and quiz.misses[k] == 1
    assert "press Check" in shown and not check.disabled and not picker.disabled
    check.click()  # the learner presses Check again: the pick shown is graded
    assert f"you picked “{second}”" in quiz.feedback[k].value and quiz.settled[k]


def test_a_pick_that_reaches_a_locked_question_is_put_back_to_the_graded_one():
    """The same race on a second pick: Check grades (and locks) the pick the kernel holds, and a
    later pick arrives from before the lock. The options go back to the pick that was graded, so
    the one shown selected is always the one the feedback names."""
    from pagedkv.viz import PredictStep, Quiz

    quiz = Quiz("02-check")
    k, q = 2, quiz.questions[2]
    quiz.check(k, "1 and 1")
    quiz.check(k, "4 and 4")  # settled: the answer is shown
    quiz.pickers[k].value = q.answer  # a pick sent before the lock reached the browser
    assert quiz.pickers[k].value == "4 and 4" and "you picked “4 and 4”" in quiz.feedback[k].value
    ask = PredictStep("03-evict")
    wrong = [o for o in ask.data.shown_options if o != ask.data.answer]
    ask.answer(wrong[0])
    ask.button.click()  # a second press on the same wrong pick is no second try
    assert not ask.settled and ask.misses == 1
    ask.answer(wrong[1])  # the second try settles ...
    ask.choices.value = ask.data.answer  # ... and a late pick is put back
    assert ask.choices.value == wrong[1] and ask.correct is False


def test_every_note_follows_quizzes_of_its_own_notebook_and_is_shown_by_id():
    """A note (an answer text in a locked box) names quizzes of its own notebook, and its
    notebook shows it with `answer_box("<id>")`, never its text."""
    import json

    raw = json.loads((ROOT / "pagedkv" / "data" / "questions.json").read_text())
    for qid in raw["notes"]:
        data = questions.note(qid)
        asked = {**BANK["quiz"], **BANK["predict"]}  # a check quiz or a step prediction
        assert all(asked[q].notebook == data.notebook for q in data.after), qid
        (path,) = (ROOT / "notebooks").glob(f"{data.notebook}_*.ipynb")
        text = path.read_text()
        assert f'answer_box(\\"{qid}\\")' in text, (qid, path.name)
        assert data.text.splitlines()[0][:50] not in text, (qid, path.name)


def test_back_from_a_skipped_question_says_it_was_skipped():
    """A learner pressed Next on question 1 of 07-check, then Previous: the banner above
    question 1 read "Not done yet: question 2", like a mislabelled question. It now says
    the learner skipped question 2."""
    from pagedkv.viz import Quiz

    quiz = Quiz("07-check")
    quiz.next.click()
    assert "You skipped question 1<" in quiz.pending.value
    quiz.previous.click()
    assert "You skipped question 2<" in quiz.pending.value and quiz.current == 0


def test_the_skipped_reminder_stays_through_answers_to_other_questions():
    """A learner pressed Next past question 1 of 09-check-2, then answered questions 2 and 3:
    the red "Not done yet: question 1" stayed beside their "Right." and read as stale; it is now
    a grey "You skipped question 1" with a Go-to button. A later learner (05-check) lost that
    reminder, their only way back but Previous, when they answered another question, so it now
    stays until the skipped question is answered."""
    from pagedkv.viz import Quiz

    quiz = Quiz("09-check-2")
    n = len(quiz.questions)
    assert n >= 3
    quiz.next.click()  # question 1 left unanswered
    assert "You skipped question 1<" in quiz.pending.value
    quiz.check(1, quiz.questions[1].answer)
    assert "You skipped question 1<" in quiz.pending.value and quiz.pending.layout.display == ""
    for k in range(2, n):
        quiz.next.click()
        assert "You skipped question 1<" in quiz.pending.value
        quiz.check(k, quiz.questions[k].answer)
    assert "You skipped question 1<" in quiz.pending.value
    quiz.show(0)
    quiz.check(0, quiz.questions[0].answer)
    assert "You skipped" not in quiz.pending.value and quiz.summary.layout.display != "none"


def test_05_check_skipped_question_2_stays_named_after_a_wrong_answer_to_3():
    """The S05 learner's sequence: question 1 answered, Next twice (question 2 passed over),
    question 3 answered wrongly. The reminder and its "Go to question 2" button vanished; they
    stay until question 2 is answered."""
    from pagedkv.viz import Quiz

    quiz = Quiz("05-check")
    assert len(quiz.questions) == 3
    quiz.check(0, quiz.questions[0].answer)
    quiz.next.click()
    quiz.next.click()
    assert quiz.current == 2 and "You skipped question 2<" in quiz.pending.value
    wrong = next(o for o in quiz.questions[2].options if o != quiz.questions[2].answer)
    assert not quiz.check(2, wrong)
    assert "You skipped question 2<" in quiz.pending.value and quiz.pending.layout.display == ""
    assert quiz.goto.layout.display == "" and quiz.goto.description == "Go to question 2"
    quiz.goto.click()
    assert quiz.current == 1
    quiz.check(1, quiz.questions[1].answer)
    assert "You skipped" not in quiz.pending.value
    assert "Question 3 has one more try left" in quiz.pending.value


def test_the_reminder_button_goes_to_the_first_question_left_open():
    """Beside "You skipped ..." a button takes the learner to the first open question (a
    learner scrolled back through the quiz looking for it); it hides when none is open."""
    from pagedkv.viz import Quiz

    quiz = Quiz("06-check")
    assert quiz.goto.layout.display == "none"
    quiz.next.click()  # question 1 passed over untried
    quiz.next.click()  # question 2 too
    assert quiz.goto.layout.display == "" and quiz.goto.description == "Go to question 1"
    quiz.goto.click()
    assert quiz.current == 0
    quiz.check(0, quiz.questions[0].answer)
    quiz.show(2)
    assert quiz.goto.description == "Go to question 2"
    quiz.goto.click()
    assert quiz.current == 1
    quiz.check(1, quiz.questions[1].answer)
    quiz.show(2)
    assert quiz.goto.layout.display == "none"


def test_feedback_renders_the_questions_inline_markdown():
    """A learner saw raw backticks in 05b-check's feedback ("`old` decoded 2"): the why and
    the hints are shown with the questions' inline markdown, as the questions are."""
    from pagedkv.viz.grading import grade

    settled, _ = grade("b", "a", "`old` decoded **2**", misses=1, hint="see `new`")
    assert "<code>old</code> decoded <b>2</b>" in settled and "`" not in settled
    first, _ = grade("b", "a", "why", misses=0, hint="see `new` & *it*")
    assert "see <code>new</code> &amp; <i>it</i>" in first


OPTION_CHARS = 110  # one line of a quiz at 1280 px; the longest option today has 104


def test_no_quiz_option_is_longer_than_one_line():
    """A long option wrapped under the Check button and gave its answer away (09-check-2):
    the reason belongs in the explanation. (No rule on the ratio of lengths: an answer may be a
    word beside options with reasons, as 05b-check's last one was until a learner took the bare
    word for the answer by its form.)"""
    long = [(key, o) for key, options, _ in _every_question() for o in options if len(str(o)) > OPTION_CHARS]
    assert not long, long


def test_the_09_check_2_options_are_alike_in_length():
    """Its question 2's answer was twice as long as the others, which gave it away."""
    (options,) = [options for key, options, _ in _every_question() if key == "09-check-2/2"]
    assert max(map(len, options)) <= 1.5 * min(map(len, options)), options


def test_a_quiz_option_label_grows_with_its_lines_and_spans_the_quiz():
    """ipywidgets gives a radio label one line's height; the quiz's style lets it grow, so a
    wrapped option never sits under the Check button, which comes after the options."""
    from pagedkv.viz import Quiz
    from pagedkv.viz.quiz import OPTION_STYLE

    quiz = Quiz("09-check-2")
    assert (
        OPTION_STYLE in quiz.children[0].value and ".pagedkv-quiz-options label{height:auto" in OPTION_STYLE
    )
    # a flex label voids the radio's float: without `order` each radio sat after its text
    # (two learners), in no column
    assert ".pagedkv-quiz-options label input{order:-1}" in OPTION_STYLE
    for page, picker, button in zip(quiz.pages, quiz.pickers, quiz.buttons):
        assert picker.layout.width == "100%" and picker.layout.height == "auto"
        assert page.children.index(picker) < page.children.index(button)


def test_next_sits_before_the_position_line_so_a_longer_line_never_moves_it():
    """A first wrong pick adds "; 1 try left here" to the position line; Next comes before
    that line, so the button a learner reaches for stays where it was."""
    from pagedkv.viz import Quiz

    quiz = Quiz("06-check")
    nav = quiz.children[1]
    assert list(nav.children) == [quiz.previous, quiz.next, quiz.position]
    wrong = next(o for o in quiz.questions[0].options if o != quiz.questions[0].answer)
    quiz.check(0, wrong)
    assert "1 try left here" in quiz.position.value and list(nav.children)[:2] == [quiz.previous, quiz.next]


def test_no_quiz_option_carries_markdown() -> None:
    """A radio button's label is plain text: a learner saw "priority: `old` still has..." with
    its backticks (05b-predict-victim). The question, the why and the hints render markdown;
    the options must not need it."""
    marked = [
        (key, o) for key, options, _ in _every_question() for o in options if any(m in str(o) for m in "`*")
    ]
    assert not marked, marked
