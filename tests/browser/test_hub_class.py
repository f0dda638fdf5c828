"""A class on JupyterHub, end to end in Chromium, with real parts only.

`make hub`'s hub (classroom/hub.py: a real JupyterHub with configurable-http-proxy from npm,
the trial authenticator, one instructor and two students, nbgrader's exchange for the course)
on loopback ports, and each person in their own Chromium context:

1. everyone logs in at once through the hub's login page (the hub starts their JupyterLab);
2. the instructor, in the formgrader, generates the student version of "exercises"
   (nbgrader generate_assignment into the instructor's course folder) and releases it;
3. both students fetch it (Nbgrader > Assignment List > Fetch);
4. they answer: student1 the model answers, student2 the same with one mistake (one page
   per token in `pages_needed`), written into their fetched notebook through their own
   Jupyter server's contents API (what saving a notebook does); both press Submit;
5. the instructor collects, autogrades each submission, generates and releases feedback,
   all with the formgrader's buttons;
6. each student presses Fetch Feedback and opens their own feedback page.

The grades are 14 (full marks) and 13. Screenshots (a student's fetched assignment, the
formgrader's submissions, each student's feedback page and the mistake's feedback) go to
build/screenshots/hub-*.png and the
steps' seconds to build/browser/hub-timings.txt (printed too).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat
import pytest

from classroom.hub import ASSIGNMENT, INSTRUCTOR, ClassHub, missing_requirement, processes_in

from ..test_nbgrader import MISTAKE
from .conftest import VIEWPORT
from .hubpage import HubUser, Steps, resident_mb
from .labserver import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NOTEBOOK = "pagedkv_exercises.ipynb"
HUB_LOG = ROOT / "build" / "browser" / "jupyterhub.log"
TIMINGS = ROOT / "build" / "browser" / "hub-timings.txt"
CORRECT, MISTAKEN = "student1", "student2"
MARKER = re.compile(r"### (BEGIN|END) SOLUTION")


@pytest.fixture(scope="module")
def steps() -> Steps:
    return Steps()


@pytest.fixture(scope="module")
def class_hub(chromium, tmp_path_factory, steps):
    """classroom/hub.py's hub in a temporary folder; stopped after, with nothing left running."""
    reason = missing_requirement()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true: {reason}", pytrace=False)
        pytest.skip(reason)
    hub = ClassHub(tmp_path_factory.mktemp("class-hub"), students=(CORRECT, MISTAKEN))
    hub.start(HUB_LOG)
    steps.done("hub started (answers /hub/api/)")
    try:
        yield hub
    finally:
        left = hub.stop()
        steps.done("hub stopped (SIGTERM; it stops the proxy and the users' servers)")
        TIMINGS.parent.mkdir(parents=True, exist_ok=True)
        TIMINGS.write_text(steps.report() + "\n")
        print(f"\nThe class round trip on JupyterHub:\n{steps.report()}")
        assert not left, f"processes outlived the hub (killed): {left}"


@pytest.fixture
def people(class_hub, browser):
    users = {
        name: HubUser(browser, class_hub.url, name, VIEWPORT) for name in (INSTRUCTOR, CORRECT, MISTAKEN)
    }
    try:
        yield users
    finally:
        for user in users.values():
            user.close()


def test_a_class_round_trip_on_jupyterhub(class_hub: ClassHub, people, steps, screenshot_dir):
    for name, user in people.items():  # all three at once, as a class arrives
        user.log_in(class_hub.password(name))
    for name, user in people.items():
        user.wait_lab()
        steps.done(f"{name}: JupyterLab loaded (the three logins and spawns at once)")
    memory = {name: resident_mb(processes_in(class_hub.home(name))) for name in people}
    steps.note("memory of each user's server: " + ", ".join(f"{n} {mb:.0f} MB" for n, mb in memory.items()))
    teacher = people[INSTRUCTOR]
    teacher.formgrader("manage_assignments")
    assert "Successfully created the student version" in teacher.formgrader_action(ASSIGNMENT, "assign")
    steps.done("instructor: formgrader Generate (nbgrader generate_assignment)")
    teacher.formgrader_action(ASSIGNMENT, "release")
    steps.done("instructor: formgrader Release")
    assert (class_hub.exchange / "pagedkv" / "outbound" / ASSIGNMENT / NOTEBOOK).is_file()

    for name in (CORRECT, MISTAKEN):
        _fetch(people[name], screenshot_dir if name == CORRECT else None)
        steps.done(f"{name}: Assignment List > Fetch")
    for name in (CORRECT, MISTAKEN):
        _answer(people[name], mistake=name == MISTAKEN)
        _submit(people[name])
        steps.done(f"{name}: answers saved, Assignment List > Submit")

    _grade(teacher, steps, screenshot_dir)
    assert _score(class_hub, CORRECT) == (14, 14)
    assert _score(class_hub, MISTAKEN) == (13, 14)
    # The formgrader graded with classroom/'s settings: the pictures were left out.
    graded = nbformat.read(class_hub.course / "autograded" / CORRECT / ASSIGNMENT / NOTEBOOK, as_version=4)
    code = "\n".join(cell.source for cell in graded.cells)
    assert "ScenarioRun" not in code and "plot_" not in code and "pages_needed_graded" in str(graded)

    for name in (CORRECT, MISTAKEN):
        html = _fetch_feedback(people[name], screenshot_dir / f"hub-{name}-feedback.png")
        steps.done(f"{name}: Fetch Feedback, own feedback page open")
        score = "14.0 / 14.0" if name == CORRECT else "13.0 / 14.0"
        assert f"<h4>{Path(NOTEBOOK).stem} (Score: {score})</h4>" in html
        assert ("one page per token" in html) == (name == MISTAKEN)
    # The mistaken student's feedback where it matters: the pages_needed check, 0 of 1 point.
    page = people[MISTAKEN].page
    cell = page.locator("div.cell").filter(has=page.locator('a[name="pages_needed_graded"]'))
    assert "one page per token" in cell.inner_text()
    people[MISTAKEN].screenshot(screenshot_dir / "hub-student2-feedback-mistake.png", cell)


def _fetch(student: HubUser, screenshots: Path | None) -> None:
    student.assignment_list()
    student.click_in_list("released", ASSIGNMENT, "Fetch")
    row = student.wait_in_list("fetched", ASSIGNMENT)
    assert row.get_by_role("button", name="Submit", exact=True).count() == 1
    if screenshots is not None:  # with the assignment opened up: its notebook, Validate
        row.locator(".assignment-notebooks-link").first.click()
        nested = student.page.locator("#fetched_assignments_list .nested_list_item")
        nested.filter(has_text=Path(NOTEBOOK).stem).first.wait_for(timeout=30_000)
        student.screenshot(screenshots / "hub-student-fetched.png")


def _answers() -> dict[str, str]:
    """grade_id -> the source notebook's model answer, the solution markers left out."""
    source = nbformat.read(ROOT / "notebooks" / "exercises" / NOTEBOOK, as_version=4)
    answers = {}
    for cell in source.cells:
        grading = cell.metadata.get("nbgrader", {})
        if grading.get("solution"):
            lines = [
                line for line in cell.source.splitlines() if "### BEGIN" not in line and "### END" not in line
            ]
            answers[grading["grade_id"]] = "\n".join(lines)
    return answers


def _answer(student: HubUser, mistake: bool) -> None:
    """Write the answers into the student's fetched notebook, as saving it in JupyterLab does."""
    path = f"contents/{ASSIGNMENT}/{NOTEBOOK}"
    notebook = student.api("GET", path)["content"]
    answers, written = _answers(), 0
    for cell in notebook["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            assert "raise NotImplementedError()" in "".join(cell["source"])  # the student version
            cell["source"] = answers[grade_id]
            if mistake and MISTAKE[0] in cell["source"]:
                cell["source"] = cell["source"].replace(*MISTAKE)
                written += 100
            written += 1
    assert written == (107 if mistake else 7), written
    student.api("PUT", path, {"type": "notebook", "format": "json", "content": notebook})


def _submit(student: HubUser) -> None:
    student.refresh_assignments()
    student.click_in_list("fetched", ASSIGNMENT, "Submit")
    student.wait_in_list("submitted", re.compile(r"\d{4}-\d{2}-\d{2}"))  # a row with its timestamp


def _grade(teacher: HubUser, steps: Steps, screenshots: Path) -> None:
    teacher.formgrader("manage_assignments")
    teacher.formgrader_action(ASSIGNMENT, "collect")
    steps.done("instructor: formgrader Collect")
    teacher.formgrader(f"manage_submissions/{ASSIGNMENT}")
    for student in (CORRECT, MISTAKEN):
        teacher.formgrader_action(student, "autograde")
        steps.done(f"instructor: formgrader Autograde {student}")
    teacher.formgrader(f"manage_submissions/{ASSIGNMENT}")
    teacher.screenshot(screenshots / "hub-formgrader-submissions.png")
    teacher.formgrader("manage_assignments")
    teacher.formgrader_action(ASSIGNMENT, "generate-feedback")
    steps.done("instructor: formgrader Generate Feedback")
    teacher.formgrader_action(ASSIGNMENT, "release-feedback")
    steps.done("instructor: formgrader Release Feedback")


def _score(hub: ClassHub, student: str) -> tuple[float, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{hub.course / 'gradebook.db'}") as gradebook:
        submission = gradebook.find_submission(ASSIGNMENT, student)
        return submission.score, submission.max_score


def _fetch_feedback(student: HubUser, screenshot: Path) -> str:
    """Assignment List > Fetch Feedback; open the student's own feedback page; its HTML."""
    panel = student.assignment_list()
    student.refresh_assignments()
    panel.get_by_role("button", name="Fetch Feedback", exact=True).first.click(timeout=120_000)
    panel.get_by_text("(view feedback)").first.wait_for(timeout=120_000)
    folder = f"{ASSIGNMENT}/feedback"
    (stamp,) = [item["name"] for item in student.api("GET", f"contents/{folder}")["content"]]
    page = student.page
    page.goto(f"{student.server}/files/{folder}/{stamp}/{NOTEBOOK.replace('.ipynb', '.html')}")
    page.get_by_text("Score:").first.wait_for(timeout=60_000)
    student.screenshot(screenshot)  # the top: the score of each exercise
    return page.content()
