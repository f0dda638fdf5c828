"""The nbgrader preprocessor that leaves out the cells tagged "skip-in-grading" when autograding.

The exercise notebook draws the real pool before each exercise (scenarios, matplotlib) and
has a `check(...)` cell for the student next to each graded `assert check(...)` cell: in
every student's graded run that is the matplotlib import, six pictures and every check run
twice, for cells that score nothing. classroom/nbgrader_config.py adds this preprocessor to
autograde's sanitize step, so the graded run executes the imports, the answers and the
graded checks only. The feedback page then has no pictures; the graded cells print the same
✓/✗ feedback the student's check cells did.

Leaves out: any other use of tags. A cell a student tags so is skipped too; graded and
solution cells never are (nbgrader restores locked cells from its database anyway).
"""

from __future__ import annotations

from typing import Any

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

TAG = "skip-in-grading"


class SkipCells(Preprocessor):
    """Drop the code cells tagged "skip-in-grading" that are not nbgrader cells."""

    enabled = Bool(True).tag(config=True)  # nbconvert's preprocessors are off unless enabled

    def preprocess(self, nb: Any, resources: dict) -> tuple[Any, dict]:
        nb.cells = [cell for cell in nb.cells if not _skipped(cell)]
        return nb, resources


def _skipped(cell: Any) -> bool:
    grading = cell.metadata.get("nbgrader", {})
    graded = grading.get("grade") or grading.get("solution") or grading.get("locked")
    return cell.cell_type == "code" and TAG in cell.metadata.get("tags", []) and not graded
