"""A text kept out of sight until the reader asks for it: one collapsed accordion.

A notebook's try-it cell can compute its answers at once and still show nothing of them
until the reader opens the accordion (its output is not a printout that Run All expands).
"""

from __future__ import annotations

import html

import ipywidgets as widgets


def reveal(title: str, text: str) -> widgets.Accordion:
    """One collapsed accordion titled `title`; opening it shows `text` as preformatted lines
    (HTML-escaped, so the text is shown exactly as given)."""
    body = widgets.HTML(
        f"<pre style='font-size:14px;line-height:1.4;margin:0;white-space:pre-wrap'>{html.escape(text)}</pre>"
    )
    accordion = widgets.Accordion(children=[body], selected_index=None)
    accordion.set_title(0, title)
    return accordion
