"""An exercise notebook as a learner meets it in JupyterLab: a wrong answer, its feedback, then
the right answer and its success line, typed into the student version nbgrader makes.

The student version is made with nbgrader's own preprocessors (ClearSolutions, ClearOutput:
what `generate_assignment` runs) and written into the server's temporary copy of notebooks/.
"""

from __future__ import annotations

import re

import nbformat
import pytest

from .labpage import NOTEBOOK
from .labserver import NOTEBOOKS

pytestmark = pytest.mark.browser

STUDENT = "exercises/student_version.ipynb"
WRONG = (
    "def slot_mapping(block_table, positions, page_size):\n"
    "    return [block_table[p // page_size] + p % page_size for p in positions]\n"
)
RIGHT = (
    "def slot_mapping(block_table, positions, page_size):\n"
    "    return [block_table[p // page_size] * page_size + p % page_size for p in positions]\n"
)


def _write_student_version(notebook_dir) -> None:
    from nbgrader.preprocessors import ClearOutput, ClearSolutions

    nb = nbformat.read(NOTEBOOKS / "exercises" / "pagedkv_exercises.ipynb", as_version=4)
    nb, _ = ClearSolutions().preprocess(nb, {"language": "python"})
    nb, _ = ClearOutput().preprocess(nb, {})
    nbformat.write(nb, notebook_dir / STUDENT)


def _check_cell(nb):
    cells = nb.page.locator(f"{NOTEBOOK} .jp-CodeCell")
    return cells.filter(has_text=re.compile(r'^\s*\[\d*\]:\s*check\("slot_mapping"')).first


def _output_text(cell) -> str:
    # text_content, not inner_text: an output JupyterLab has scrolled out of view has no innerText
    return "\n".join(cell.locator(".jp-OutputArea-output").all_text_contents())


def _answer(nb, code: str, expect: str) -> str:
    """Replace the slot_mapping stub with `code`, run it and the check cell; the check's output
    once it shows `expect` (the output of the previous run stays until the new one arrives)."""
    page = nb.page
    cells = page.locator(f"{NOTEBOOK} .jp-CodeCell")
    cells.filter(has_text="def slot_mapping").first.locator(".cm-content").click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(code)  # no auto-indent or bracket closing, unlike typing
    page.keyboard.press("Shift+Enter")  # runs the stub cell, selects the check cell
    page.keyboard.press("Shift+Enter")  # runs the check cell
    check = _check_cell(nb)
    check.locator(".jp-OutputArea-output").filter(has_text=expect).first.wait_for(timeout=60_000)
    nb.wait_idle()
    return _output_text(check)


def test_a_wrong_answer_gets_feedback_then_the_right_one_passes(jupyterlab, open_notebook, screenshot_dir):
    _write_student_version(jupyterlab.notebook_dir)
    nb = open_notebook(STUDENT)
    nb.run_all()  # as a learner starts: the checks say "not written yet", nothing crashes
    check = _check_cell(nb)
    check.scroll_into_view_if_needed()
    check.locator(".jp-OutputArea-output").filter(has_text="✗").first.wait_for(timeout=30_000)
    first = _output_text(check)
    assert "✗ slot_mapping: `slot_mapping` is not written yet" in first and "Traceback" not in first, first

    feedback = _answer(nb, WRONG, "wrong answer")
    assert "✗ slot_mapping: wrong answer for the smallest failing case" in feedback, feedback
    assert re.search(r"expected: \[\d+(, \d+)*\]\n\s*got:\s+\[\d+(, \d+)*\]", feedback), feedback
    assert "page p's first slot is not p" in feedback, feedback
    assert "False" in feedback

    success = _answer(nb, RIGHT, "✓ slot_mapping")
    assert "✓ slot_mapping: all 12 cases right" in success and "True" in success, success
    nb.screenshot_cell(
        nb.page.locator(".jp-OutputArea-output", has_text="✓ slot_mapping"),
        screenshot_dir / "exercise_slot_mapping_passed.png",
    )
