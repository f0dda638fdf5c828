"""The cheat sheet: docs/cheatsheet.md is what the package renders, and the printable page keeps
every line inside the paper."""

from __future__ import annotations

from pathlib import Path

import pytest

from pagedkv.viz import cheatsheet

ROOT = Path(__file__).resolve().parents[1]


def test_the_markdown_in_docs_is_the_packages():
    assert (ROOT / "docs" / "cheatsheet.md").read_text() == cheatsheet.markdown()


def test_every_line_of_the_printable_page_fits_on_the_paper():
    fig = cheatsheet.figure()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    page = fig.bbox
    texts = [t for t in fig.texts if t.get_text()]
    assert len(texts) > 40
    for text in texts:
        box = text.get_window_extent(renderer)
        assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1, (
            text.get_text()
        )
    right_column = [t.get_window_extent(renderer) for t in texts if t.get_position()[0] > 0.5]
    left_column = [
        t.get_window_extent(renderer)
        for t in texts
        if t.get_position()[0] < 0.5 and t.get_position()[1] < 0.95
    ]
    assert max(b.x1 for b in left_column) < min(b.x0 for b in right_column)  # columns never overlap


def test_save_writes_png_or_pdf(tmp_path):
    assert cheatsheet.save(tmp_path / "sheet.pdf").read_bytes().startswith(b"%PDF")
    with pytest.raises(ValueError, match=r"path must end in \.png or \.pdf"):
        cheatsheet.save(tmp_path / "sheet.svg")
