"""Dashboard: an ipywidgets layout that steps a scenario and shows the pool as it changes.

Step / Back / Reset buttons and a Play widget drive a `ScenarioRun`; a picker switches
scenario; controls add a request (optionally starting with an existing sequence's tokens,
so it shares that prefix), fork a sequence or finish one; sliders rebuild the pool with
another number of pages or page size. Every change re-renders, in place:

- the pool heatmaps (state, occupancy, owner, ref count) and the LRU-order heatmap, as PNG
  bytes in `ipywidgets.Image` widgets (a click produces no cell output, so notebooks pass
  strict nbval; `PoolHeatmap` redraws without re-plotting);
- the block tables with each sequence's text boxed by page, a status line of usage and
  counters, and an event log of allocations,
  prefix hits, evictions, copy-on-write copies and preemptions (HTML widgets).

Back is exact time travel: `ScenarioRun.back()` replays the history minus its last action.
Widgets carry CSS classes (`pagedkv-step`, `pagedkv-back`, `pagedkv-reset`, `pagedkv-play`,
`pagedkv-scenario`, `pagedkv-step-counter`, `pagedkv-heatmap`, `pagedkv-lru`,
`pagedkv-event-log`, ...) so browser tests can click them like a person. Everything here
reads the pool only through `snapshot()` and events.

Production engines report the same quantities as metrics (vLLM: `kv_cache_usage_perc`,
prefix-cache queries and hits, preemptions) but show no pages. Leaves out: editing a
scenario's steps, and saving a session.
"""

from __future__ import annotations

import html
from collections.abc import Hashable

import ipywidgets as widgets
import numpy as np

from ..model import TinyLM
from ..page import PageState
from ..scenarios import SCENARIOS, Action, ScenarioRun
from .block_table import block_table_html
from .heatmap import PoolHeatmap
from .palette import SequencePalette
from .tokens import token_ids_of

PAGES_RANGE = (4, 256)  # pool-size slider
PAGE_SIZE_RANGE = (1, 16)  # page-size slider
LOG_STEPS = 40  # steps shown in the event log (newest first)
HEATMAP_DPI = 72  # PNG encoding dominates a step: more pixels cost more than they show


class Dashboard(widgets.VBox):
    """Step a scenario through a real paged KV cache and watch its pages."""

    def __init__(
        self,
        scenario: str = "walkthrough",
        num_pages: int | None = None,
        page_size: int | None = None,
        model: TinyLM | None = None,
    ) -> None:
        super().__init__()
        self.palette = SequencePalette()
        self.model = model
        self._heatmaps: dict[tuple[int, int], tuple[PoolHeatmap, PoolHeatmap]] = {}
        self._syncing = False  # set while the code (not a person) moves a widget
        self.message = ""
        self.run = ScenarioRun(scenario, num_pages, page_size, model)  # validates the arguments
        self._build_widgets()
        self._sync_controls()
        self.render()

    # ---- layout -------------------------------------------------------------------------------

    def _build_widgets(self) -> None:
        run, width = self.run, widgets.Layout
        titles = [(s.title, s.name) for s in SCENARIOS.values()]
        self.scenario_picker = widgets.Dropdown(
            options=titles,
            value=run.scenario.name,
            description="Scenario",
            layout=width(width="520px"),
        ).add_class("pagedkv-scenario")
        self.step_button = widgets.Button(
            description="Step", icon="step-forward", tooltip="apply the next step"
        ).add_class("pagedkv-step")
        self.back_button = widgets.Button(
            description="Back", icon="step-backward", tooltip="undo the last step exactly"
        ).add_class("pagedkv-back")
        self.reset_button = widgets.Button(
            description="Reset", icon="undo", tooltip="back to step 0"
        ).add_class("pagedkv-reset")
        self.play = widgets.Play(
            interval=800, min=0, max=len(run.steps), description="Play", show_repeat=False
        ).add_class("pagedkv-play")
        self.step_counter = widgets.HTML().add_class("pagedkv-step-counter")
        self.pages_slider = widgets.IntSlider(
            value=run.num_pages, min=PAGES_RANGE[0], max=max(PAGES_RANGE[1], run.num_pages),
            description="Pages", continuous_update=False,
        ).add_class("pagedkv-pages")  # fmt: skip
        self.page_size_slider = widgets.IntSlider(
            value=run.page_size, min=PAGE_SIZE_RANGE[0], max=max(PAGE_SIZE_RANGE[1], run.page_size),
            description="Page size", continuous_update=False,
        ).add_class("pagedkv-page-size")  # fmt: skip
        self.prompt = widgets.Text(
            value="Hello, pages!", description="Prompt", layout=width(width="300px")
        ).add_class("pagedkv-prompt")
        self.prefix_picker = widgets.Dropdown(
            description="Prefix of", layout=width(width="220px")
        ).add_class("pagedkv-prefix")
        self.add_button = widgets.Button(description="Add request", icon="plus").add_class(
            "pagedkv-add"
        )
        self.seq_picker = widgets.Dropdown(
            description="Sequence", layout=width(width="220px")
        ).add_class("pagedkv-seq")
        self.fork_button = widgets.Button(description="Fork", icon="code-branch").add_class(
            "pagedkv-fork"
        )
        self.finish_button = widgets.Button(description="Finish", icon="check").add_class(
            "pagedkv-finish"
        )
        self.heatmap = widgets.Image(format="png").add_class("pagedkv-heatmap")
        self.lru = widgets.Image(format="png").add_class("pagedkv-lru")
        self.status = widgets.HTML().add_class("pagedkv-status")
        self.block_tables = widgets.HTML().add_class("pagedkv-block-tables")
        self.event_log = widgets.HTML().add_class("pagedkv-event-log")

        self.step_button.on_click(lambda _: self.step())
        self.back_button.on_click(lambda _: self.back())
        self.reset_button.on_click(lambda _: self.reset())
        self.add_button.on_click(lambda _: self.add_request())
        self.fork_button.on_click(lambda _: self.fork())
        self.finish_button.on_click(lambda _: self.finish())
        self.play.observe(self._on_play, names="value")
        self.scenario_picker.observe(self._on_scenario, names="value")
        self.pages_slider.observe(self._on_geometry, names="value")
        self.page_size_slider.observe(self._on_geometry, names="value")

        def row(children: list) -> widgets.HBox:  # wraps onto the next line in narrow windows
            return widgets.HBox(children, layout=widgets.Layout(flex_flow="row wrap"))

        self.children = [
            row([self.scenario_picker]),
            row(
                [
                    self.step_button,
                    self.back_button,
                    self.reset_button,
                    self.play,
                    self.step_counter,
                ]
            ),
            row([self.prompt, self.prefix_picker, self.add_button]),
            row(
                [
                    self.seq_picker,
                    self.fork_button,
                    self.finish_button,
                    self.pages_slider,
                    self.page_size_slider,
                ]
            ),
            self.status,
            row([self.heatmap, widgets.VBox([self.lru, self.block_tables])]),
            self.event_log,
        ]

    # ---- actions (the buttons call these; tests may too) --------------------------------------

    def step(self) -> None:
        """Apply the next scenario step (when the scenario is done: one token for everyone)."""
        self.message = ""
        if self.run.can_step:
            self.run.step()
        else:
            self.message = "the scenario is over and no sequence is live: add a request or Reset"
        self.render()

    def back(self) -> None:
        """Undo the last step (exact: the run is replayed without it)."""
        self.message = "" if self.run.back() else "nothing to undo"
        self.render()

    def reset(self) -> None:
        self.message = ""
        self.run.reset()
        self.palette.clear()
        self.render()

    def add_request(self) -> None:
        """Admit the prompt text as a new request, after the tokens of the picked sequence."""
        parent = self.prefix_picker.value or None  # "" is the "(none)" entry
        self._apply(
            lambda: Action(
                "add",
                self.run.new_id("user"),
                parent=parent,
                text=self.prompt.value,
                caption="a request you added",
            )
        )

    def fork(self) -> None:
        """Fork the picked sequence: the child shares all of its pages."""
        parent = self.seq_picker.value
        if parent is None:
            self.message = "no live sequence to fork"
            return self.render()
        self._apply(
            lambda: Action(
                "fork",
                self.run.new_id(f"{parent}.f"),
                parent=parent,
                caption=f"you forked {parent}",
            )
        )

    def finish(self) -> None:
        """Free the picked sequence."""
        seq_id = self.seq_picker.value
        if seq_id is None:
            self.message = "no live sequence to finish"
            return self.render()
        self._apply(lambda: Action("free", seq_id, caption=f"you finished {seq_id}"))

    def _apply(self, make_action) -> None:
        try:
            action = make_action()
        except ValueError as error:  # e.g. an empty prompt: nothing happens, say why
            self.message = str(error)
            return self.render()
        self.message = ""
        self.run.apply(action)
        self.render()

    def load(
        self, scenario: str, num_pages: int | None = None, page_size: int | None = None
    ) -> None:
        """Start another scenario (or the same one on another pool geometry) at step 0."""
        self.run = ScenarioRun(scenario, num_pages, page_size, self.model)
        self.palette.clear()
        self.message = ""
        self._sync_controls()
        self.render()

    # ---- widget callbacks ---------------------------------------------------------------------

    def _on_play(self, change: dict) -> None:
        if self._syncing:
            return
        while self.run.cursor < change["new"] and not self.run.done:
            self.run.step()
        self.render()

    def _on_scenario(self, change: dict) -> None:
        if not self._syncing:
            self.load(change["new"])

    def _on_geometry(self, change: dict) -> None:
        if not self._syncing:
            self.load(self.run.scenario.name, self.pages_slider.value, self.page_size_slider.value)

    def _sync_controls(self) -> None:
        """Point the picker, sliders and Play at the current run without triggering them."""
        self._syncing = True
        try:
            self.scenario_picker.value = self.run.scenario.name
            self.pages_slider.value = self.run.num_pages
            self.page_size_slider.value = self.run.page_size
            self.play.max = len(self.run.steps)
        finally:
            self._syncing = False

    # ---- rendering ----------------------------------------------------------------------------

    def render(self) -> None:
        """Redraw every view from the pool's snapshot and the run's records."""
        run = self.run
        snap = run.snapshots[-1]
        key = (run.num_pages, run.page_size)
        if key not in self._heatmaps:
            self._heatmaps[key] = (
                PoolHeatmap(*key, palette=self.palette, dpi=HEATMAP_DPI),
                PoolHeatmap(*key, views=("lru",), palette=self.palette, panel_width=5.4),
            )
        pool_map, lru_map = self._heatmaps[key]
        events = run.events
        pool_map.update(snap)
        lru_map.update(snap, events)
        self.heatmap.value = pool_map.png()
        self.lru.value = lru_map.png()
        # Shown at their own size: a layout that stretches an <img> blurs its text.
        self.heatmap.width, self.lru.width = str(pool_map.size[0]), str(lru_map.size[0])
        tokens = token_ids_of(run.seqs)  # each sequence's text, boxed by page under the tables
        self.block_tables.value = block_table_html(snap, self.palette, events, token_ids=tokens)
        self.status.value = self._status_html(snap)
        self.event_log.value = self._log_html()
        caption = run.records[-1].action.caption if run.records else run.scenario.summary
        self.step_counter.value = (
            f"<b>step {len(run.history)}</b> of {len(run.steps)} · {html.escape(caption)}"
        )
        live: list[tuple[str, Hashable]] = [(str(s), s) for s in snap.seq_ids]
        self._syncing = True
        try:
            self.play.max = len(run.steps)  # a scheduler scenario's steps grow as it runs
            self.play.value = run.cursor
            for picker, options in (
                # "" stands for no prefix: a Dropdown takes the value None as "nothing selected"
                (self.prefix_picker, [("(none)", ""), *live]),
                (self.seq_picker, live),
            ):
                if list(picker.options) != options:
                    keep = picker.value
                    picker.options = options
                    picker.value = (
                        keep
                        if keep in [v for _, v in options]
                        else (options[0][1] if options else None)
                    )
        finally:
            self._syncing = False
        self.back_button.disabled = not run.history
        self.step_button.disabled = not run.can_step  # the end of a scenario that freed everything
        self.fork_button.disabled = self.finish_button.disabled = not live

    def _status_html(self, snap) -> str:
        counts = np.bincount(snap.state, minlength=3)
        stats = snap.stats
        queries = stats["prefix_queries"]
        rate = f"{stats['prefix_hits'] / queries:.0%}" if queries else "n/a"
        text = (
            f"<b>{self.run.scenario.title}</b> — {self.run.num_pages} pages × "
            f"{self.run.page_size} slots · page usage <b>{snap.usage:.0%}</b> "
            f"({counts[PageState.ACTIVE]} ACTIVE, {counts[PageState.CACHED]} CACHED, "
            f"{counts[PageState.FREE]} FREE) · token usage <b>{snap.token_usage:.0%}</b> · "
            f"prefix hits {stats['prefix_hits']}/{queries} tokens ({rate}) · evictions "
            f"{stats['evictions']} · copy-on-write {stats['cow_copies']}"
        )
        if self.message:
            text += f"<br><span style='color:#D55E00'>{html.escape(self.message)}</span>"
        return f"<div style='font-size:12px;line-height:1.4'>{text}</div>"

    def _log_html(self) -> str:
        lines = []
        for record in reversed(self.run.records[-LOG_STEPS:]):
            lines += [f"step {record.index}: {html.escape(line)}" for line in record.lines()]
        body = "".join(f"<div>{line}</div>" for line in lines) or "<i>no step yet: press Step</i>"
        return (
            "<div style='max-height:200px;overflow-y:auto;font-family:monospace;font-size:11px;"
            "line-height:1.35;border:1px solid #ccc;padding:4px'><b>event log</b> (newest first)"
            f"{body}</div>"
        )

    def __repr__(self) -> str:
        return f"Dashboard({self.run!r})"
