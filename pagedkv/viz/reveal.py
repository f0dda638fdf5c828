"""A text kept out of sight until the reader asks for it: one collapsed accordion.

A notebook's try-it cell can compute its answers at once and still show nothing of them
until the reader opens the accordion (its output is not a printout that Run All expands).
`revealed(title)` does the same for whatever a block of code prints or displays (lines and
pictures), e.g. the cells that show what a step did, right under the prediction about it.
A box a question holds (`ClosedBox.lock`) shows only a "locked" line, whoever clicks it,
until every question holding it is answered: then it gets its contents and opens.
`revealed(title, after="10-predict-streams")` makes such a box in any cell: the quiz with
that id (the one made last) holds it, as a Result box right under a prediction is held.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import ipywidgets as widgets
from IPython import get_ipython
from IPython.display import display
from IPython.utils.capture import capture_output

_waiting: list = []  # [(a prediction's `open_result` callback, its cell's execution count)]
_holds: dict[str, Callable[[ClosedBox], None]] = {}  # quiz id -> its last widget's `hold`


def register_hold(question_id: str, hold: Callable[[ClosedBox], None]) -> None:
    """A quiz made for `question_id` holds the boxes `revealed(..., after=question_id)` makes
    from now on (`hold(box)` locks the box until the quiz is answered)."""
    _holds[question_id] = hold


def hold_box(box: ClosedBox, holder: object, settled: bool, held: list) -> None:
    """A question's `hold`: unsettled, it locks `box` and keeps it in `held` (the boxes it
    unlocks once answered); settled, it opens `box` at once, as the title promises (opening
    drops the title's "(opens ...)": `ClosedBox._on_open`)."""
    if settled:
        box.selected_index = 0
    else:
        held.append(box)
        box.lock(holder)


def hold_until(box: ClosedBox, question_id: str) -> None:
    """Lock `box` until the quiz `question_id` is answered; a quiz not made in this kernel yet
    keeps it locked (run the quiz's cell first)."""
    hold = _holds.get(question_id)
    if hold is None:
        box.lock(question_id)
    else:
        hold(box)


def _cell_count() -> int:
    """The running cell's execution count (0 outside IPython)."""
    shell = get_ipython()
    return shell.execution_count if shell is not None else 0


def await_result(open_result: Callable[[ClosedBox], None] | None) -> None:
    """A prediction asks for its Result boxes: each closed box made in the same cell or the
    next one is handed to `open_result` (which opens them once the prediction is answered).
    None (a quiz that is no prediction) stops an earlier prediction from taking later boxes."""
    _waiting[:] = [(open_result, _cell_count())] if open_result is not None else []


def _hand_over(box: ClosedBox) -> None:
    if _waiting and _cell_count() - _waiting[0][1] <= 1:
        _waiting[0][0](box)
    else:
        _waiting.clear()


_PRE = "<pre style='font-size:14px;line-height:1.4;margin:0;white-space:pre-wrap'>{}</pre>"


LOCKED = (
    "<div style='font-size:15px;color:#555555;font-style:italic'>Locked until you answer the"
    " question(s) above. This box then opens by itself.</div>"
)


OPENS = " (opens when you answer)"  # a locked box's title ends so: it opens by itself
_SAYS_WHEN = re.compile(r" \((opens [^)]*|click to open)\)$")  # OPENS, "(opens once ...)", "(click to open)"


class ClosedBox(widgets.Accordion):
    """An accordion whose plain-text form (what a saved notebook shows where no widget is
    drawn: a page on the web, a stale output) names its title only, never its contents.
    While a question holds it (`lock`), its panel shows LOCKED and its contents stay in the
    kernel, not in the browser; `unlock` by the last holder shows them and opens it."""

    def __init__(self, title: str) -> None:
        super().__init__(children=[widgets.HTML()], selected_index=None)
        self.set_title(0, title)
        self.made_title = title  # the plain-text form names it so (see __repr__)
        self.holders: list[object] = []  # the questions still to answer before it opens
        self._contents = ""
        self.observe(self._on_open, names="selected_index")

    def _on_open(self, change: dict) -> None:
        """Opened (by a click, by `unlock` or by a settled question's hold): the title no
        longer says how to open it."""
        if change["new"] is not None and not self.holders:
            self.set_title(0, _SAYS_WHEN.sub("", self.get_title(0)))

    def fill(self, contents: str) -> None:
        """The box's HTML contents: shown now, or kept until the last holder unlocks it."""
        self._contents = contents
        self.children[0].value = LOCKED if self.holders else contents

    def lock(self, holder: object) -> None:
        """`holder` (a quiz) must be answered before the box shows anything; the title says
        so (OPENS), unless it already says when the box opens."""
        self.holders.append(holder)
        self.children[0].value = LOCKED
        self.set_trait("selected_index", None)  # closed (another holder may have opened it)
        if "(opens" not in self.get_title(0):
            self.set_title(0, self.get_title(0) + OPENS)

    def unlock(self, holder: object) -> None:
        """`holder` is answered; once no holder is left the box shows its contents, open."""
        self.holders = [h for h in self.holders if h is not holder]
        if not self.holders:
            self.children[0].value = self._contents
            self.selected_index = 0
            self.set_title(0, _SAYS_WHEN.sub("", self.get_title(0)))  # open: a click closes it

    def __repr__(self) -> str:
        # the title as made, without OPENS: whether a prediction holds the box depends on the
        # cells' execution counts, which a notebook runner need not advance as JupyterLab does
        return f"[{self.made_title}: a closed box; run this cell to show it]"


def reveal(title: str, text: str) -> ClosedBox:
    """One collapsed accordion titled `title`; opening it shows `text` as preformatted lines
    (HTML-escaped, so the text is shown exactly as given)."""
    accordion = ClosedBox(title)
    _hand_over(accordion)
    accordion.fill(_PRE.format(html.escape(text)))
    return accordion


def _base64(png: bytes | str) -> str:
    """A captured PNG as base64 text: IPython's formatter gives the PNG's bytes (a kernel
    encodes them only when it sends them), an Image made from base64 data gives that text."""
    return base64.b64encode(png).decode("ascii") if isinstance(png, bytes) else png


@contextmanager
def revealed(title: str, after: str | None = None) -> Iterator[ClosedBox]:
    """Display one collapsed accordion titled `title` holding what the `with` block printed and
    displayed (its lines first, then its pictures), instead of showing them under the cell.
    Example: `with revealed("What step 1 did"): print(...); display(fig)`. The block's output
    is captured with IPython's `capture_output` and put in one HTML widget (PNG pictures
    inline), so the cell's own output is the accordion alone. With `after` (a quiz id) the box
    stays locked, whoever opens it, until that quiz is answered (`hold_until`)."""
    accordion = ClosedBox(title)
    with capture_output(stdout=True, stderr=False, display=True) as captured:
        yield accordion
    parts = [_PRE.format(html.escape(captured.stdout))] if captured.stdout else []
    for output in captured.outputs:
        data = output.data
        if "image/png" in data:
            parts.append(
                f"<img src='data:image/png;base64,{_base64(data['image/png'])}' style='max-width:100%'>"
            )
        elif "text/html" in data:
            parts.append(data["text/html"])
        else:
            parts.append(_PRE.format(html.escape(data.get("text/plain", ""))))
    if after is None:
        _hand_over(accordion)
    else:
        hold_until(accordion, after)
    accordion.fill("".join(parts))
    display(accordion)
