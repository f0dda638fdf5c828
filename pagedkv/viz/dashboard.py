"""Dashboard: an ipywidgets layout that steps a scenario and shows the pool as it changes.

Step / Back / Reset buttons, a step slider with a step box and a Play widget (with its speed)
drive a `ScenarioRun`; the header has one counter, "step k of N" (· your actions: n (r refused):
actions, not sequences; · +m past the end: scheduler steps Decode all ran once the scenario was
done). A scenario ends at its last step ("done", Step disabled; requests a scheduler has not
finished go on with Decode all, once none of yours is left). A picker switches scenario (asking
first when that would discard your own actions: scenario steps replay); controls add a request
(optionally sharing a sequence's prefix), fork, finish or decode live sequences (with a
scheduler, only those you added: Step alone runs its requests); sliders rebuild the pool and
replay everything on it. Every change re-renders, in place:

- the pool heatmaps (state, occupancy, owner, ref count) and the LRU-order heatmap, as PNG
  bytes in `ipywidgets.Image` widgets (a click produces no cell output, so notebooks pass
  strict nbval; `PoolHeatmap` redraws without re-plotting);
- the page-lifecycle diagram with the transitions of the last step highlighted;
- the block tables with each sequence's text boxed by page, a status line, and an event log:
  newest step first, the scheduler's decision then cause before effect, coloured by kind.

Back is exact time travel (`ScenarioRun.back()`). The caption says what the last step or action
did, and why it was refused if it was (an Add request: beside the buttons too). Widgets carry CSS
classes (`pagedkv-step`, `pagedkv-back`, `pagedkv-play`, `pagedkv-heatmap`, `pagedkv-lru`, ...) so
browser tests click them like a person; the pool is read via snapshots and events.

Engines report these only as metrics (vLLM: `kv_cache_usage_perc`). Leaves out: editing scenarios."""

from __future__ import annotations

import html
from collections.abc import Hashable

import pagedkv.viz.dashboard_text as text
from pagedkv.core.observe.lifecycle import step_transitions
from pagedkv.core.plumbing.words import count
from pagedkv.model.tinylm import TinyLM
from pagedkv.scenarios import SCENARIOS, Action, ScenarioRun
from pagedkv.scenarios.text import token_ids_of
from pagedkv.viz.block_table import block_table_html
from pagedkv.viz.controls import PROMPT_TEXT, VIEWS, DashboardControls
from pagedkv.viz.dashboard_text import counter_html, end_message, log_html, own_done, scrolls, status_html
from pagedkv.viz.heatmap import PoolHeatmap
from pagedkv.viz.lifecycle import lifecycle_png
from pagedkv.viz.main_picture import MAIN_HEIGHT_PX, main_heatmap
from pagedkv.viz.palette import SequencePalette

__all__ = ["HEATMAP_DPI", "LOG_STEPS", "Dashboard"]

LOG_STEPS = 40  # steps shown in the event log (newest first)
HEATMAP_DPI = 110  # projector size: ~1200 px wide pictures, shown at the cell's width (tabs)
MORE_VIEWS = ("occupancy", "ref_count")  # in the More views tab (the main picture: state, owner)
PICTURE_TABS = ("More views", "LRU order", "Page life")  # drawn when opened, not on every step
COMPACT_WIDTH = 4.6  # inches per panel of the More views tab
CAPTION_CHARS = 200  # a refused step's caption longer than this says only why (the log has the rest)
CAPTION_STYLE = "font-size:14px;line-height:1.35;display:-webkit-box;-webkit-line-clamp:2;" + (
    "-webkit-box-orient:vertical;overflow:hidden")  # fmt: skip  # ≤ 2 lines (1280x720); longer: "…"


class Dashboard(DashboardControls):
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
        self._heatmaps: dict[tuple[int, int], tuple[PoolHeatmap, ...]] = {}
        self._syncing = False  # set while the code (not a person) moves a widget
        self._taken: list[str] = []  # lifecycle transitions of the last step (highlighted)
        self._stale: set[str] = set()  # tabs whose picture is older than the last render
        self._pending_scenario: str | None = None  # a switch waiting for "discard" or "stay"
        self.message, self._switched = "", False  # _switched: a picked scenario, not yet stepped
        self._pick: Hashable | None = None  # a request you just added: Sequence shows it
        self.run = ScenarioRun(scenario, num_pages, page_size, model)  # validates the arguments
        self._build_widgets()
        self._sync_controls()
        self.render()

    def _build_widgets(self) -> None:
        self.build_controls(self.run)
        self.step_button.on_click(self.pressed(self.step))
        self.back_button.on_click(self.pressed(self.back))
        self.reset_button.on_click(self.pressed(self.reset))
        self.add_button.on_click(lambda _: self.add_request())
        self.fork_button.on_click(lambda _: self.fork())
        self.finish_button.on_click(lambda _: self.finish())
        self.decode_button.on_click(self.pressed(self.decode_all))
        self.discard_button.on_click(lambda _: self._confirm_switch(True))
        self.stay_button.on_click(lambda _: self._confirm_switch(False))
        self.play.observe(self._on_jump, names="value")
        jump, resize = self.debounced(self._on_jump), self.debounced(self._on_geometry)
        self.step_slider.observe(jump, names="value")  # dragged, or typed into its linked step box
        self.speed.observe(self._on_speed, names="value")
        self.scenario_picker.observe(self._on_scenario, names="value")
        for slider in (self.pages_slider, self.page_size_slider):  # arrow keys: one replay, after the last
            slider.observe(resize, names="value")
        self.children = self._layout()
        self.view_picker.observe(self._on_tab, names="value")

    # ---- actions (the buttons call these; tests may too) --------------------------------------

    def step(self) -> None:
        """Apply the next scenario step (refused with a message once the scenario is done)."""
        self.message = ""
        if self.run.can_step:
            self.run.step()
        else:
            self.message = end_message(self.run)
        self.render()

    def back(self) -> None:
        """Undo the last step (exact: the run is replayed without it). Undoing an action of
        your own leaves the scenario's step where it is, so the message says what went."""
        last = self.run.history[-1] if self.run.history else None
        if not self.run.back():
            self.message = "nothing to undo"
        elif last is not None and not last[1]:
            whose = "a scheduler step past the end" if last[0].op == "schedule" else "your own action"
            self.message = f"Back undid {whose}: {last[0].caption or last[0].op}"
        else:
            self.message = ""
        self.render()

    def reset(self) -> None:
        """Back to step 0, without your own actions or Prompt text, on the same pool size; a short
        message (≤ 2 caption lines; on a resized pool it says whose pool the captions are about)."""
        self.play.playing = False  # ▶ stops: a Reset while it plays would step on from 0
        self.message, self._switched = "Reset: step 0, same pool size" + self._geometry_note(" · "), False
        self.prompt.value = PROMPT_TEXT
        self.run.reset()
        self.palette.restart(self.run.steps)
        self.render()

    def goto(self, step: int) -> None:
        """Jump to just after scenario step `step` (your actions before it are kept)."""
        self.message = ""
        self.run.goto(step)
        self.render()

    def decode_all(self) -> None:
        """Your own action, `ScenarioRun.decode_all` (or a message saying why it has nothing to do)."""
        self.message = "" if self.run.can_decode_all else f"no {self.yours()} to decode: add a request"
        if not self.message:
            self.run.decode_all()
        self.render()

    def add_request(self) -> None:
        """Admit the prompt text as a new request, after the tokens of the picked sequence."""
        parent = self.prefix_picker.value or None  # "" is the "(none)" entry
        new = self._pick = self.run.new_id("yours")  # Fork and Finish keep what Sequence shows
        self._apply(
            lambda: Action("add", new, parent=parent, text=self.prompt.value, caption="a request you added")
        )

    def fork(self) -> None:
        """Fork the picked sequence: the child shares all of its pages."""
        parent = self.seq_picker.value
        if parent is None:
            self.message = f"no {self.yours()} to fork"
            return self.render()
        self._apply(
            lambda: Action(
                "fork", self.run.new_id(f"{parent}.f"), parent=parent, caption=f"you forked {parent}"
            )
        )

    def finish(self) -> None:
        """Free the picked sequence."""
        seq_id = self.seq_picker.value
        if seq_id is None:
            self.message = f"no {self.yours()} to finish"
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

    def load(self, scenario: str, num_pages: int | None = None, page_size: int | None = None) -> None:
        """Start another scenario (or the same one on another pool geometry) at step 0."""
        switched = scenario != self.run.scenario.name  # the caption says the new one starts at 0
        self.run = ScenarioRun(scenario, num_pages, page_size, self.model)
        self.palette.restart(self.run.steps)
        self.message = ""
        self._switched = switched
        self._sync_controls()
        self.render()

    def resize(self, num_pages: int, page_size: int) -> None:
        """Rebuild the pool with another geometry and replay everything done so far on it: the
        same scenario steps (fewer if the new run ends sooner, as the message says) and your own
        actions (an action the new pool cannot carry out is refused and the log says why)."""
        old = self.run
        self.run = old.rebuilt(num_pages, page_size)
        self.palette.restart(self.run.steps)
        refused = sum(1 for r in self.run.records if r.own and r.refused)
        self.message = (
            f"rebuilt on {num_pages} pages × {page_size} slots and replayed step "
            f"{self.run.cursor} of {len(self.run.steps)}"
            + (f" (your step {old.cursor} is past this run's end)" if old.cursor > self.run.cursor else "")
            + (f" and your {count(old.own_actions, 'action')}" if old.own_actions else "")
            + (f"; {refused} of them refused on this pool (see the log)" if refused else "")
        )
        self._sync_controls()
        self.render()

    def _on_jump(self, change: dict) -> None:
        if not self._syncing and change["new"] != self.run.cursor:
            self.goto(change["new"])

    def _on_speed(self, change: dict) -> None:
        self.play.interval = change["new"]

    def _on_scenario(self, change: dict) -> None:
        if self._syncing:
            return
        if change["new"] == self.run.scenario.name:  # the scenario shown: nothing to switch
            return self._confirm_switch(False)  # (a question asked before goes)
        if self.run.own_actions:  # ask only for your own actions: scenario steps replay with Step
            self._pending_scenario, n = change["new"], own_done(self.run)  # as the header counts
            title, what = html.escape(SCENARIOS[change["new"]].title), count(n, "action")
            what = f"your {what if n else 'refused tries'} (a scenario's steps replay with Step)"
            self.confirm_text.value = f"<b>Switch to “{title}”?</b> You would lose {what}.&nbsp;"
            self._sync_controls()  # the picker shows the scenario still running until the answer
            self.confirm.layout.display, self.stepping_row.layout.display = "flex", "none"
            return
        self.load(change["new"])

    def _confirm_switch(self, discard: bool) -> None:
        name, self._pending_scenario = self._pending_scenario, None
        self.confirm.layout.display, self.stepping_row.layout.display = "none", ""
        if discard and name is not None:
            self.load(name)
        else:
            self._sync_controls()  # the picker goes back to the scenario being played

    def _on_geometry(self, change: dict) -> None:
        if not self._syncing:  # busy (`debounced`): the sliders are disabled until the pool is rebuilt
            self.resize(self.pages_slider.value, self.page_size_slider.value)

    # ---- rendering ----------------------------------------------------------------------------

    def render(self) -> None:
        """Redraw what is on screen from the pool's snapshot and the run's records: the main
        heatmap, the log, the header, the block tables and the open tab's picture. The other
        tabs' pictures are drawn when their tab is opened (`open_tab`), to the same bytes."""
        run, snap = self.run, self.run.snapshots[-1]
        pool_map = self._maps()[0]
        pool_map.update(snap)
        self.heatmap.value = pool_map.png()
        self._stale = set(PICTURE_TABS)
        self._draw_tab(self.view_picker.value)
        tokens = token_ids_of(run.seqs)  # each sequence's text, boxed by page under the tables
        self.block_tables.value = block_table_html(snap, self.palette, run.events, token_ids=tokens)
        self.panes["Block tables"].children[1].layout.display = "" if scrolls(snap, tokens) else "none"
        self.status.value = status_html(run, snap)  # the message is in the caption, under Step
        sched = run.scheduler is not None  # the log then names each step's role, as the header
        roles = run.steps if sched else ()
        self.event_log.value = log_html(run.records, LOG_STEPS, MAIN_HEIGHT_PX, sched, run.page_size, roles)
        self.step_counter.value = counter_html(run)  # step k of N · your actions: n · +m past the end
        self.actions_note.value = text.actions_note(run)  # an Add request refused: why, in red
        said = html.escape(self._caption())
        if self.message:  # also under the buttons: the status line sits in the Block tables tab
            said += f" · <span style='color:#B91C1C'>{html.escape(self.message)}</span>"
        self.caption.value = f"<div style='{CAPTION_STYLE}'>{said}</div>"
        live: list[tuple[str, Hashable]] = [(str(s), s) for s in snap.seq_ids]
        own = [(t, s) for t, s in live if s in run.own_sequences]  # never a request the scheduler runs
        pick, self._pick = self._pick, None
        self.sync_stepping(run.cursor, len(run.steps), live, own, pick)
        self.step_button.disabled = self.play.disabled = run.done  # a scenario ends at its last step
        self.fork_button.disabled = self.finish_button.disabled = not own
        self.back_button.disabled, self.decode_button.disabled = not run.history, not run.can_decode_all

    def _maps(self) -> tuple[PoolHeatmap, ...]:
        """The heatmaps of the current geometry: main views, more views, LRU order."""
        key = (self.run.num_pages, self.run.page_size)
        if key not in self._heatmaps:
            # No clock in the titles: the header's step counter is the one counter shown. The LRU
            # order names each ACTIVE (blue) page's holder, as the predictions' LRU pictures do.
            lru = PoolHeatmap(*key, views=("lru",), palette=self.palette, dpi=HEATMAP_DPI)
            lru.active_owners = True
            more = PoolHeatmap(*key, MORE_VIEWS, self.palette, HEATMAP_DPI, COMPACT_WIDTH, show_clock=False)
            self._heatmaps[key] = (main_heatmap(*key, self.palette), more, lru)
        return self._heatmaps[key]

    def open_tab(self, title: str) -> None:
        """Open a tab by its title (as a click on it does); its picture is drawn now."""
        if title not in VIEWS:
            raise ValueError(f"title must be one of {list(VIEWS)}, got {title!r}")
        self.view_picker.value = title  # shows and draws it (`_on_tab`)
        self._draw_tab(title)

    def _on_tab(self, change: dict) -> None:
        self.show_view(change["new"])
        self._draw_tab(change["new"])

    def _draw_tab(self, title: str | None) -> None:
        """Draw the picture of tab `title` if it is out of date (nothing for the other tabs)."""
        if title not in self._stale:
            return
        self._stale.discard(title)
        run, snap = self.run, self.run.snapshots[-1]
        _, more_map, lru_map = self._maps()
        if title == "More views":
            more_map.update(snap)
            self.more_views.value = more_map.png()
        elif title == "LRU order":
            lru_map.update(snap, run.events)
            self.lru.value = lru_map.png()
        else:  # "Page life": the transitions of the last step, highlighted
            taken = step_transitions(run.snapshots[-2], snap, run.records[-1].events) if run.records else []
            if taken != self._taken or not self.lifecycle.value:
                self._taken = taken
                self.lifecycle.value = lifecycle_png(taken)

    def _caption(self) -> str:
        run = self.run
        if not run.records:  # after a switch: say the new scenario starts at step 0
            return "new scenario, at step 0: " * self._switched + run.scenario.summary
        last = run.records[-1]
        scheduled = last.action.op == "schedule" and last.note  # say what the step did, not the rule
        said = last.action.caption or last.action.op  # a scheduler step adds "scheduler: ..."
        said = (f"{said} — " * last.own + last.note) if scheduled else said
        if last.note.startswith(("refused", "nothing to")):  # the picture shows no change: say why
            tried = said.split(":")[0]  # a caption's head says what was tried, its tail what it does
            said = last.note if last.note.startswith("nothing to") else f"{tried} — {last.note}"
            said = last.note if len(said) > CAPTION_CHARS else said  # ≤ 2 lines: the log says what
        elif run.done and (not last.own or last.action.op == "schedule" or run.unfinished_requests):
            said += " — " + end_message(run)
        return f"{'your action: ' if last.yours else ''}{said}{self._geometry_note(' · ')}"

    def _geometry_note(self, before: str = "") -> str:
        """On a pool resized with the sliders: the captions tell the scenario's own pool's story."""
        own, run = self.run.scenario, self.run
        if (run.num_pages, run.page_size) == (own.num_pages, own.page_size):
            return ""
        return f"{before}captions written for the {own.num_pages} × {own.page_size} pool"

    def __repr__(self) -> str:
        return f"Dashboard({self.run!r})"
