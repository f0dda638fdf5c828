"""The dashboard's controls: every widget it shows, with its CSS class, and their layout.

`DashboardControls` is the widget half of `pagedkv.viz.dashboard.Dashboard`: it creates the
buttons, sliders, pickers and output widgets for a `ScenarioRun` and lays them out to fit a
1280x720 screen: the scenario and step counter, Step / Back / Reset / Jump to / Play, a row of
view tabs, then the one view picked, in one place (the main heatmap beside the event log, more
pool views, the LRU order, the page lifecycle, the block tables, the pool's size), so Step and
whichever view is open are on the screen together; your own actions sit under the view. Each
widget carries a `pagedkv-*` CSS class so browser tests click it like a person. `busy()` marks
a step being drawn; `debounced` makes a slider replay once its arrow keys stop. It wires no
callbacks and draws nothing: `Dashboard` does both.

NOTE: the view tabs are ToggleButtons that show one pane and hide the others, not an
ipywidgets `Tab`: a `Tab` restored after a page reload could stop switching (its tab bar kept
the tab of before the reload), and panes in one place keep every view under the Step button.

vLLM and SGLang ship no such controls (their engines are driven by requests, not buttons).
Leaves out: the callbacks, rendering and keyboard shortcuts."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager

import ipywidgets as widgets

from pagedkv.scenarios import SCENARIOS, ScenarioRun
from pagedkv.viz.dashboard_text import SCROLL_NOTE, SCROLL_NOTE_PX, VIEW_BOX_PX, VIEW_HEIGHT_PX, geometry_html
from pagedkv.viz.debounce import Debounced
from pagedkv.viz.palette import SequencePalette

Options = list[tuple[str, Hashable]]  # (label, value) of a Dropdown

__all__ = [
    "MAIN_SHARE", "picker_px", "PAGES_RANGE", "PAGE_SIZE_RANGE", "PLAY_SPEEDS", "VIEWS", "VIEW_HEIGHT_PX",
    "DashboardControls",
]  # fmt: skip

PAGES_RANGE = (4, 32)  # pool-size slider: ~15 px a page over its 420 px, so a drag moves a page or two
PAGE_SIZE_RANGE = (1, 16)  # page-size slider
PLAY_SPEEDS = (("slow", 1500), ("normal", 800), ("fast", 300))  # label, ms a step
ST = {"button_width": "84px", "description_width": "initial"}  # "Play speed" whole
MAIN_SHARE = 0.66  # of the dashboard's width: the main heatmap at most; the event log the rest
VIEWS = ("Pool and log", "More views", "LRU order", "Page life", "Block tables", "Pool size")  # tabs
ACTIONS_LABEL = "<b>Your actions</b>"  # first on the actions' first row
PREFIX_TIP = (
    "running sequences only (a waiting or preempted one holds no pages); your request starts "
    "with the tokens this sequence holds so far (a request still prefilling: only its prompt "
    "tokens computed so far), then your prompt: the full pages those tokens fill are prefix hits"
)
PROMPT_TEXT = "Hello, pages!"  # the Prompt box's text at the start and after Reset
BUTTON_PX = 88  # Step, Back, Reset, Fork, Finish: narrow, so Jump to fits on the Step row
DECODE_TIPS = (  # Decode all's tooltip without and with a scheduler
    "your own action: one more token for every live sequence",
    "your own action: one more token for each sequence you added (Step runs the scheduler)",
)


def picker_px(options: list[tuple[str, str]]) -> int:
    """A Dropdown width (CSS px) that shows its longest option whole: ~8 px a character at
    JupyterLab's 13 px font, plus its description and arrow."""
    return 8 * max(len(label) for label, _ in options) + 150


class DashboardControls(widgets.VBox):
    """The dashboard's widgets, created by `build_controls` and laid out by `_layout`."""

    run: ScenarioRun
    palette: SequencePalette  # one colour per request, in the order the scenario names them
    _syncing: bool  # set while the code (not a person) moves a widget

    def build_controls(self, run: ScenarioRun) -> None:
        """Create every widget for `run` (its steps and geometry set the sliders' ranges)."""
        self._build_stepping(run)
        self._build_own_requests()
        self._build_views()

    def _build_stepping(self, run: ScenarioRun) -> None:
        """The scenario picker, Step / Back / Reset, Play and its speed, Jump to, the pool's
        geometry, and the step counter and caption they move."""
        width = widgets.Layout
        titles = [(s.title, s.name) for s in SCENARIOS.values()]
        self.scenario_picker = widgets.Dropdown(
            options=titles,
            value=run.scenario.name,
            description="Scenario",
            # narrower in a narrow notebook, so the step counter stays on its line
            layout=width(
                width=f"{picker_px(titles)}px", max_width="100%", min_width="300px", flex="0 1 auto"
            ),
        ).add_class("pagedkv-scenario")
        narrow = {"layout": width(width=f"{BUTTON_PX}px")}
        self.step_button = widgets.Button(
            description="Step", icon="step-forward", tooltip="apply the next step", **narrow
        ).add_class("pagedkv-step")
        self.back_button = widgets.Button(
            description="Back", icon="step-backward", tooltip="undo the last step exactly", **narrow
        ).add_class("pagedkv-back")
        self.reset_button = widgets.Button(
            description="Reset",
            icon="undo",
            tooltip="back to step 0, without your own actions; the pool keeps the size the sliders set",
            **narrow,
        ).add_class("pagedkv-reset")
        self.play = widgets.Play(
            interval=800, min=0, max=len(run.steps), description="Play", show_repeat=False,
            tooltip="Play: step on by itself; Stop (■): stay at the step shown",  # icons only
        ).add_class("pagedkv-play")  # fmt: skip
        self.speed = widgets.ToggleButtons(options=PLAY_SPEEDS, value=800, description="Play speed", style=ST)
        self.speed.add_class("pagedkv-speed")
        self.step_slider = widgets.IntSlider(
            value=0, min=0, max=len(run.steps), description="Jump to", readout=False,
            continuous_update=False, layout=width(width="160px"),  # wider wraps the row at 850 px
        ).add_class("pagedkv-step-slider")  # fmt: skip
        self.step_box = widgets.BoundedIntText(  # a bordered box looks editable (a readout does not)
            value=0, min=0, max=len(run.steps), description="go to step", layout=width(width="130px"),
            style={"description_width": "initial"},
        ).add_class("pagedkv-step-box")  # fmt: skip
        self._links = [widgets.link((self.step_slider, t), (self.step_box, t)) for t in ("max", "value")]
        self.step_counter = widgets.HTML().add_class("pagedkv-step-counter")
        self.caption = widgets.HTML(layout=width(min_height="0")).add_class("pagedkv-caption")
        self.pages_slider = widgets.IntSlider(
            value=run.num_pages, min=PAGES_RANGE[0], max=max(PAGES_RANGE[1], run.num_pages),
            description="Pages", continuous_update=False, layout=width(width="420px"),
        ).add_class("pagedkv-pages")  # fmt: skip  # wide: ~15 px a page
        self.page_size_slider = widgets.IntSlider(
            value=run.page_size, min=PAGE_SIZE_RANGE[0], max=max(PAGE_SIZE_RANGE[1], run.page_size),
            description="Page size", continuous_update=False,
        ).add_class("pagedkv-page-size")  # fmt: skip
        self.geometry_note = widgets.HTML().add_class("pagedkv-geometry-note")  # under the sliders

    def _build_own_requests(self) -> None:
        """A person's own actions: add a request (with a prefix), fork, finish, decode all,
        and the confirmation that switching scenarios discards them."""
        width = widgets.Layout
        self.prompt = widgets.Text(
            value=PROMPT_TEXT, description="Prompt", layout=width(width="250px")
        ).add_class("pagedkv-prompt")
        self.prefix_picker = widgets.Dropdown(
            description="Prefix of", layout=width(width="200px"), tooltip=PREFIX_TIP
        ).add_class("pagedkv-prefix")
        self.add_button = widgets.Button(description="Add request", icon="plus").add_class("pagedkv-add")
        self.seq_picker = widgets.Dropdown(description="Sequence", layout=width(width="200px")).add_class(
            "pagedkv-seq"
        )
        narrow = {"layout": width(width=f"{BUTTON_PX}px")}
        self.fork_button = widgets.Button(description="Fork", icon="code-branch", **narrow)
        self.fork_button.add_class("pagedkv-fork")
        self.finish_button = widgets.Button(description="Finish", icon="check", **narrow).add_class(
            "pagedkv-finish"
        )
        self.decode_button = widgets.Button(
            description="Decode all", icon="forward", tooltip=DECODE_TIPS[0], layout=width(width="120px")
        ).add_class("pagedkv-decode")
        self.actions_label = widgets.HTML(ACTIONS_LABEL, layout=width(width="110px"))
        # beside the buttons, in the room they leave (it wraps under them in a narrow notebook)
        self.actions_note = widgets.HTML(layout=width(flex="1 1 200px", min_width="200px")).add_class(
            "pagedkv-actions-note"
        )
        # its own height, not one line's: a question wrapped onto 2 lines is not cut
        self.confirm_text = widgets.HTML(layout=width(height="auto", flex="1 1 300px", min_width="0"))
        self.discard_button = widgets.Button(
            description="Switch", button_style="danger", layout=width(width=f"{BUTTON_PX}px")
        ).add_class("pagedkv-discard")
        self.stay_button = widgets.Button(description="Stay", **narrow).add_class("pagedkv-stay")
        self.confirm = widgets.HBox(
            [self.confirm_text, self.discard_button, self.stay_button],
            layout=width(display="none", flex_flow="row wrap", align_items="center", height="auto"),
        ).add_class("pagedkv-confirm")

    def _build_views(self) -> None:
        """The pictures (heatmap, LRU order, lifecycle), status, block tables and event log."""
        width = widgets.Layout
        # The full-width pictures drop the widgets' 2 px margins: 100% plus margins would
        # overflow their tab by 4 px and show a horizontal scrollbar.
        full = {"width": "100%", "margin": "0"}
        # At its own size (drawn for the screen), at most MAIN_SHARE wide; the log takes the rest.
        self.heatmap = widgets.Image(
            format="png", layout=width(max_width=f"{MAIN_SHARE:.0%}", flex="0 1 auto")
        ).add_class("pagedkv-heatmap")
        # A view's picture: the cell's width at most and VIEW_HEIGHT_PX tall at most, its shape kept.
        view = {
            "width": "auto",
            "max_width": "100%",
            "max_height": f"{VIEW_HEIGHT_PX}px",
            "margin": "0",
            "object_fit": "contain",
            "object_position": "left top",
        }  # contain: in a pane taller than the picture, the picture keeps its shape
        self.more_views = widgets.Image(format="png", layout=width(**view)).add_class("pagedkv-more-views")
        self.busy_note = widgets.HTML().add_class("pagedkv-busy-note")
        self.lru = widgets.Image(format="png", layout=width(**view)).add_class("pagedkv-lru")
        self.lifecycle = widgets.Image(format="png", layout=width(**view)).add_class("pagedkv-lifecycle")
        self.status = widgets.HTML().add_class("pagedkv-status")
        self.block_tables = widgets.HTML(layout=width(**full, overflow="auto")).add_class(
            "pagedkv-block-tables"
        )
        self.event_log = widgets.HTML(
            layout=width(flex="1 1 0", min_width=f"{0.98 - MAIN_SHARE:.0%}", margin="0 0 0 8px")
        ).add_class("pagedkv-event-log")

    def _layout(self) -> list[widgets.Widget]:
        def row(children: list) -> widgets.HBox:  # wraps onto the next line in narrow windows
            return widgets.HBox(children, layout=widgets.Layout(flex_flow="row wrap", align_items="center"))

        main = widgets.HBox([self.heatmap, self.event_log], layout=widgets.Layout(align_items="flex-start"))
        panes = (
            main, self.more_views, self.lru, self.lifecycle,
            # status and tables scroll together, in a box taller than a view (TOKENS_ROOM_PX);
            # a line under the box says it scrolls (its last rows may be below its edge)
            widgets.VBox([
                widgets.VBox([self.status, self.block_tables], layout=widgets.Layout(
                    max_height=f"{VIEW_BOX_PX}px", overflow="hidden auto")),
                widgets.HTML(SCROLL_NOTE, layout=widgets.Layout(height=f"{SCROLL_NOTE_PX}px")),
            ]),  # x hidden, y scrolls
            widgets.VBox([row([self.pages_slider, self.page_size_slider]), self.geometry_note, self.speed]),
        )  # fmt: skip
        for pane in panes:  # all as tall as the tallest: the actions below stay where they are
            pane.layout.min_height = f"{VIEW_HEIGHT_PX}px"
        self.panes = dict(zip(VIEWS, panes))
        self.view_picker = widgets.ToggleButtons(
            options=VIEWS, value=VIEWS[0], style={"button_width": "auto"}
        ).add_class("pagedkv-tabs")
        self.show_view(VIEWS[0])
        stepping = [
            self.step_button,
            self.back_button,
            self.reset_button,
            self.play,
            self.step_slider,
            self.step_box,
        ]
        self.stepping_row = row(stepping)
        actions = widgets.VBox([
            row([self.actions_label, self.prompt, self.prefix_picker, self.add_button]),
            row([self.seq_picker, self.fork_button, self.finish_button, self.decode_button,
                 self.actions_note]),
        ]).add_class("pagedkv-actions")  # fmt: skip
        return [
            # one line: in a narrow notebook the picker narrows, the counter never wraps under it
            widgets.HBox(
                [self.scenario_picker, self.step_counter, self.busy_note],
                layout=widgets.Layout(flex_flow="row nowrap", align_items="center"),
            ),
            self.confirm,  # in the stepping row's place while it asks (the dashboard keeps its height)
            self.stepping_row,
            self.caption,
            self.view_picker,
            *panes,
            actions,
        ]

    def yours(self) -> str:
        """What Fork, Finish and Decode all act on, for a message saying there is none."""
        return (
            "live sequence" if self.run.scheduler is None else "sequence you added (Step runs the scheduler)"
        )

    def show_view(self, title: str) -> None:
        """Show the pane of view `title` in the views' place and hide the others."""
        for name, pane in self.panes.items():
            pane.layout.display = "" if name == title else "none"

    @contextmanager
    def busy(self) -> Iterator[None]:
        """While a step is drawn or the pool rebuilt, the header says "drawing…" and Reset and
        the pool-size sliders are disabled (put back as they were after). Step, Back and Decode
        all stay pressable: a click during a draw waits in the kernel's queue and runs next, so
        every click is one step and none is lost; `render()` sets their state once a step is
        drawn (e.g. Step off at the end, where a queued click gets the end message)."""
        keep = (self.reset_button, self.pages_slider, self.page_size_slider)
        was = [w.disabled for w in keep]
        self.show_busy()
        for widget in keep:
            widget.disabled = True
        try:
            yield
        finally:
            for widget, disabled in zip(keep, was, strict=True):
                widget.disabled = disabled
            self.busy_note.value = ""

    def show_busy(self) -> None:  # also while a slider waits for its arrow keys to stop
        self.busy_note.value = "<span style='color:#B45309;font-size:14px'>drawing…</span>"

    def debounced(self, action: Callable[[dict], None]) -> Callable[[dict], None]:
        """A slider's callback: `action` once its keys stop (busy from the first), not on `_syncing`."""

        def run(change: dict) -> None:
            with self.busy():
                action(change)
            change["owner"].focus()  # disabling took the keyboard focus away: give it back

        later = Debounced(run, self.show_busy)
        return lambda change: None if self._syncing else later(change)  # type: ignore[func-returns-value]

    def pressed(self, action: Callable[[], object]) -> Callable[[object], None]:
        """A button callback that runs `action` in the busy state."""

        def callback(_: object) -> None:
            if self.busy_note.value:  # a slider waits for its keys to stop ("drawing…"): the
                return  # jump it is about to make would undo this click, so it is refused
            with self.busy():
                action()

        return callback

    def sync_stepping(
        self, cursor: int, steps: int, live: Options, own: Options, pick: Hashable = None
    ) -> None:
        """Point Jump to, Play and the pickers at the run without triggering them. "Prefix of"
        offers every `live` sequence; "Sequence" (Fork, Finish) your `own`, showing `pick` (a
        request you added), else what it showed, else the first, sent in one message. Play's ■
        sets its value to its `min`, which follows the step: ■ stops (pauses) where it is."""
        self._syncing = True
        try:
            self.step_slider.max, self.step_slider.value = steps, cursor
            with self.play.hold_sync():
                self.play.min = 0
                self.play.max, self.play.value = steps, cursor
                self.play.min = cursor
            # ("(none)", ""): no prefix (a Dropdown takes the value None as "nothing selected")
            pickers = ((self.prefix_picker, [("(none)", ""), *live], None), (self.seq_picker, own, pick))
            for picker, options, first in pickers:
                values = [v for _, v in options]
                chosen = next((v for v in (first, picker.value) if v is not None and v in values), None)
                if list(picker.options) != options or chosen != picker.value:
                    with picker.hold_sync():  # no passing index 0 (another sequence) on the page
                        picker.options = options
                        picker.value = chosen if chosen is not None else (values[0] if values else None)
        finally:
            self._syncing = False

    def _sync_controls(self) -> None:
        """Point the picker, sliders and Play at the current run without triggering them."""
        self.palette.restart(self.run.steps)
        self._syncing = True
        try:
            self.scenario_picker.value = self.run.scenario.name
            # the maximum first: a pool built larger (resize) than the range shows its size
            self.pages_slider.max = max(PAGES_RANGE[1], self.run.num_pages)
            self.page_size_slider.max = max(PAGE_SIZE_RANGE[1], self.run.page_size)
            self.pages_slider.value = self.run.num_pages
            self.page_size_slider.value = self.run.page_size
            self.play.min = 0  # before a max below the old step
            self.play.max = self.step_slider.max = len(self.run.steps)
            self.decode_button.tooltip = DECODE_TIPS[self.run.scheduler is not None]  # render sets its note
        finally:
            self._syncing = False
        self.geometry_note.value = geometry_html(self.run)
