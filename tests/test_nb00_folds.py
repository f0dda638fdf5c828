"""Notebook 00's folds: what JupyterLab hides when it opens the notebook.

JupyterLab 4's rule (`pagedkv.bench.notebooks.folded`, checked on a hand-made notebook in
tests/test_notebook_folds.py): a markdown cell whose heading has the cell metadata
`jp-MarkdownHeadingCollapsed` hides every later cell up to the next heading of the same or a
higher level. The cells the browser tests find by their text,
and the predictions and the dashboard a learner steps, must not be hidden.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

from pagedkv.bench.notebooks import FOLDED, folded
from pagedkv.viz import questions

ROOT = Path(__file__).resolve().parent.parent
NB00 = ROOT / "notebooks" / "00_start_here.ipynb"


def shown_cells(cells: list) -> list:
    """The cells JupyterLab shows before any fold is opened (the rule is checked on a
    hand-made notebook in tests/test_notebook_folds.py)."""
    return [cell for cell, hidden in zip(cells, folded(cells)) if not hidden]


def test_the_core_path_is_short_and_keeps_what_learners_and_browser_tests_use():
    cells = nbformat.read(NB00, as_version=4).cells
    shown = shown_cells(cells)
    assert any(c.metadata.get(FOLDED) for c in cells)
    assert len(shown) <= 36 < len(cells)  # 36: the last-page cost has its own cell
    assert sum(len(c.source) for c in shown if c.cell_type == "markdown") <= 12_000
    sources = [c.source for c in shown]
    for text in (
        'plot_pool(story.seqs.snapshot(), ("state", "owner"))',  # test_projector's PICTURES
        "plot_lifecycle()",
        'Dashboard("walkthrough")',
        'PredictStep("00-prompt-pages")',
        'PredictStep("00-token-21")',
        'PredictStep("00-evict")',
        'Quiz("00-apply")',  # the last-page rule is on the core path: the check quiz asks it
        'Quiz("00-check")',
        "Sections marked Optional start folded",
    ):
        assert any(text in s for s in sources), text
    for cell in cells:  # a fold's heading is one line, so the fold hides all its text
        if cell.metadata.get(FOLDED):
            assert cell.source.startswith("### Optional:") and "\n" not in cell.source.strip()


def sections(cells: list) -> dict[int, str]:
    """Each numbered section ("## N. ...") of the notebook: all the text up to the next one."""
    found: dict[int, str] = {}
    number = 0
    for cell in cells:
        head = re.match(r"## (\d+)\. ", cell.source)
        if head:
            number = int(head.group(1))
        if number:
            found[number] = found.get(number, "") + "\n" + cell.source
    return found


def test_the_last_page_rule_is_its_own_section_and_section_references_point_at_it():
    by_number = sections(nbformat.read(NB00, as_version=4).cells)
    assert "Dashboard(" in by_number[4] and "PredictStep(" in by_number[4]
    assert "Quiz(" not in by_number[4] and "computes its last page" not in by_number[4]
    assert by_number[5].lstrip().startswith("## 5. A fully cached prompt still computes its last page")
    assert 'Quiz("00-apply")' in by_number[5]
    # the prose and the hints that send a learner to vLLM's order of FREE and CACHED blocks
    texts = [by_number[n] for n in by_number] + [
        hint for q in questions.quiz("00-check").questions for hint in q.hints.values()
    ]
    pointers = [int(m) for t in texts for m in re.findall(r"[Ss]ection (\d+) (?:says|compares)", t)]
    assert pointers and all("one queue, FREE ones at its head" in by_number[n] for n in pointers)
