"""The exercise notebooks through the real nbgrader, driven by the Makefile's targets in a
temporary copy of the course (the Makefile, notebooks/exercises/, classroom/).

`make assignments` -> three submissions copied into build/submitted/ by hand (the source
notebook with its solutions, the student version untouched, the source with one known
mistake) -> `make autograde` -> `make feedback`. Full marks, zero and partial marks; the
feedback names the mistake; the student version holds no solution text. Then the student
with the mistake resubmits a fix (copied over the old notebook, as a teacher does) and
`make autograde` / `make feedback` regrade it: new grade, new feedback, the others untouched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import nbformat  # imported where used: it loads jsonschema's format checkers, ~2 s per process

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "notebooks" / "exercises"
NOTEBOOK = "pagedkv_exercises.ipynb"
ASSIGNMENT = "exercises"
MISTAKE = ("return -(-num_tokens // page_size)", "return num_tokens")  # one page per token

pytestmark = pytest.mark.slow


def _make(course: Path, target: str, *args: str) -> str:
    """`make target` in the course copy, with this test's environment as the Makefile's venv."""
    venv = Path(sys.prefix)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR", "MPLCONFIGDIR"):
        env[name] = str(course / ".home" / name.lower())
    result = subprocess.run(  # -o: never (re)install into the venv the tests run in
        ["make", target, f"VENV={venv}", "-o", f"{venv}/.installed", *args],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def _solution_lines(nb: nbformat.NotebookNode) -> list[str]:

    lines = []
    for cell in nb.cells:
        inside = False
        for line in cell.source.splitlines():
            if "### BEGIN SOLUTION" in line or "### END SOLUTION" in line:
                inside = "BEGIN" in line
            elif inside and line.strip():
                lines.append(line.strip())
    return lines


def _submit(course: Path, student: str, nb: nbformat.NotebookNode) -> None:
    """What the teacher does by hand: write the notebook into build/submitted/<student>/."""
    import nbformat

    folder = course / "build" / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / NOTEBOOK)


def _with_mistake() -> nbformat.NotebookNode:
    import nbformat

    wrong = nbformat.read(SOURCE / NOTEBOOK, as_version=4)
    cell = next(c for c in wrong.cells if MISTAKE[0] in c.source)
    cell.source = cell.source.replace(*MISTAKE)
    return wrong


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    import nbformat

    course = tmp_path_factory.mktemp("course")
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, course / name)
    shutil.copytree(SOURCE, course / "notebooks" / "exercises")
    shutil.copytree(ROOT / "classroom", course / "classroom", ignore=shutil.ignore_patterns("__pycache__"))
    _make(course, "assignments")
    student = nbformat.read(course / "build" / "release" / ASSIGNMENT / NOTEBOOK, as_version=4)
    _submit(course, "solution", nbformat.read(SOURCE / NOTEBOOK, as_version=4))
    _submit(course, "blank", student)
    _submit(course, "wrong", _with_mistake())
    _make(course, "autograde")
    _make(course, "feedback")
    return course


def _score(course: Path, student: str) -> tuple[float, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'build' / 'gradebook.db'}") as gradebook:
        submission = gradebook.find_submission(ASSIGNMENT, student)
        return submission.score, submission.max_score


def _feedback(course: Path, student: str) -> str:
    page = course / "build" / "feedback" / student / ASSIGNMENT / NOTEBOOK.replace(".ipynb", ".html")
    return page.read_text()


def test_the_student_version_holds_no_solution(course):
    import nbformat

    source = nbformat.read(SOURCE / NOTEBOOK, as_version=4)
    student = nbformat.read(course / "build" / "release" / ASSIGNMENT / NOTEBOOK, as_version=4)
    code = "\n".join(c.source for c in student.cells if c.cell_type == "code")
    solution = _solution_lines(source)
    assert len(solution) > 30
    assert [line for line in solution if line in code] == []
    assert "BEGIN SOLUTION" not in code and code.count("raise NotImplementedError()") >= 7
    assert all(not c.get("outputs") for c in student.cells if c.cell_type == "code")


def test_the_solutions_get_full_marks(course):
    score, max_score = _score(course, "solution")
    assert max_score == 14 and score == max_score


def test_the_untouched_student_version_gets_zero(course):
    assert _score(course, "blank") == (0, 14)


def test_one_mistake_costs_its_points_and_the_feedback_names_it(course):
    assert _score(course, "wrong") == (13, 14)
    html = _feedback(course, "wrong")
    assert "one page per token" in html and "num_tokens=2, page_size=2" in html
    assert "not written yet" in _feedback(course, "blank")
    grades = (course / "build" / "grades.csv").read_text()
    assert "wrong" in grades and "13.0" in grades


def test_the_graded_run_leaves_out_the_cells_that_score_nothing(course):
    # classroom/nbgrader_config.py (through the Makefile) drops the skip-in-grading cells:
    # the pictures and the practice check cells; every graded cell and answer stays.
    import nbformat

    graded = nbformat.read(course / "build" / "autograded" / "solution" / ASSIGNMENT / NOTEBOOK, as_version=4)
    source = nbformat.read(SOURCE / NOTEBOOK, as_version=4)
    code = "\n".join(c.source for c in graded.cells)
    skipped = [c for c in source.cells if "skip-in-grading" in c.metadata.get("tags", [])]
    assert len(skipped) >= 14 and "ScenarioRun" not in code and "plot_" not in code
    ids = lambda nb: [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]  # noqa: E731
    assert [i for i in ids(graded) if i] == [i for i in ids(source) if i]


def test_a_resubmitted_fix_is_regraded_with_new_feedback(course):
    # Runs after the tests above (pytest keeps file order): they saw the first grades.
    import nbformat

    assert _score(course, "wrong") == (13, 14)
    time.sleep(1.1)  # the copy is newer than the first grading, as in any real resubmission
    _submit(course, "wrong", nbformat.read(SOURCE / NOTEBOOK, as_version=4))
    _make(course, "autograde")
    out = _make(course, "feedback")
    assert _score(course, "wrong") == (14, 14)
    assert _score(course, "blank") == (0, 14) and _score(course, "solution") == (14, 14)
    html = _feedback(course, "wrong")
    assert "one page per token" not in html and "✓ pages_needed" in html
    assert "Skipping existing assignment" in out  # the unchanged ones are not redone


def test_force_regrades_everyone(course):
    out = _make(course, "autograde", "FORCE=1")
    assert "Removing existing assignment" in out and "Skipping existing" not in out
    assert _score(course, "blank") == (0, 14) and _score(course, "wrong") == (14, 14)
