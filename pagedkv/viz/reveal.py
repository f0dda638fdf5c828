"""A text kept out of sight until the reader asks for it: one collapsed accordion.

A notebook's try-it cell can compute its answers at once and still show nothing of them
until the reader opens the accordion (its output is not a printout that Run All expands).
`revealed(title)` does the same for whatever a block of code prints or displays (lines and
pictures), e.g. the cells that show what a step did, right under the prediction about it.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from contextlib import contextmanager

import ipywidgets as widgets
from IPython.display import display


def reveal(title: str, text: str) -> widgets.Accordion:
    """One collapsed accordion titled `title`; opening it shows `text` as preformatted lines
    (HTML-escaped, so the text is shown exactly as given)."""
    body = widgets.HTML(
        f"<pre style='font-size:14px;line-height:1.4;margin:0;white-space:pre-wrap'>{html.escape(text)}</pre>"
    )
    accordion = widgets.Accordion(children=[body], selected_index=None)
    accordion.set_title(0, title)
    return accordion


@contextmanager
def revealed(title: str) -> Iterator[widgets.Accordion]:
    """Display one collapsed accordion titled `title`; what the `with` block prints or
    displays goes inside it (an ipywidgets Output) instead of under the cell.
    Example: `with revealed("What step 1 did"): print(...); display(fig)`."""
    shown = widgets.Output()
    accordion = widgets.Accordion(children=[shown], selected_index=None)
    accordion.set_title(0, title)
    display(accordion)
    with shown:
        yield accordion
