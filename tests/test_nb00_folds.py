"""Notebook 00's folds: what JupyterLab hides when it opens the notebook.

Oracle: JupyterLab 4's rule, written out here on the notebook file. A markdown cell whose
heading has the cell metadata `jp-MarkdownHeadingCollapsed` hides every later cell up to the
next heading of the same or a higher level. The cells the browser tests find by their text,
and the predictions and the dashboard a learner steps, must not be hidden.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NB00 = ROOT / "notebooks" / "00_start_here.ipynb"


def _level(cell: dict) -> int | None:
    lines = "".join(cell["source"]).strip().splitlines()
    match = re.match(r"(#+)\s", lines[0]) if cell["cell_type"] == "markdown" and lines else None
    return len(match.group(1)) if match else None


def shown_cells(cells: list[dict]) -> list[dict]:
    """The cells JupyterLab shows before any fold is opened."""
    shown, fold = [], None
    for cell in cells:
        level = _level(cell)
        if fold is not None and (level is None or level > fold):
            continue
        fold = level if level is not None and cell["metadata"].get("jp-MarkdownHeadingCollapsed") else None
        shown.append(cell)
    return shown


def test_the_fold_rule_hides_up_to_the_next_heading_of_the_same_level():
    def md(text: str, folded: bool = False) -> dict:
        meta = {"jp-MarkdownHeadingCollapsed": True} if folded else {}
        return {"cell_type": "markdown", "source": [text], "metadata": meta}

    cells = [md("## 2"), md("### Optional", True), md("text"), md("#### deeper"), md("### next"), md("after")]
    assert ["".join(c["source"]) for c in shown_cells(cells)] == ["## 2", "### Optional", "### next", "after"]


def test_the_core_path_is_short_and_keeps_what_learners_and_browser_tests_use():
    cells = json.loads(NB00.read_text())["cells"]
    shown = shown_cells(cells)
    assert any(c["metadata"].get("jp-MarkdownHeadingCollapsed") for c in cells)
    assert len(shown) <= 32 < len(cells)
    assert sum(len("".join(c["source"])) for c in shown if c["cell_type"] == "markdown") <= 12_000
    sources = ["".join(c["source"]) for c in shown]
    for text in (
        'plot_pool(story.seqs.snapshot(), ("state", "owner"))',  # test_projector's PICTURES
        "plot_lifecycle()",
        'Dashboard("walkthrough")',
        'PredictStep("00-prompt-pages")',
        'PredictStep("00-token-21")',
        'PredictStep("00-evict")',
        'Quiz("00-check")',
        "Sections marked Optional start folded",
    ):
        assert any(text in s for s in sources), text
    for cell in cells:  # a fold's heading is one line, so the fold hides all its text
        if cell["metadata"].get("jp-MarkdownHeadingCollapsed"):
            assert (
                "".join(cell["source"]).startswith("### Optional:")
                and "\n" not in "".join(cell["source"]).strip()
            )
