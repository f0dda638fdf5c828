"""Tokens by page: each sequence's text with every token boxed by the page that holds its K/V.

Token i of a sequence lives at slot i % page_size of page `block_table[i // page_size]`.
Each row of this view is one live sequence's text, cut into boxes of page_size tokens;
each box is labelled with its physical page id and filled with the colour of the sequence
that first took that page (the owner, as in the heatmaps), so a page shared by a prefix hit
or a fork shows up in another sequence's row in the owner's colour, hatched, with "×n".
TinyLM's tokens are bytes, so each token is one character; a space is drawn as "·" so the
slots stay visible, a newline as "↵". `token_pages_html` is the dashboard's HTML;
`plot_token_pages` draws the same for a notebook. vLLM keeps exactly this mapping (its
slot_mapping) and never shows it.
Leaves out: tokenizers with multi-character tokens, rows beyond `max_tokens` tokens.
"""

from __future__ import annotations

import html
from collections.abc import Hashable, Mapping
from collections.abc import Sequence as SequenceLike

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from pagedkv.core.observe.snapshot import PoolSnapshot
from pagedkv.scenarios.text import page_runs
from pagedkv.viz.palette import DEFAULT_PALETTE, NO_OWNER_COLOR, SequencePalette


def _owner(snapshot: PoolSnapshot, page: int) -> Hashable | None:
    owner = int(snapshot.owner[page])
    return snapshot.seq_ids[owner] if owner >= 0 else None


def token_pages_html(
    snapshot: PoolSnapshot,
    token_ids: Mapping[Hashable, SequenceLike[int]],
    palette: SequencePalette | None = None,
    max_tokens: int = 128,
) -> str:
    """The view as HTML: one line per sequence, one labelled box per page."""
    palette = palette or DEFAULT_PALETTE
    lines = []
    for seq_id, runs in page_runs(snapshot, token_ids, max_tokens).items():
        boxes = []
        for page, text in runs:
            owner, refs = _owner(snapshot, page), int(snapshot.ref_count[page])
            color = palette.color(owner) if owner is not None else NO_OWNER_COLOR
            ink = palette.text_color(owner) if owner is not None else "black"
            hatch = (
                "background-image:repeating-linear-gradient(45deg,transparent 0 5px,"
                "rgba(255,255,255,.35) 5px 7px);"
                if refs > 1
                else ""
            )
            label = f"page {page}" + (f" ×{refs}" if refs > 1 else "")
            boxes.append(
                f"<span title='{html.escape(label)}' style='display:inline-block;margin:1px;"
                f"border:1px solid #333;background:{color};color:{ink};{hatch}'>"
                f"<span style='font-family:monospace;font-size:15px;padding:0 2px;"
                f"white-space:pre'>{html.escape(text)}</span>"
                f"<span style='display:block;font-size:13px;padding:1px 3px 2px;text-align:center'>"
                f"{label}</span></span>"
            )
        lines.append(
            f"<div><b style='display:inline-block;min-width:6em'>{html.escape(str(seq_id))}</b>"
            f"{''.join(boxes)}</div>"
        )
    body = "".join(lines) or "<div><i>no live sequence</i></div>"
    return (
        "<div class='pagedkv-token-pages'><b>tokens by page</b> (each box: the tokens whose K/V "
        f"one page holds; colour = the sequence that owns the page){body}</div>"
    )


def plot_token_pages(
    snapshot: PoolSnapshot,
    token_ids: Mapping[Hashable, SequenceLike[int]],
    palette: SequencePalette | None = None,
    max_tokens: int = 96,
) -> Figure:
    """The view as a matplotlib figure: each sequence's text boxed page by page."""
    palette = palette or DEFAULT_PALETTE
    runs = page_runs(snapshot, token_ids, max_tokens)
    size = snapshot.page_size
    # Pages per figure line: a line holds <= 28 character columns (a page and its gap take
    # page_size + 1), so at ~0.3 inch per character the figure is at most ~9.4 inches, 846 px
    # at 90 dpi: a notebook cell at 1280 px with the file browser open shows it unshrunk.
    per_line = max(1, 28 // (size + 1))
    lines = [(s, runs[s][i : i + per_line]) for s in runs for i in range(0, max(1, len(runs[s])), per_line)]
    width = max([1, *(len(chunk) for _, chunk in lines)]) * (size + 1)  # character columns used
    inches = min(9.4, max(6.4, 1.5 + 0.3 * width))  # ~0.3 inch per character, readable at 14 pt
    fig = Figure(figsize=(inches, 0.9 + 0.75 * max(1, len(lines))), dpi=90, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for row, (_, chunk) in enumerate(lines):
        for j, (page, text) in enumerate(chunk):
            owner, refs = _owner(snapshot, page), int(snapshot.ref_count[page])
            color = palette.color(owner) if owner is not None else NO_OWNER_COLOR
            ink = palette.text_color(owner) if owner is not None else "black"
            x = j * (size + 1)
            hatch = "//" if refs > 1 else None
            ax.add_patch(
                Rectangle((x, row + 0.05), size, 0.6, facecolor=color, edgecolor="black", hatch=hatch)
            )
            # On a hatched (shared) page each character gets a plain background to stay readable.
            bbox = {"facecolor": color, "edgecolor": "none", "pad": 0.3} if refs > 1 else None
            for i, char in enumerate(text):
                ax.text(x + i + 0.5, row + 0.37, char, ha="center", va="center", fontsize=14,
                        family="monospace", color=ink, bbox=bbox)  # fmt: skip
            label = f"page {page}" + (f" ×{refs}" if refs > 1 else "")
            ax.text(x + size / 2, row + 0.82, label, ha="center", va="center", fontsize=12)
    ax.set_xlim(0, width)
    ax.set_ylim(max(1, len(lines)), 0)
    ax.set_yticks([r + 0.4 for r in range(len(lines))], [str(s) for s, _ in lines], fontsize=12)
    ax.set_xticks([])
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_title(f"tokens by page (page_size {size}): each box is one page's K/V", fontsize=13, loc="left")
    if not lines:
        ax.text(width / 2, 0.5, "no live sequence", ha="center", va="center", color="#666666")
    return fig
