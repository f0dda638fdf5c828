"""`Discuss("05-reserve")`: an open question; "Show an answer" reveals the answer a teacher
would give (stored in pagedkv/data/questions.json by id, as quizzes are)."""

from __future__ import annotations

import html

import ipywidgets as widgets

from pagedkv.viz.grading import box as _box
from pagedkv.viz.grading import markdown_html
from pagedkv.viz.questions import discussion


class Discuss(widgets.VBox):
    """An open question; the answer appears only when "Show an answer" is pressed."""

    def __init__(self, question_id: str) -> None:
        self.data = discussion(question_id)
        super().__init__()
        self.button = widgets.Button(description="Show an answer").add_class("pagedkv-discuss-show")
        self.shown = widgets.HTML().add_class("pagedkv-discuss-answer")
        self.button.on_click(lambda _: self.reveal())
        self.children = [
            widgets.HTML(_box(f"<b>Discuss:</b> {html.escape(self.data.question)}")),
            self.button,
            self.shown,
        ]
        self.add_class("pagedkv-discuss")

    def reveal(self) -> None:
        """Show the answer (what the button does), its markdown (`code`, **bold**) rendered."""
        self.shown.value = _box(markdown_html(self.data.answer))
        self.button.disabled = True
        self.button.description = "Answer shown"  # not "Show an answer"; short: the button keeps its width
