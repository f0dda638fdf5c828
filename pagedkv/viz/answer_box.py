"""`answer_box("09-summary")`: a notebook's longer answer text, in a box that stays locked
until the quizzes it follows are answered.

A notebook's summary or the explanation after a prediction gives the answers away, so it is
not markdown in the notebook (a `<details>` opens with one click). Its text lives in
pagedkv/data/questions.json under "notes" (`questions.note`), with the ids of the quizzes
it follows; the box is a `reveal.ClosedBox` that each of those quizzes (or step predictions)
holds (`reveal.hold_until`, the widget made last for that id), so it shows only a "locked"
line until all are answered, then opens by itself. Markdown: what `grading.markdown_html`
reads, and pipe tables.
"""

from __future__ import annotations

from pagedkv.viz.grading import inline, markdown_html
from pagedkv.viz.questions import note
from pagedkv.viz.reveal import ClosedBox, hold_until

_STYLE = "font-size:15px;line-height:1.45;color:#111111"
_CELL = "border:1px solid #C8C8C8;padding:3px 8px;text-align:left;vertical-align:top"


def _table(lines: list[str]) -> str:
    """A markdown pipe table (a header row, a |---| row, body rows) as an HTML table."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]
    head, body = rows[0], [r for r in rows[1:] if not all(set(c) <= set("-: ") for c in r)]
    out = [_row(head, "th"), *(_row(r, "td") for r in body)]
    return f"<table style='border-collapse:collapse;margin:6px 0'>{''.join(out)}</table>"


def _row(cells: list[str], tag: str) -> str:
    return "<tr>" + "".join(f"<{tag} style='{_CELL}'>{inline(c)}</{tag}>" for c in cells) + "</tr>"


def note_html(text: str) -> str:
    """A note's markdown as HTML: pipe tables, the rest as `markdown_html` reads it."""
    parts: list[str] = []
    block: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.strip():
            block.append(line)
            continue
        if block and all(x.lstrip().startswith("|") for x in block):
            parts.append(_table(block))
        elif block:
            parts.append(markdown_html("\n".join(block)))
        block = []
    return f"<div style='{_STYLE}'>{''.join(parts)}</div>"


def answer_box(note_id: str) -> ClosedBox:
    """The closed box of the note `note_id`, locked until each of its quizzes is answered
    (a quiz not made in this kernel yet keeps it locked: run the quiz's cell first)."""
    data = note(note_id)
    box = ClosedBox(data.title)
    for qid in data.after:
        hold_until(box, qid)  # a quiz or a step prediction, made last for that id
    box.fill(note_html(data.text))
    return box


__all__ = ["answer_box", "note_html"]
