"""The notebooks' folded sections are ones a learner may skip, and the learner is told how to
open them; a hidden check cell shows a comment, not an answer.

A markdown cell whose metadata holds `"jp-MarkdownHeadingCollapsed": true` opens folded in
JupyterLab: every cell after its heading, up to the next heading of the same or a higher
level, is hidden behind a button "N cells hidden". The notebooks fold their deep dives that
way so the core path stays short. Three rules keep that honest:

- a folded heading says it is optional (its title contains "Optional"), so a learner never
  skips core material without knowing it; and it is a section's subheading (level 2 or
  deeper), never the notebook's title, which would fold the whole notebook;
- before the first fold, the notebook says how to open one ("cells hidden");
- a picture the projector test measures in the browser is on the core path, where a learner
  sees it without opening anything;
- every `# checks` cell starts hidden (the notebooks call them grey bars to skip);
- a code cell whose source starts hidden still shows its first line in JupyterLab, so that
  line is a comment (a check cell's first assert would otherwise print an answer on screen
  under the question it answers).
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from pagedkv.bench.notebooks import FOLDED, folded
from tests.browser.test_projector import PICTURES

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOK_PATHS = sorted(NOTEBOOKS.glob("[0-9]*.ipynb"))
HEADING = re.compile(r"^(#{1,6})\s+(.*)$")


def heading(cell) -> tuple[int, str] | None:
    """(level, title) of a markdown cell that starts with a heading, else None."""
    if cell.cell_type != "markdown":
        return None
    match = HEADING.match(cell.source.lstrip().split("\n", 1)[0])
    return (len(match.group(1)), match.group(2)) if match else None


def folded_cells(cells) -> list[int]:
    return [index for index, hidden in enumerate(folded(cells)) if hidden]


def test_the_fold_rule_matches_jupyterlab_on_a_small_notebook():
    # The independent check of `pagedkv.bench.notebooks.folded`: a hand-made notebook whose hidden cells are
    # known (JupyterLab hides 2 and 3; a deeper heading, 3, stays inside the fold; the
    # same-level heading 4 ends it).
    cells = [
        nbformat.v4.new_markdown_cell("## 1 Core"),
        nbformat.v4.new_markdown_cell("### Optional: more", metadata={FOLDED: True}),
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_markdown_cell("#### a deeper heading"),
        nbformat.v4.new_markdown_cell("### back to core"),
        nbformat.v4.new_code_cell("y = 2"),
    ]
    assert folded_cells(cells) == [2, 3]


def test_there_are_notebooks():
    assert NOTEBOOK_PATHS, f"no numbered notebooks in {NOTEBOOKS}"


@pytest.mark.parametrize("path", NOTEBOOK_PATHS, ids=lambda p: p.name)
def test_folded_sections_say_optional_and_how_to_open(path):
    cells = nbformat.read(path, as_version=4).cells
    folds = [i for i, c in enumerate(cells) if c.metadata.get(FOLDED)]
    for index in folds:
        head = heading(cells[index])
        assert head is not None, f"{path.name} cell {index}: folded but not a heading"
        level, title = head
        assert level >= 2, f"{path.name} cell {index}: folding the title hides the notebook"
        assert "Optional" in title, f"{path.name} cell {index}: folded heading {title!r}"
    if folds:
        before = [c.source for c in cells[: folds[0]] if c.cell_type == "markdown"]
        assert any("cells hidden" in text for text in before), (
            f"{path.name}: no cell before the first fold (cell {folds[0]}) says how to open it"
        )


@pytest.mark.parametrize("path", NOTEBOOK_PATHS, ids=lambda p: p.name)
def test_a_hidden_source_shows_a_comment_first(path):
    cells = nbformat.read(path, as_version=4).cells
    for index, cell in enumerate(cells):
        if cell.cell_type == "code" and cell.metadata.get("jupyter", {}).get("source_hidden"):
            first = cell.source.lstrip().split("\n", 1)[0]
            assert first.startswith("#"), f"{path.name} cell {index} shows {first!r} when hidden"


@pytest.mark.parametrize("path", NOTEBOOK_PATHS, ids=lambda p: p.name)
def test_every_checks_cell_starts_hidden(path):
    """The notebooks tell the learner that `# checks` cells are grey bars to skip: one shown
    whole would put its asserts (the numbers a prediction asks for) on screen."""
    cells = nbformat.read(path, as_version=4).cells
    shown = [
        index
        for index, cell in enumerate(cells)
        if cell.cell_type == "code"
        and cell.source.startswith("# checks")
        and not cell.metadata.get("jupyter", {}).get("source_hidden")
    ]
    assert shown == [], f"{path.name}: checks cells shown whole: {shown}"


@pytest.mark.parametrize(("name", "text"), [(n, t) for n, t, _ in PICTURES])
def test_measured_pictures_are_on_the_core_path(name, text):
    cells = nbformat.read(NOTEBOOKS / name, as_version=4).cells
    found = [i for i, c in enumerate(cells) if c.cell_type == "code" and text in c.source]
    assert found, f"{name}: no code cell holds {text!r}"
    assert not set(found) & set(folded_cells(cells)), f"{name} cells {found} are folded"
