"""reveal: a collapsed accordion whose one panel holds the text, escaped."""

from __future__ import annotations

import ipywidgets as widgets

from pagedkv.viz.reveal import reveal


def test_the_accordion_starts_collapsed_with_its_title():
    acc = reveal("Show the runs", "line 1\nline 2")
    assert isinstance(acc, widgets.Accordion)
    assert acc.selected_index is None
    assert acc.get_title(0) == "Show the runs"
    assert len(acc.children) == 1


def test_the_text_is_shown_exactly_with_html_escaped():
    text = "a < b & c > d\nmean batch = 18,119 / 1,027"
    (body,) = reveal("t", text).children
    inner = body.value.split(">", 1)[1].rsplit("</pre>", 1)[0]
    # an independent oracle: undo the five escapes by hand
    for esc, ch in (("&lt;", "<"), ("&gt;", ">"), ("&quot;", '"'), ("&#x27;", "'"), ("&amp;", "&")):
        inner = inner.replace(esc, ch)
    assert inner == text
    assert "<b" not in body.value.split(">", 1)[1]
