"""No sentence of a notebook's text breaks so that a number starts a line.

Markdown reads a line that starts with a number and a period ("19. So ...") as a numbered
list item, even in the middle of a paragraph or a list item's text: the number disappears and
the rest becomes a list. A learner read 11b's calculator step as "the requests" followed by
an item "S." (the line had begun "19. So of the 1.8 times"). A real list item follows a blank
line, another item, or a line indented deeper (an item's wrapped text); a line at the same
indent as the paragraph line before it is that paragraph's text.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").rglob("*.ipynb"))
NUMBERED = re.compile(r"^(\s*)\d+[.)] ")
NOT_PROSE = re.compile(r"^\s*((\d+[.)]|[-*+])\s|#|\|)")  # an item, a heading or a table row


def numbers_breaking_a_sentence(lines: list[str]) -> list[str]:
    """The lines that start with "N. " right after a prose line at the same indent."""
    found, fenced = [], False
    for prev, line in zip(lines, lines[1:]):
        fenced ^= prev.strip().startswith("```")
        item = NUMBERED.match(line)
        if fenced or not item or not prev.strip() or NOT_PROSE.match(prev):
            continue
        if len(prev) - len(prev.lstrip()) == len(item.group(1)):
            found.append(line)
    return found


def test_the_check_finds_the_line_a_learner_saw() -> None:
    step = [
        "4. A vLLM v1 `vllm serve` on an A100 profiles 2,048 tokens by default.",
        "   the requests",
        "   19. So of the",
    ]
    assert numbers_breaking_a_sentence(step) == ["   19. So of the"]
    assert numbers_breaking_a_sentence(["Steps:", "", "1. one", "2. two", "   wrapped", "3. three"]) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_number_starts_a_line_inside_a_sentence(path: Path) -> None:
    cells = json.loads(path.read_text())["cells"]
    bad = {
        i: found
        for i, c in enumerate(cells)
        if c["cell_type"] == "markdown"
        and (found := numbers_breaking_a_sentence("".join(c["source"]).splitlines()))
    }
    assert not bad, f"{path.name}: {bad}"


def test_no_number_starts_a_line_inside_a_sentence_of_a_note() -> None:
    bank = json.loads((ROOT / "pagedkv" / "data" / "questions.json").read_text())
    bad = {
        key: found
        for section in bank.values()
        for key, entry in section.items()
        if isinstance(entry.get("text"), list) and (found := numbers_breaking_a_sentence(entry["text"]))
    }
    assert not bad, bad
