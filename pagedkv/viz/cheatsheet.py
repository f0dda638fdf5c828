"""The one-page cheat sheet: the vocabulary, the numbers and the pool's rules, as markdown and as a
printable page (A4 landscape, PNG or PDF), both from the same text below.

    python -m pagedkv.viz.cheatsheet docs/cheatsheet.png   # or .pdf; docs/cheatsheet.md is markdown()

vLLM's documentation spreads the same facts over its design pages; this is the classroom
handout. Leaves out: the service (WAL, metrics, HTTP) and the benchmarks.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

TITLE = "pagedkv cheat sheet: the paged KV cache on one page"
VOCABULARY = [
    ("page (block)", "page_size token slots of K/V for every layer; the unit the pool hands out"),
    ("slot", "a token's index in the pool: page_id * page_size + offset (the place in its page)"),
    ("block table", "a sequence's page ids in order: logical block i -> page block_table[i]"),
    ("slot mapping", "the slot of every position of a sequence (what attention writes to)"),
    ("ref_count", "how many block tables hold a page"),
    (
        "FREE / ACTIVE / CACHED",
        "empty / held (ref_count >= 1) / unheld but full and hashed: reusable, evictable",
    ),
    ("block hash", "hash(parent hash, the block's tokens): names a whole prefix"),
    ("prefix hit", "admission reuses a CACHED or ACTIVE page with the same block hash"),
    ("num_cached_tokens", "prompt tokens served by prefix hits (their K/V are not computed again)"),
    ("fork", "a child sequence shares all the parent's pages (ref_count + 1, nothing copied)"),
    ("copy-on-write", "before writing into a shared page, copy it; the write goes into the copy"),
    ("preemption", "free a running request's pages to make room; it resumes later (recompute or swap)"),
]
NUMBERS = [
    ("slot of position p", "block_table[p // page_size] * page_size + p % page_size"),
    ("pages for n tokens", "ceil(n / page_size); an append needs a page when n % page_size == 0"),
    ("hashes of a prompt", "one per full block: len(tokens) // page_size; a partial block has none"),
    ("attention (decode)", "softmax(q . K^T / sqrt(head_dim)) . V over positions 0 .. context_len - 1"),
    ("grouped-query heads", "query head h reads kv head h // (num_heads // num_kv_heads)"),
    ("bytes per token", "2 (K and V) * layers * kv_heads * head_dim * dtype size"),
]
RULES = [
    "Allocation takes a FREE page first (lowest id); only then evicts the LRU CACHED page.",
    "Appending writes into the last page; a new page only when the last is full.",
    "Ref counts equal the number of block tables holding the page, always.",
    "A page is hashed and indexed when it becomes full; partial pages never hit.",
    "Prefix lookup walks full-page hashes in order, stops at the first miss; the last prompt "
    "token always runs; a hit on a CACHED page makes it ACTIVE.",
    "Release is tail first: the last page of a finished sequence is evicted first; a full "
    "page the prefix index points to becomes CACHED, others FREE.",
    "Fork shares every page; a write into a page with ref_count > 1 copies it first.",
    "Time is a logical clock: one tick per operation (admit, append, fork, release).",
    "A failed operation changes nothing.",
]
SCHEDULER = [
    "Every running request decodes one token per step (continuous batching).",
    "Out of pages: preempt the most recently admitted running request (FCFS), repeat until it fits.",
    "Recompute: the victim's pages are freed; on resume its tokens are prefilled again "
    "(full pages still CACHED are prefix hits).",
]


def markdown() -> str:
    """The cheat sheet as GitHub markdown (docs/cheatsheet.md is exactly this)."""
    lines = [
        f"# {TITLE}",
        "",
        "Printable: [cheatsheet.png](cheatsheet.png) "
        "(`python -m pagedkv.viz.cheatsheet docs/cheatsheet.png`, or `.pdf`).",
        "",
        "## Vocabulary",
        "",
        "| term | meaning |",
        "|---|---|",
    ]
    lines += [f"| **{term}** | {meaning} |" for term, meaning in VOCABULARY]
    lines += ["", "## The numbers", "", "| what | how |", "|---|---|"]
    lines += [f"| {what} | `{how}` |" for what, how in NUMBERS]
    lines += ["", "## The pool's rules (docs/design.md)", ""]
    lines += [f"{i}. {rule}" for i, rule in enumerate(RULES, 1)]
    lines += ["", "## The scheduler", ""]
    lines += [f"- {rule}" for rule in SCHEDULER]
    return "\n".join(lines) + "\n"


def _block(heading: str, items: list[str], width: int) -> list[tuple[str, bool]]:
    """(line, is_heading) pairs: a heading, then each item wrapped with a hanging indent."""
    out = [(heading, True)]
    for item in items:
        wrapped = textwrap.wrap(item, width, subsequent_indent="    ")
        out += [(line, False) for line in wrapped]
    return out + [("", False)]


def figure() -> Figure:
    """The cheat sheet on an A4 landscape page, two columns of 11 pt text."""
    fig = Figure(figsize=(11.69, 8.27))
    FigureCanvasAgg(fig)
    fig.text(0.5, 0.965, TITLE, ha="center", va="top", fontsize=16, weight="bold")
    width = 68  # characters per line of 11 pt sans-serif in half a landscape A4 page (checked by eye)
    left = _block("Vocabulary", [f"{t}: {m}" for t, m in VOCABULARY], width)
    left += _block("The scheduler", [f"- {r}" for r in SCHEDULER], width)
    right = _block("The pool's rules", [f"{i}. {r}" for i, r in enumerate(RULES, 1)], width)
    right += _block("The numbers", [f"{w}: {h}" for w, h in NUMBERS], width)
    for x, column in ((0.03, left), (0.515, right)):
        y = 0.905
        for line, heading in column:
            fig.text(
                x,
                y,
                line,
                fontsize=13 if heading else 11,
                weight="bold" if heading else "normal",
                va="top",
            )
            y -= 0.031 if heading else 0.0265
    return fig


def save(path: str | Path) -> Path:
    """Write the printable page; the format follows the suffix (.png at 150 dpi, .pdf)."""
    path = Path(path)
    if path.suffix not in (".png", ".pdf"):
        raise ValueError(f"path must end in .png or .pdf, got {str(path)!r}")
    figure().savefig(path, dpi=150)
    return path


if __name__ == "__main__":
    print(save(sys.argv[1] if len(sys.argv) > 1 else "cheatsheet.png"))
