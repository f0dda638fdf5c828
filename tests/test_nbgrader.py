"""The exercise notebooks through the real nbgrader, in a temporary course directory.

generate_assignment -> three submissions (the source notebook with its solutions, the student
version untouched, the student version with solutions but one known mistake) -> autograde ->
generate_feedback. Full marks, zero and partial marks; the feedback names the mistake; the
student version holds no solution text.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
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


def _nbgrader(course: Path, *args: str) -> None:
    bin_dir = Path(sys.executable).parent  # nbgrader runs `alembic` from PATH
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR", "MPLCONFIGDIR"):
        env[name] = str(course / ".home" / name.lower())
    result = subprocess.run(
        [str(bin_dir / "nbgrader"), *args, f"--CourseDirectory.root={course}"],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr


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
    import nbformat

    folder = course / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / NOTEBOOK)


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    import nbformat

    course = tmp_path_factory.mktemp("course")
    shutil.copytree(SOURCE, course / "source" / ASSIGNMENT)
    _nbgrader(course, "generate_assignment", ASSIGNMENT)
    source = nbformat.read(SOURCE / NOTEBOOK, as_version=4)
    student = nbformat.read(course / "release" / ASSIGNMENT / NOTEBOOK, as_version=4)
    wrong = nbformat.read(SOURCE / NOTEBOOK, as_version=4)
    cell = next(c for c in wrong.cells if MISTAKE[0] in c.source)
    cell.source = cell.source.replace(*MISTAKE)
    _submit(course, "solution", source)
    _submit(course, "blank", student)
    _submit(course, "wrong", wrong)
    _nbgrader(course, "autograde", ASSIGNMENT)
    _nbgrader(course, "generate_feedback", ASSIGNMENT)
    return course


def _score(course: Path, student: str) -> tuple[float, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        submission = gradebook.find_submission(ASSIGNMENT, student)
        return submission.score, submission.max_score


def test_the_student_version_holds_no_solution(course):
    import nbformat

    source = nbformat.read(SOURCE / NOTEBOOK, as_version=4)
    student = nbformat.read(course / "release" / ASSIGNMENT / NOTEBOOK, as_version=4)
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
    html = (course / "feedback" / "wrong" / ASSIGNMENT / NOTEBOOK.replace(".ipynb", ".html")).read_text()
    assert "one page per token" in html and "num_tokens=2, page_size=2" in html
    blank = (course / "feedback" / "blank" / ASSIGNMENT / NOTEBOOK.replace(".ipynb", ".html")).read_text()
    assert "not written yet" in blank
