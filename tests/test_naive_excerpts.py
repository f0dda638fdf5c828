"""The excerpts notebook 08 prints are lines of naive.py as they stand, numbered right, and
each shows the flag (or function) of its mistake."""

from __future__ import annotations

from pathlib import Path

import pytest

import pagedkv.labs.naive
from pagedkv.labs.naive import MISTAKES
from pagedkv.labs.naive_excerpts import EXCERPTS, mistake_excerpt

FILE_LINES = Path(pagedkv.labs.naive.__file__).read_text().splitlines()


def test_every_mistake_has_an_excerpt():
    assert set(EXCERPTS) == set(MISTAKES) | {"naive_attention"}


@pytest.mark.parametrize("mistake", sorted(EXCERPTS))
def test_each_printed_line_is_that_line_of_the_file(mistake):
    heading, *body = mistake_excerpt(mistake).splitlines()
    assert heading.startswith("pagedkv/labs/naive.py, ")
    numbered = [line for line in body if line.strip() != "..."]
    assert numbered
    for line in numbered:
        number, text = line.split(" | ", 1)
        assert FILE_LINES[int(number) - 1].strip() == text.strip()
    shown = "\n".join(numbered)
    assert (f'"{mistake}"' in shown) or (f"def {mistake}" in shown) or mistake == "naive_attention"
    if mistake == "naive_attention":
        assert "(k * v).sum" in shown


def test_the_method_is_named():
    assert mistake_excerpt("leak").splitlines()[0] == "pagedkv/labs/naive.py, NaiveKVCache.free:"
    assert mistake_excerpt("naive_attention").splitlines()[0].endswith("naive_attention:")


def test_a_marker_that_matches_no_line_raises(monkeypatch):
    monkeypatch.setitem(EXCERPTS, "leak", (("no such line in the file", 1),))
    with pytest.raises(LookupError):
        mistake_excerpt("leak")
