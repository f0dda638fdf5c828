"""The pool dashboard of 00_start_here.ipynb, clicked like a learner clicks it, in real JupyterLab.

Written against the DOM contract of `pagedkv.viz.Dashboard` (CSS classes `pagedkv-step`,
`pagedkv-back`, `pagedkv-reset`, `pagedkv-play`, `pagedkv-scenario`, `pagedkv-step-counter`,
`pagedkv-heatmap`, `pagedkv-lru`, `pagedkv-event-log`): Step advances the counter, changes the
pool picture and logs allocations; Back brings back the previous picture byte for byte; the
eviction scenario, stepped to its end, logs evictions and changes the LRU picture. Pictures are
the PNG bytes the page shows, so "changed" and "restored" are exact.
"""

from __future__ import annotations

import re

import pytest

from .labpage import NotebookPage
from .labserver import NOTEBOOKS

pytestmark = pytest.mark.browser

START = "00_start_here.ipynb"
MAX_STEPS_TO_SEE_A_CHANGE = 12
MAX_STEPS_IN_A_SCENARIO = 400
END_WAIT_MS = 5_000  # after a Step click that changes nothing, how long until we call it the end
ALLOCATE = re.compile(r"\ballocate[sd]?\b", re.IGNORECASE)
EVICT = re.compile(r"\bevict(s|ed)?\b", re.IGNORECASE)  # not "eviction", a scenario title word
COUNTER = re.compile(r"\bstep (\d+)\b", re.IGNORECASE)


class Dashboard:
    """The one Dashboard on the page, addressed by its contract classes."""

    def __init__(self, nb: NotebookPage) -> None:
        self.nb = nb
        page = nb.page
        self.step_button = page.locator("button.pagedkv-step")
        self.back_button = page.locator("button.pagedkv-back")
        self.reset_button = page.locator("button.pagedkv-reset")
        self.play = page.locator(".pagedkv-play")
        self.scenario = page.locator(".pagedkv-scenario select")
        self.counter = page.locator(".pagedkv-step-counter")
        self.heatmap = page.locator("img.pagedkv-heatmap")
        self.lru = page.locator("img.pagedkv-lru")
        self.log = page.locator(".pagedkv-event-log")

    def step_number(self) -> int:
        text = self.counter.text_content() or ""
        match = COUNTER.search(text)
        assert match, f"step counter reads {text!r}, expected 'step N'"
        return int(match.group(1))

    def wait_step(self, n: int) -> None:
        """Until the counter reads step n, then the kernel Idle (pictures may land a moment
        later; `pictures()` waits for them)."""
        self.counter.filter(has_text=re.compile(rf"\bstep {n}\b", re.IGNORECASE)).wait_for(timeout=60_000)
        self.nb.wait_idle()

    def log_count(self, pattern: re.Pattern) -> int:
        return len(pattern.findall(self.log.text_content() or ""))

    def pictures(self) -> tuple[bytes, bytes]:
        """(heatmap, LRU) PNG bytes once two reads 300 ms apart agree (widget updates land
        asynchronously after the kernel reports idle; an <img> between two blob URLs shows
        no PNG for a moment, so such a read waits too)."""
        last = None
        for _ in range(50):
            try:
                now = (self.nb.image_bytes(self.heatmap), self.nb.image_bytes(self.lru))
            except AssertionError:  # not a PNG yet: the new picture is still landing
                now = None
            if now is not None and now == last:
                return now
            last = now
            self.nb.page.wait_for_timeout(300)
        raise AssertionError("dashboard pictures kept changing without clicks")

    def open_tab(self, title: str) -> None:
        """Click a tab of the dashboard, as a learner does, and wait for its picture."""
        self.nb.page.locator(".pagedkv-tabs button", has_text=title).click()
        self.nb.wait_idle()

    def wait_not_busy(self, timeout_ms: int = 60_000) -> None:
        """Until the dashboard no longer says "drawing…" (its buttons are pressable again)."""
        note = self.nb.page.locator(".pagedkv-busy-note")
        for _ in range(timeout_ms // 100):
            if not (note.text_content() or "").strip():
                return
            self.nb.page.wait_for_timeout(100)
        raise AssertionError("the dashboard stayed busy")

    def reset(self) -> None:
        self.reset_button.click()
        self.wait_step(0)  # the counter may read step 0 before the click is handled ...
        self.nb.wait_idle()
        self.wait_not_busy()  # ... so also wait until Reset's drawing is over


@pytest.fixture
def dashboard(open_notebook) -> Dashboard:
    assert (NOTEBOOKS / START).exists(), f"notebooks/{START} is missing"
    nb = open_notebook(START)
    nb.run_all()
    dash = Dashboard(nb)
    for name in (
        "step_button",
        "back_button",
        "reset_button",
        "play",
        "scenario",
        "counter",
        "heatmap",
        "lru",
        "log",
    ):
        assert getattr(dash, name).count() == 1, f"{START} should show one dashboard {name}"
    assert dash.step_button.text_content().strip() == "Step"
    assert dash.back_button.text_content().strip() == "Back"
    assert dash.reset_button.text_content().strip() == "Reset"
    dash.open_tab("LRU order")  # a hidden tab's picture is drawn when it is opened
    return dash


def test_step_back_and_eviction_scenario(dashboard, screenshot_dir):
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    dash = dashboard
    dash.reset()
    allocations = dash.log_count(ALLOCATE)
    history = [dash.pictures()]  # history[n] = pictures at step n
    src_at_start = dash.heatmap.get_attribute("src")

    # Step several times (at least 3), until the pool picture has just changed.
    for n in range(1, MAX_STEPS_TO_SEE_A_CHANGE + 1):
        dash.step_button.click()
        dash.wait_step(n)
        history.append(dash.pictures())
        if n >= 3 and history[n][0] != history[n - 1][0]:
            break
    else:
        pytest.fail(f"the heatmap did not change on step {MAX_STEPS_TO_SEE_A_CHANGE}")
    n = len(history) - 1
    assert dash.step_number() == n
    assert history[n][0] != history[0][0], "stepping never changed the heatmap"
    assert dash.heatmap.get_attribute("src") != src_at_start, "heatmap <img> src did not change"
    assert dash.log_count(ALLOCATE) > allocations, "no allocation in the event log after stepping"
    nb = dash.nb
    shot = nb.screenshot_cell(dash.step_button, screenshot_dir / "00_start_here_dashboard.png")
    assert shot.stat().st_size > 10_000

    # Back: the counter goes back one step and both pictures are exactly those of that step.
    dash.back_button.click()
    dash.wait_step(n - 1)
    nb.wait_image_equal(dash.heatmap, history[n - 1][0])
    nb.wait_image_equal(dash.lru, history[n - 1][1])

    # The eviction scenario, stepped to its end: evictions logged, LRU picture changed.
    options = [
        o for o in dash.scenario.locator("option").all_text_contents() if re.search("evict", o, re.IGNORECASE)
    ]
    assert len(options) == 1, f"one eviction scenario expected among the options: {options}"
    dash.scenario.select_option(label=options[0])
    nb.wait_idle()
    dash.reset()
    evictions = dash.log_count(EVICT)
    _, lru_start = dash.pictures()
    steps = 0
    while steps < MAX_STEPS_IN_A_SCENARIO:
        nb.wait_idle()
        dash.wait_not_busy()  # while a step is drawn, Step is off for a moment: not the end
        if not dash.step_button.is_enabled():  # the dashboard turns Step off at the end
            break
        try:
            dash.step_button.click(timeout=END_WAIT_MS)
            dash.counter.filter(has_text=re.compile(rf"\bstep {steps + 1}\b", re.IGNORECASE)).wait_for(
                timeout=END_WAIT_MS
            )
        except PlaywrightTimeoutError:  # Step went off, or changed nothing: the end
            break
        steps += 1
    nb.wait_idle()
    assert 0 < steps < MAX_STEPS_IN_A_SCENARIO, f"eviction scenario ran {steps} steps"
    assert dash.step_number() == steps
    _, lru_end = dash.pictures()
    assert dash.log_count(EVICT) > evictions, "no eviction in the log at the end of the scenario"
    assert lru_end != lru_start, "the LRU picture did not change over the eviction scenario"
    nb.screenshot_cell(dash.step_button, screenshot_dir / "00_start_here_eviction.png")


def test_quick_clicks_on_step_are_each_one_step(dashboard):
    """A learner clicking Step five times as fast as the mouse allows gets five steps: no
    click is lost while a step is drawn (a learner's 4 quick clicks once made 3 steps)."""
    dash = dashboard
    dash.reset()
    for _ in range(5):
        dash.step_button.click(force=True)  # as a person clicks: no wait for the button to be ready
    dash.wait_step(5)
    dash.nb.wait_idle()
    dash.wait_not_busy()
    assert dash.step_number() == 5


def test_play_then_stop_stays_at_the_step_reached(dashboard):
    """A learner uses ■ as pause: it must leave the dashboard at the step Play reached, not
    send it back to step 0 (ipywidgets' stop sets Play's value to its min)."""
    dash = dashboard
    dash.reset()
    dash.play.locator("button").first.click()  # ▶
    dash.counter.filter(has_text=re.compile(r"\bstep 3\b")).wait_for(timeout=60_000)
    dash.play.locator("button:has(.fa-stop)").click()  # ■
    dash.nb.wait_idle()
    dash.wait_not_busy()
    reached = dash.step_number()
    assert reached >= 3, f"■ sent the dashboard back to step {reached}"
    dash.nb.page.wait_for_timeout(2_000)  # two Play ticks at the normal speed: none comes
    dash.nb.wait_idle()
    assert dash.step_number() == reached, "Play went on after ■"


def test_the_view_tabs_still_switch_after_the_page_is_reloaded(dashboard):
    """A learner saves, reloads the page (the kernel and its widgets live on) and clicks the
    view tabs: each click shows that view. (An ipywidgets Tab restored after a reload kept
    the tab it had before the reload, whatever was clicked.)"""
    dash = dashboard
    nb, page = dash.nb, dash.nb.page
    page.locator(".pagedkv-tabs button", has_text="Pool size").click()
    nb.wait_idle()
    nb.save()
    page.reload()
    page.locator(".pagedkv-tabs").first.wait_for(state="attached", timeout=120_000)
    nb.wait_idle()
    for title, shown in (("LRU order", "img.pagedkv-lru"), ("Pool and log", "img.pagedkv-heatmap")):
        tab = page.locator(".pagedkv-tabs button", has_text=title)
        tab.scroll_into_view_if_needed()
        tab.click()
        page.locator(shown).first.wait_for(state="visible", timeout=30_000)
        assert "mod-active" in (tab.get_attribute("class") or ""), title
