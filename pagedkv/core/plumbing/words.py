"""Counts in printed words: `count(1, "page")` is "1 page", `count(3, "page")` is "3 pages"."""

from __future__ import annotations


def count(n: int, word: str) -> str:
    """`n` and `word`, the word plural unless n is 1."""
    if n == 1:
        return f"{n} {word}"
    return f"{n} {word}s"


def noun(n: int, word: str) -> str:
    """`word` alone, plural unless n is 1: "page 4" or "pages 4, 5"."""
    if n == 1:
        return word
    return f"{word}s"
