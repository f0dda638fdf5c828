"""Every rule the code and tests cite exists in docs/design.md, and nothing points outside
the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DESIGN = (ROOT / "docs" / "design.md").read_text()
SOURCES = sorted(
    [*ROOT.glob("pagedkv/**/*.py"), *ROOT.glob("tests/**/*.py"), *ROOT.glob("notebooks/*.ipynb")]
)


def _numbered_rules() -> dict[int, str]:
    """{N: first line of rule N} from the "Rules of the page pool" list."""
    section = DESIGN.split("## Rules of the page pool", 1)[1].split("\n## ", 1)[0]
    return {int(n): text for n, text in re.findall(r"^(\d+)\. \*\*(.+?)\*\*", section, re.M)}


def _citations() -> list[tuple[str, str]]:
    """(file, cited text) for every rule-number or section-name citation of docs/design.md."""
    found = []
    for path in SOURCES:
        text = path.read_text()
        rel = str(path.relative_to(ROOT))
        for match in re.finditer(r"docs/design\.md,? rules? (\d+)(?: and (\d+))?", text):
            found += [(rel, f"rule {n}") for n in match.groups() if n]
        for match in re.finditer(r'docs/design\.md, \\?"([^"\\]+)\\?"', text):
            found.append((rel, " ".join(match.group(1).split())))  # a name may wrap a line
    return found


def test_rules_are_numbered_one_to_nine_in_order():
    assert list(_numbered_rules()) == list(range(1, 10))


def test_every_cited_rule_and_section_exists():
    rules = _numbered_rules()
    citations = _citations()
    assert len(citations) > 20  # the pattern still finds the citations
    headings = set(re.findall(r"^#+ (.+)$", DESIGN, re.M))
    answers = set(re.findall(r"^- \*\*(.+?)\.\*\*", DESIGN, re.M))
    for rel, cited in citations:
        if cited.startswith("rule "):
            assert int(cited.split()[1]) in rules, f"{rel} cites {cited}, which docs/design.md lacks"
        else:
            assert cited in headings | answers, f"{rel} cites {cited!r}, not a heading or answer"


def test_nothing_cites_a_file_outside_the_repository():
    texts = [*ROOT.glob("pagedkv/data/*.txt"), *ROOT.glob("notebooks/**/*.ipynb")]  # the corpus too
    for path in [*SOURCES, *texts, ROOT / "README.md", *ROOT.glob("docs/*.md"), ROOT / "CONTRIBUTING.md"]:
        if path.exists():
            text = path.read_text()
            for outside in ("../" + "shared", "DESIGN" + ".md"):  # split: this file must pass too
                assert outside not in text, f"{path.relative_to(ROOT)} cites {outside}"
