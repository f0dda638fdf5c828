"""A learner may skip the grey `# checks` cells, so no other cell may need one.

Each notebook's intro says to skip the cells whose source starts with `# checks`. A learner
who runs the cells one by one and skips those must not meet a NameError: every name a
visible code cell reads must be bound by an earlier visible cell (or by itself, or be a
builtin), never only by a checks cell.
"""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOK_PATHS = sorted(NOTEBOOKS.glob("[0-9]*.ipynb"))


def is_checks(source: str) -> bool:
    return source.lstrip().startswith("# checks")


def names(source: str) -> tuple[set[str], set[str]]:
    """(names the cell binds, names it reads); IPython's % and ! lines are left out."""
    code = "\n".join(line for line in source.split("\n") if not line.lstrip().startswith(("%", "!")))
    bound: set[str] = set()
    read: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound, read


def names_only_checks_bind(cells) -> list[tuple[int, str]]:
    """(cell index, name) for each name a visible cell reads that only a checks cell bound."""
    visible: set[str] = set(dir(builtins)) | {"display", "get_ipython"}
    by_checks: set[str] = set()
    faults = []
    for index, cell in enumerate(cells):
        if cell.cell_type != "code":
            continue
        bound, read = names(cell.source)
        if is_checks(cell.source):
            by_checks |= bound - visible
            continue
        faults += [(index, n) for n in sorted(read - bound - visible) if n in by_checks]
        visible |= bound
    return faults


def test_the_rule_catches_a_name_only_a_checks_cell_binds():
    cells = [
        nbformat.v4.new_code_cell("m = {'rates': 1}"),
        nbformat.v4.new_code_cell("# checks: numbers\nmixed = m['rates']"),
        nbformat.v4.new_code_cell("print(mixed, m)"),
        nbformat.v4.new_code_cell("mixed = 2\nprint(mixed)"),
    ]
    assert names_only_checks_bind(cells) == [(2, "mixed")]


@pytest.mark.parametrize("path", NOTEBOOK_PATHS, ids=lambda p: p.name)
def test_no_visible_cell_needs_a_checks_cell(path):
    cells = nbformat.read(path, as_version=4).cells
    assert names_only_checks_bind(cells) == [], path.name
