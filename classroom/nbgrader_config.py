# The course's nbgrader settings, loaded by the Makefile's assignments / autograde / feedback
# targets (--config) and by the hub (classroom/hub.py). Course layout (folders, database) is
# given on the command line by whoever runs nbgrader.
import os
import sys

from nbgrader.converters.autograde import Autograde

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for skip_cells

c = get_config()  # type: ignore[name-defined]  # noqa: F821 - defined by traitlets when it loads this file

# Grade without the pictures and the students' own check cells: the cells tagged
# "skip-in-grading" are left out of the graded run (classroom/skip_cells.py).
c.Autograde.sanitize_preprocessors = [
    *Autograde.class_traits()["sanitize_preprocessors"].default(),
    "skip_cells.SkipCells",
]
# One cell may run a whole check: pagedkv.exercises stops it after 25 s (TOTAL_LIMIT).
c.Execute.timeout = 60
