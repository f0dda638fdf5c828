"""How a pick is graded and written: the feedback HTML `PredictStep` and `Quiz` show.

`grade` turns a pick into feedback (a first wrong pick gets its hint and one more try; a right
pick or a second wrong one settles the question); `markdown_html` renders the small markdown
the questions' texts use.

A click and a pick travel apart. The browser sends a Check click at once, but holds a new
pick back while the widget's previous change is still on its way to the kernel; so, clicked
within milliseconds of each other, the Check can reach the kernel before the pick it was for.
The widgets guard both ends of that race, so the pick shown selected is always the one graded:

- a Check on the pick already graded wrong is no second try (`already`): the new pick, when it
  arrives, asks for Check again;
- a late pick reaching a locked question (the browser sent it before the lock arrived) is put
  back to the pick that was graded.

No engine has this: it is the lab's teaching layer."""

from __future__ import annotations

import html
import re

__all__ = ["RIGHT", "TRY_AGAIN", "WRONG", "already", "box", "grade", "inline", "markdown_html", "verdict"]

RIGHT, WRONG = "#007A5A", "#B91C1C"


def box(text: str, color: str = "#111111") -> str:
    return f"<div style='font-size:15px;line-height:1.45;color:{color}'>{text}</div>"


def verdict(text: str, color: str) -> str:  # coloured; the reason after it is not (red reads as an error)
    return f"<b style='color:{color}'>{text}</b>"


def inline(text: str) -> str:
    """One line of the markdown the questions use (`code`, **bold**, *italic*) as HTML."""
    text = html.escape(text, quote=False)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
    return re.sub(r"(?<![\w*])\*(?!\s)(.+?)\*(?![\w*])", r"<i>\1</i>", text)


def markdown_html(text: str) -> str:
    """The small markdown of the questions' `after` texts as HTML: paragraphs split by blank
    lines, "- " bullet items and "1. " numbered items (each continued by indented lines), and
    inline `code`, **bold**, *italic*."""
    blocks: list[str] = []
    item = re.compile(r"(- |\d+\. )")
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = block.splitlines()
        first = item.match(lines[0]) if lines else None
        if first:
            items: list[str] = []
            for line in lines:
                start = item.match(line)
                if start:
                    items.append(line[start.end() :])
                else:
                    items[-1] += " " + line.strip()
            tag = "ul" if first.group(1) == "- " else "ol"  # an <ol> keeps the first item's number
            opening = "<ul>" if tag == "ul" else f"<ol start='{first.group(1)[:-2]}'>"
            blocks.append(opening + "".join(f"<li>{inline(i)}</li>" for i in items) + f"</{tag}>")
        else:
            blocks.append(f"<p>{inline(' '.join(x.strip() for x in lines))}</p>")
    return "".join(blocks)


TRY_AGAIN = "Think it over and pick another answer. A second wrong pick shows the answer."


def grade(picked: str, answer: str, why: str, misses: int, hint: str = "") -> tuple[str, bool]:
    """(feedback HTML, settled) for a learner's pick, given their wrong picks so far.

    A first wrong pick (`misses` 0) is not settled: its `hint` (what that pick overlooks) and
    one more try, the answer not given away. A right pick or a second wrong one settles the
    question: the answer and `why` are shown, and for a wrong pick its own hint after them.
    `why` and the hint may use the questions' inline markdown (`code`, **bold**, *italic*)."""
    right = picked == answer
    if not right and misses == 0:
        hint = f"{inline(hint)} " if hint else ""
        return box(f"{verdict('Not quite.', WRONG)} {hint}{TRY_AGAIN}"), False
    if right:
        return box(f"{verdict('Right.', RIGHT)} {inline(why)}"), True
    # three short parts on their own lines, only the verdict red; the pick is named (the answer gets selected)
    yours = f"<br><i>About your pick:</i> {inline(hint)}" if hint else ""
    said = f"Not quite: you picked “{html.escape(picked)}”; the answer is “{html.escape(answer)}”."
    return box(f"{verdict(said, WRONG)}<br>{inline(why)}{yours}"), True


def already(picked: str, button: str) -> str:
    """The feedback to a press on a pick graded wrong already: no second try is counted."""
    return box(f"You checked “{html.escape(picked)}” already. Pick another answer, then press {button}.")
