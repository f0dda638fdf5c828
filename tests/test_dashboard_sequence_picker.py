"""The Sequence dropdown shows the sequence Fork and Finish act on, in the page too.

Only a Dropdown's `index` (and its labels) reach the page. The messages the widget sends are
recorded here, with no browser: the page must never be told an index other than the one the
kernel ends on, or it can show one sequence while Finish acts on another."""

from __future__ import annotations

import pytest

from pagedkv.viz import Dashboard


@pytest.fixture
def dash():
    dashboard = Dashboard("walkthrough")
    dashboard.goto(23)  # request_B is the one live sequence
    return dashboard


def record(widget, monkeypatch) -> list[dict]:
    """The states `widget` sends to the page from now on (its labels and index)."""
    sent: list[dict] = []
    monkeypatch.setattr(widget, "_send", lambda msg, buffers=None: sent.append(msg["state"]))
    return sent


def shown(widget, sent: list[dict]) -> str:
    """The label the page shows after the messages `sent`, starting from what it showed."""
    labels, index = [label for label, _ in widget.options], widget.index
    for state in sent:
        labels = state.get("_options_labels", labels)
        index = state.get("index", index)
    return labels[index] if index is not None else ""


def test_fork_then_decode_all_keeps_the_picked_sequence_shown_and_acted_on(dash, monkeypatch):
    dash.prefix_picker.value = "request_B"
    dash.add_button.click()
    picker = dash.seq_picker
    picker.value = "yours1"  # as a person picks it
    sent = record(picker, monkeypatch)
    dash.fork_button.click()
    dash.decode_button.click()
    indexes = [state["index"] for state in sent if "index" in state]
    assert indexes in ([], [1]), indexes  # never index 0 (request_B), not even for a moment
    assert picker.value == picker.label == "yours1"
    assert picker.options[picker.index][1] == "yours1"
    dash.finish_button.click()
    assert "yours1" not in dash.run.seqs and "request_B" in dash.run.seqs
    assert "you finished yours1" in dash.caption.value


def test_the_page_is_told_the_sequence_the_kernel_keeps(dash, monkeypatch):
    dash.prefix_picker.value = "request_B"
    dash.add_button.click()
    picker = dash.seq_picker
    picker.value = "request_B"
    sent = record(picker, monkeypatch)
    dash.fork_button.click()  # the options grow: request_B, request_B.f1, yours1
    assert picker.value == "request_B"
    assert all(state.get("index", 0) == 0 for state in sent)
    picker.value = "yours1"
    sent.clear()
    dash.prefix_picker.value = ""  # (none)
    dash.add_button.click()  # yours2 is added and shown
    assert picker.value == "yours2" and shown(picker, sent) == "yours2"
    dash.finish_button.click()  # yours2 goes: the first left is shown, and is the value
    assert picker.value == picker.options[0][1] and picker.index == 0
