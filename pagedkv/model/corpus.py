"""The text TinyLM's shipped weights learned from, and the words its output is scored against.

The corpus is pagedkv's own prose (README, notebook markdown, module and function
docstrings; MIT like the rest of the project), frozen once into `pagedkv/data/corpus.txt`
by `tools/train_model.py --rebuild-corpus` so that `make train-model` always trains on the
same bytes. It is plain ASCII: one paragraph per line, so every byte token is one visible
character. Every tenth paragraph is held out: the model never trains on it, and bits per
byte are measured on it.

Real LLM training corpora are terabytes, deduplicated and filtered; this one is ~150 KB
and exists so that a byte-level model continues "The KV cache holds" in the project's own
words. Leaves out: tokenizers (the tokens are bytes), deduplication, any text the project
did not write.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

HELD_OUT_EVERY = 10  # paragraph i is held out when i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1
_WORD = re.compile(r"[A-Za-z]+")


@lru_cache(maxsize=1)
def corpus_text() -> str:
    """The frozen corpus: one paragraph per line."""
    return resources.files("pagedkv").joinpath("data/corpus.txt").read_text("ascii")


def paragraphs() -> list[str]:
    return [p for p in corpus_text().split("\n") if p]


def split() -> tuple[str, str]:
    """(training text, held-out text), each paragraphs joined by newlines."""
    train: list[str] = []
    held: list[str] = []
    for i, p in enumerate(paragraphs()):
        (held if i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1 else train).append(p)
    return "\n".join(train) + "\n", "\n".join(held) + "\n"


@lru_cache(maxsize=1)
def corpus_words() -> frozenset[str]:
    """Every word (run of letters, lowercased) of the whole corpus."""
    return frozenset(w.lower() for w in _WORD.findall(corpus_text()))


def word_share(text: str, words: frozenset[str] | None = None) -> float:
    """Share of the characters of `text` that belong to words of the corpus vocabulary.

    Spaces and punctuation count as neither: the share is of letters only. A word cut off at
    the end of `text` counts when it is the start of a corpus word.
    Example: word_share("the pagse") -> 3 / 8 (the counts; pagse is no word).
    """
    words = corpus_words() if words is None else words
    found = list(_WORD.finditer(text))
    letters = sum(len(m.group()) for m in found)
    if not letters:
        return 0.0
    good = 0
    for m in found:
        w = m.group().lower()
        cut_off = m.end() == len(text)
        if w in words or cut_off and any(c.startswith(w) for c in words):
            good += len(w)
    return good / letters
