"""A cell that draws a figure shows it.

A learner found 05b's quick-bench cell empty but for one printed line: `projector(fig)` shows
its figure only as a cell's last expression, and a `print` added after it hid the picture
while every test stayed green. The stored outputs (`make notebooks` writes them; nbval checks
they are current) must hold a picture for every cell that calls a drawing function outside a
closed box (`revealed(...)` draws into its own box, shown once its question is answered).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
DRAWS = re.compile(r"\bprojector\(|\.figure\(\)|\bplot_\w+\(")


def _drawing_cells(path: Path) -> list[tuple[int, dict]]:
    cells = json.loads(path.read_text())["cells"]
    return [
        (i, c)
        for i, c in enumerate(cells)
        if c["cell_type"] == "code" and DRAWS.search(src := "".join(c["source"])) and "revealed(" not in src
    ]


def test_the_pattern_finds_drawing_cells() -> None:
    """The scan is not vacuous: 05b's quick-bench cell and three of 06's figures are among its cells."""
    found = {p.stem: len(_drawing_cells(p)) for p in NOTEBOOKS}
    assert found["05b_preemption_deep_dive"] >= 1 and found["06_benchmarks"] >= 3


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_drawing_cell_shows_a_picture(path: Path) -> None:
    blank = [
        i
        for i, c in _drawing_cells(path)
        if not any("image/png" in o.get("data", {}) for o in c.get("outputs", []))
    ]
    assert not blank, f"{path.name}: cells {blank} draw a figure but show none"
