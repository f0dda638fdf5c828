"""Projector size, measured in real JupyterLab on a 1280x720 window, and the screenshots of
the walkthrough: the lifecycle diagram, a predict-then-step interaction, the dashboard at
its last step and a heatmap.

How a text size is measured: the browser gives the picture's shown width and its natural
(PNG) width; the PNG's pHYs chunk gives the dpi it was rendered at; the package draws no
text smaller than `MIN_PT` points at that dpi (tests/test_viz.py measures that on the
figures themselves). So the smallest text shows at
`MIN_PT * dpi / 72 * shown / natural` CSS pixels, `* 0.75` points, which must be >= 12 pt;
and the picture must fill the output area (>= 90 % of its width).
"""

from __future__ import annotations

import io
import re

import pytest

from pagedkv.viz.frame import FONT_PT
from pagedkv.viz.projector import MIN_PT

from .labpage import NOTEBOOK, NotebookPage

pytestmark = pytest.mark.browser

PROJECTOR = {"width": 1280, "height": 720}
MIN_SHOWN_PT = 12.0
MIN_DASHBOARD_PX = 14.0  # the compact dashboard's main picture, beside the event log
# ... and its share of a 1280x720 window: it is the dashboard's main picture, not a strip.
MIN_PICTURE_WIDTH, MIN_PICTURE_HEIGHT = 0.4, 0.45  # 330 px: the dashboard fits JupyterLab's view
MIN_FILL = 0.9
# (notebook, text of the cell whose first picture is measured, screenshot file or None); a
# picture in a closed Result box is a widget the saved notebook does not draw: not listed
PICTURES = [
    (
        "00_start_here.ipynb",
        'plot_pool(story.seqs.snapshot(), ("state", "owner"))',
        "heatmap_projector_1280.png",
    ),
    ("01_pages_and_block_tables.ipynb", "plot_refusal(before, after, caught, writer)", None),
    ("02_paged_attention.ipynb", "table, chunk=3, page_size=pool.page_size, num_tokens=n,", None),
    ("03_prefix_caching_and_lru.ipynb", 'views=("owner", "ref_count"), columns=1)', None),
    ("04_copy_on_write.ipynb", 'plot_pool(snap, views=("owner", "ref_count"))', None),
    ("06_benchmarks.ipynb", "projector(attention.figure(report), min_pt=16", "06_attention_figure.png"),
    # the cell's first line: a wrapped editor out of view draws only its first lines
    ("06_benchmarks.ipynb", "report = scale.run(quick=True)", "06_scale_figure.png"),
    ("08_common_mistakes.ipynb", 'plot_available({"naive (leaks)"', None),
]

_MEASURE_JS = """img => {
  const area = img.closest('.jp-OutputArea-output') || img.parentElement;
  return {shown: img.getBoundingClientRect().width, natural: img.naturalWidth,
          area: area.getBoundingClientRect().width};
}"""


@pytest.fixture
def projector_notebook(browser, jupyterlab):
    """open(name) -> a notebook in a 1280x720 page, with the left sidebar closed (as a
    teacher projects it)."""
    context = browser.new_context(viewport=PROJECTOR)
    opened = []

    def _open(name: str) -> NotebookPage:
        opened.append(name)
        nb = NotebookPage(context.new_page(), jupyterlab.url(name)).open()
        current = nb.page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")
        if current.count():
            current.first.click()  # clicking the open side panel's tab collapses it
        nb.page.wait_for_timeout(500)
        return nb

    try:
        yield _open
    finally:
        context.close()
        for name in opened:
            jupyterlab.shutdown_kernels_of(name)


def _cell_of(nb: NotebookPage, text: str):
    return nb.page.locator(f"{NOTEBOOK} .jp-CodeCell").filter(has_text=text).first


def _dpi(png: bytes) -> float:
    from PIL import Image

    dpi = Image.open(io.BytesIO(png)).info.get("dpi")
    assert dpi, "the PNG carries no dpi (pHYs chunk)"
    return float(dpi[0])


def measure(nb: NotebookPage, img, min_pt: float) -> dict[str, float]:
    """Shown width, fill of the output area and the smallest text in points as shown."""
    img.scroll_into_view_if_needed()
    box = img.evaluate(_MEASURE_JS)
    dpi = _dpi(nb.image_bytes(img))
    shown_pt = min_pt * dpi / 72 * box["shown"] / box["natural"] * 0.75
    return {**box, "dpi": dpi, "fill": box["shown"] / box["area"], "shown_pt": shown_pt}


@pytest.mark.parametrize(("name", "text", "shot"), PICTURES, ids=[f"{n}:{t[:24]}" for n, t, _ in PICTURES])
def test_each_picture_fills_the_cell_and_reads_at_12_pt(projector_notebook, name, text, shot, screenshot_dir):
    nb = projector_notebook(name)
    cell = _cell_of(nb, text)
    img = cell.locator(".jp-OutputArea-output img").first
    img.wait_for(timeout=30_000)
    m = measure(nb, img, MIN_PT)
    assert m["fill"] >= MIN_FILL, f"{name}: picture {m['shown']:.0f} px of {m['area']:.0f}: {m}"
    assert m["shown_pt"] >= MIN_SHOWN_PT, f"{name}: smallest text {m['shown_pt']:.1f} pt: {m}"
    if shot:
        nb.screenshot_whole(cell, screenshot_dir / shot)


def test_walkthrough_at_projector_size(projector_notebook, screenshot_dir):
    nb = projector_notebook("00_start_here.ipynb")
    nb.run_all()
    assert nb.error_outputs() == []
    page = nb.page

    diagram = _cell_of(nb, "plot_lifecycle()")
    diagram.locator("img").first.wait_for(timeout=30_000)
    nb.screenshot_whole(diagram, screenshot_dir / "lifecycle_diagram.png")

    predict = page.locator(".pagedkv-predict").first
    predict.scroll_into_view_if_needed()
    predict.locator(".pagedkv-predict-choices button", has_text=re.compile(r"^5 pages$")).click()
    predict.locator("button.pagedkv-predict-step").click()
    predict.locator(".pagedkv-predict-result", has_text="Right").wait_for(timeout=30_000)
    nb.wait_idle()
    picture = predict.locator("img").last
    picture.wait_for(timeout=30_000)
    assert nb.image_bytes(picture)  # the pool after the step
    page.wait_for_timeout(500)
    nb.screenshot_whole(
        _cell_of(nb, "How many pages does request_A"), screenshot_dir / "predict_then_step.png"
    )

    counter = page.locator(".pagedkv-step-counter").first
    heatmap = page.locator("img.pagedkv-heatmap").first
    m = measure(nb, heatmap, FONT_PT)  # the compact dashboard: beside the log, text >= 14 px
    assert m["shown_pt"] / 0.75 >= MIN_DASHBOARD_PX, m
    dashboard_fits_the_screen(nb, screenshot_dir / "dashboard_compact_1280x720.png")
    assert re.search(r"step 0 of 59", counter.text_content()), "the learner's dashboard moved"
    _jump_to(nb, 5)  # a few entries in the log, pages in use
    dashboard_fits_the_screen(nb, screenshot_dir / "dashboard_compact_1280x720_step5.png")
    header_stays_on_one_line_after_actions_of_yours(nb, screenshot_dir)
    no_horizontal_scrollbar_in_any_tab(nb)
    _jump_to(nb, 59)
    nb.wait_idle()
    assert "done" in counter.text_content()
    assert not page.locator("button.pagedkv-step").is_enabled()
    page.wait_for_timeout(1000)
    nb.screenshot_whole(_cell_of(nb, 'Dashboard("walkthrough")'), screenshot_dir / "dashboard_last_step.png")


def header_stays_on_one_line_after_actions_of_yours(nb: NotebookPage, screenshot_dir) -> None:
    """After a Fork and a Decode all the counter says so ("· your actions: 2") and stays one line
    beside the scenario picker, with the file browser closed (cell ~1100 px) and open (~850);
    two presses of Back then undo both, and the counter reads as before."""
    page = nb.page
    counter = page.locator(".pagedkv-step-counter").first
    for button in ("button.pagedkv-fork", "button.pagedkv-decode"):
        page.locator(button).first.click()
        nb.wait_idle()
    counter.filter(has_text="your actions: 2").wait_for(timeout=60_000)
    sidebar = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab").first
    for browser in ("closed", "open"):
        if browser == "open":
            sidebar.click()  # opens the file browser: a narrower cell
            page.wait_for_timeout(800)
        page.locator(".pagedkv-scenario").first.evaluate("el => el.scrollIntoView({block: 'start'})")
        box = counter.evaluate(_BOX_JS)
        picker = page.locator(".pagedkv-scenario").first.evaluate(_BOX_JS)
        step = page.locator("button.pagedkv-step").first.evaluate(_BOX_JS)
        font = "el => parseFloat(getComputedStyle(el).fontSize)"
        line = float(counter.locator("span").first.evaluate(font))
        page.screenshot(path=str(screenshot_dir / f"dashboard_header_yours_browser_{browser}.png"))
        assert box["height"] < 2 * 1.3 * line, (browser, box)  # one line of text, not two
        assert box["bottom"] <= step["top"] and box["top"] < picker["bottom"], (browser, box, picker)
    sidebar.click()  # closed again
    page.wait_for_timeout(800)
    for _ in range(2):
        page.locator("button.pagedkv-back").first.click()
        nb.wait_idle()
    counter.filter(has_text=re.compile(r"^\s*step 5 of 59\s*$")).wait_for(timeout=60_000)


# Boxes in the dashboard's output that scroll sideways: content wider than the box (a
# picture at width 100% plus the widgets' 2 px margins overflows by 4 px).
_SCROLLERS_JS = """() => [...document.querySelectorAll('.jp-OutputArea-output *')]
  .filter(el => el.clientWidth > 0
          && ['auto', 'scroll'].includes(getComputedStyle(el).overflowX)
          && el.scrollWidth > el.clientWidth)
  .map(el => [el.className.toString(), el.scrollWidth, el.clientWidth])"""


def no_horizontal_scrollbar_in_any_tab(nb: NotebookPage) -> None:
    """With the file browser open (the narrow cell), every tab of the dashboard fits its
    output area: no box scrolls sideways. Ends on the "Your actions" tab, browser closed."""
    page = nb.page
    sidebar = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab").first
    sidebar.click()
    page.wait_for_timeout(800)
    tabs = page.locator(".pagedkv-tabs button")
    for i in range(tabs.count()):
        tabs.nth(i).click()
        page.wait_for_timeout(500)
        assert page.evaluate(_SCROLLERS_JS) == [], tabs.nth(i).text_content()
    tabs.filter(has_text="Pool and log").first.click()
    sidebar.click()
    page.wait_for_timeout(800)


_BOX_JS = """el => { const r = el.getBoundingClientRect();
  return {top: r.top, bottom: r.bottom, width: r.width, height: r.height}; }"""


def _jump_to(nb: NotebookPage, step: int, of: int = 59):
    """Type `step` into the dashboard's "go to step" box and wait until it is drawn (its
    header reads "step `step` of `of`"); return the header."""
    page = nb.page
    page.locator(".pagedkv-step-box input").first.click()
    page.keyboard.press("Control+A")
    page.keyboard.type(str(step))
    page.keyboard.press("Enter")
    counter = page.locator(".pagedkv-step-counter").first
    counter.filter(has_text=re.compile(rf"step {step} of {of}")).wait_for(timeout=120_000)
    nb.wait_idle()
    page.wait_for_timeout(500)
    return counter


def dashboard_fits_the_screen(nb: NotebookPage, shot) -> None:
    """At 1280x720, with the dashboard scrolled to its top, the Step button, the event log's
    first lines, the main heatmap, the tab bar (the other views) and "Your actions" are all
    inside the window: no scrolling between them; and the heatmap takes a fair share of the
    window."""
    page = nb.page
    step = page.locator("button.pagedkv-step").first
    page.locator(".pagedkv-scenario").first.evaluate("el => el.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(500)
    height = page.viewport_size["height"]
    boxes = {
        name: element.evaluate(_BOX_JS)
        for name, element in (
            ("Step", step),
            ("heatmap", page.locator("img.pagedkv-heatmap").first),
            ("event log", page.locator(".pagedkv-event-log").first),
            ("tab bar", page.locator(".pagedkv-tabs button").first),
            ("your actions", page.locator(".pagedkv-actions").first),
        )
    }
    width = page.viewport_size["width"]
    assert 0 <= boxes["Step"]["top"] and boxes["Step"]["bottom"] <= height, boxes
    assert 0 <= boxes["heatmap"]["top"] and boxes["heatmap"]["bottom"] <= height, boxes
    assert 0 <= boxes["tab bar"]["top"] and boxes["tab bar"]["bottom"] <= height, boxes
    # the whole dashboard, picker to actions, is no taller than the notebook's visible area
    area = page.locator(".jp-NotebookPanel-notebook").first.evaluate(_BOX_JS)
    top = page.locator(".pagedkv-scenario").first.evaluate(_BOX_JS)["top"]
    assert boxes["your actions"]["bottom"] - top <= area["bottom"] - area["top"], (top, boxes, area)
    shown = boxes["heatmap"]
    assert shown["width"] >= MIN_PICTURE_WIDTH * width, f"main picture {shown} in {width}x{height}"
    assert shown["height"] >= MIN_PICTURE_HEIGHT * height, f"main picture {shown} in {width}x{height}"
    assert 0 <= boxes["event log"]["top"] and boxes["event log"]["top"] + 100 <= height, (
        boxes
    )  # its first lines
    page.screenshot(path=str(shot))
    every_view_shows_under_the_step_button(nb)


# Each view tab and the element that shows it (the Pool and log view is checked above).
VIEW_ELEMENTS = {
    "More views": "img.pagedkv-more-views",
    "LRU order": "img.pagedkv-lru",
    "Page life": "img.pagedkv-lifecycle",
    "Block tables": ".pagedkv-block-tables",
}


_FIT_JS = """el => { const r = el.getBoundingClientRect();
  return {fit: getComputedStyle(el).objectFit, box: r.width / r.height,
          natural: el.naturalWidth / el.naturalHeight}; }"""


def every_view_shows_under_the_step_button(nb: NotebookPage) -> None:
    """Each view tab opens its view in the main picture's place: with the dashboard scrolled
    to its top, the Step button and the whole view are inside the 1280x720 window together
    (the learner steps and watches the view without scrolling). Ends on "Pool and log"."""
    page = nb.page
    height = page.viewport_size["height"]
    actions_at = set()  # where "Your actions" starts, below the view: the same for every view
    for title, selector in VIEW_ELEMENTS.items():
        page.locator(".pagedkv-tabs button", has_text=title).first.click()
        nb.wait_idle()
        page.wait_for_timeout(500)
        page.locator(".pagedkv-scenario").first.evaluate("el => el.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(300)
        step = page.locator("button.pagedkv-step").first.evaluate(_BOX_JS)
        view = page.locator(selector).first.evaluate(_BOX_JS)
        assert view["height"] > 50, (title, view)  # drawn, not an empty box
        if selector.startswith("img"):  # a picture keeps its shape in its box (not stretched)
            fit = page.locator(selector).first.evaluate(_FIT_JS)
            assert fit["fit"] == "contain" or abs(fit["box"] / fit["natural"] - 1) < 0.02, (title, fit)
        assert 0 <= step["top"] and view["bottom"] <= height, (title, step, view)
        actions_at.add(round(page.locator(".pagedkv-actions").first.evaluate(_BOX_JS)["top"] - step["top"]))
    assert len(actions_at) == 1, actions_at  # switching views does not move the actions
    page.locator(".pagedkv-tabs button", has_text="Pool and log").first.click()
    nb.wait_idle()


@pytest.mark.parametrize("name", ["00_start_here.ipynb", "05_scheduling_and_preemption.ipynb"])
def test_the_dashboard_fits_with_the_file_browser_open(projector_notebook, screenshot_dir, name):
    """The layout a learner gets from `make lab`: the file browser open, the notebook column
    ~850 px wide. The dashboard's whole cell, its code line to "Your actions", fits in the
    notebook's visible area (a learner who scrolls the cell to the top sees all of it), every
    text in it is at least 12 px, and Jump's step box is a box. 05's dashboard has the
    scheduler's longer log key and a two-line caption."""
    nb = projector_notebook(name)
    page = nb.page
    page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab").first.click()  # the file browser
    page.wait_for_timeout(800)
    nb.run_all()
    picker = page.locator(".pagedkv-scenario").first
    cell = page.locator(".jp-Cell", has=picker).first
    cell.evaluate("el => el.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(500)
    area = page.locator(".jp-NotebookPanel-notebook").first.evaluate(_BOX_JS)
    top = cell.evaluate(_BOX_JS)["top"]
    bottom = page.locator(".pagedkv-actions").first.evaluate(_BOX_JS)["bottom"]
    page.screenshot(path=str(screenshot_dir / f"dashboard_file_browser_open_{name[:2]}.png"))
    assert area["width"] < 1000, area  # the file browser takes its room
    assert bottom - top <= area["height"], (top, bottom, area)
    smallest = page.locator(".pagedkv-actions").first.evaluate(_SMALLEST_TEXT_JS)
    assert smallest >= 12, smallest
    # each row of controls fits one line of an 850-px column's output area (850 less the prompt)
    rows = page.locator(".pagedkv-actions").first.evaluate(_ROW_WIDTHS_JS)
    stepping = page.locator("button.pagedkv-step").first.evaluate("el => el.parentElement.children.length")
    assert stepping == 6 and all(width <= 850 - 105 for width in rows), rows
    box = page.locator(".pagedkv-step-box input").first
    style = box.evaluate("el => [getComputedStyle(el).borderTopStyle, getComputedStyle(el).borderTopWidth]")
    assert style[0] != "none" and float(style[1].rstrip("px")) >= 1, style  # looks like an input


_SMALLEST_TEXT_JS = """el => {
  const dash = el.closest('.jp-OutputArea-output');
  const sizes = [...dash.querySelectorAll('*')]
    .filter(e => e.getClientRects().length
                 && [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim()))
    .map(e => parseFloat(getComputedStyle(e).fontSize));
  return Math.min(...sizes); }"""


# The widths a row's children need side by side (margins included; a child that grows into
# the room left counts its min-width): the stepping row, then the two rows of "Your actions".
_ROW_WIDTHS_JS = """el => {
  const need = row => [...row.children].reduce((sum, c) => { const s = getComputedStyle(c);
    const own = parseFloat(s.flexGrow) > 0 ? parseFloat(s.minWidth) || 0 : c.getBoundingClientRect().width;
    return sum + own + parseFloat(s.marginLeft) + parseFloat(s.marginRight); }, 0);
  const stepping = el.closest('.jp-OutputArea-output').querySelector('.pagedkv-step').parentElement;
  return [need(stepping), ...[...el.children].map(need)]; }"""


_TOKEN_ROW_JS = """el => {
  const box = el.closest('.pagedkv-block-tables').parentElement;   // the tab's scrolling box
  const row = el.querySelector(':scope > div');                     // the first sequence's row
  const label = row.querySelector('span span:last-child');          // its first page's label
  // inline boxes may reach below the row's own box: the row ends at the lower of the two
  return {box: box.getBoundingClientRect().bottom, scrolled: box.scrollTop,
          row: row.getBoundingClientRect().bottom, label: label.getBoundingClientRect().bottom}; }"""


def _dashboard_05_with_the_file_browser_open(projector_notebook):
    """05 run in full, the file browser open (as `make lab` starts), its dashboard on top."""
    nb = projector_notebook("05_scheduling_and_preemption.ipynb")
    nb.page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab").first.click()  # the file browser
    nb.page.wait_for_timeout(800)
    nb.run_all()
    nb.page.locator(".pagedkv-scenario").first.evaluate("el => el.scrollIntoView({block: 'start'})")
    return nb


def test_block_tables_tab_shows_a_whole_tokens_by_page_row(projector_notebook, screenshot_dir):
    """At 1280x720 with the file browser open, the Block tables tab of 05's dashboard at step
    20 (req2 and req3 running) shows its first tokens-by-page row whole, page labels included,
    without scrolling its box: a learner saw only a 40-px sliver of it, labels cut off."""
    nb = _dashboard_05_with_the_file_browser_open(projector_notebook)
    page = nb.page
    _jump_to(nb, 20, of=40)
    page.locator(".pagedkv-tabs button", has_text="Block tables").first.click()
    nb.wait_idle()
    page.wait_for_timeout(800)
    page.locator(".pagedkv-scenario").first.evaluate("el => el.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(300)
    page.screenshot(path=str(screenshot_dir / "dashboard_block_tables_05_step_20.png"))
    box = page.locator(".pagedkv-token-pages").first.evaluate(_TOKEN_ROW_JS)
    assert box["scrolled"] == 0 and max(box["label"], box["row"]) <= box["box"], box


_CLIPPED_JS = """el => { const r = el.getBoundingClientRect();
  const row = el.parentElement.getBoundingClientRect();
  return {right: r.right, row_right: row.right, scroll: el.scrollWidth, client: el.clientWidth,
          lines: Math.round(r.height / parseFloat(getComputedStyle(el.querySelector('span')).fontSize))}; }"""


def test_the_header_after_your_actions_at_the_last_step_wraps_instead_of_being_cut(
    projector_notebook, screenshot_dir
):
    """A learner at 1280 px read "... · +1 past the end · steps done, req3 ur", cut off at the
    right edge, after Add request, go to step 40, Finish and Decode all in 05's dashboard: the
    header now keeps all its text inside its row, its "steps done" part on a second line when
    the row is narrow (the file browser open, as `make lab` starts), and the scenario picker
    narrows at most to its minimum width."""
    nb = _dashboard_05_with_the_file_browser_open(projector_notebook)
    page = nb.page
    page.locator("button.pagedkv-add").first.click()
    nb.wait_idle()
    counter = _jump_to(nb, 40, of=40)
    for button in ("button.pagedkv-finish", "button.pagedkv-decode"):
        page.locator(button).first.click()
        nb.wait_idle()
    counter.filter(has_text="past the end").wait_for(timeout=60_000)
    page.wait_for_timeout(500)
    page.locator(".pagedkv-scenario").first.evaluate("el => el.scrollIntoView({block: 'start'})")
    page.screenshot(path=str(screenshot_dir / "dashboard_header_05_step_40_yours.png"))
    box = counter.evaluate(_CLIPPED_JS)
    assert "unfinished" in counter.text_content()
    assert box["scroll"] <= box["client"] + 1 and box["right"] <= box["row_right"] + 1, box
    picker = page.locator(".pagedkv-scenario").first.evaluate("el => el.getBoundingClientRect().width")
    assert picker >= 300 - 1, picker  # narrowed at most to its min-width, the title's start readable


def test_the_header_with_done_and_an_action_of_yours_stays_one_line(projector_notebook, screenshot_dir):
    """A learner forked beam.0 at the beam scenario's last step in 04's dashboard, the file
    browser open: "done" wrapped onto a second line and pushed the Fork row to the screen's
    bottom edge. The whole counter is one unbreakable line now; the scenario picker narrows
    instead, at most to its minimum width."""
    nb = projector_notebook("04_copy_on_write.ipynb")
    page = nb.page
    page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab").first.click()  # the file browser
    page.wait_for_timeout(800)
    nb.run_all()
    beam = "Beam search: forked beams share pages"
    page.locator(".pagedkv-scenario select").first.select_option(label=beam)
    nb.wait_idle()
    counter = _jump_to(nb, 9, of=9)
    page.locator("button.pagedkv-fork").first.click()
    nb.wait_idle()
    counter.filter(has_text="your actions: 1").wait_for(timeout=60_000)
    page.wait_for_timeout(500)
    page.locator(".pagedkv-scenario").first.evaluate("el => el.scrollIntoView({block: 'start'})")
    page.screenshot(path=str(screenshot_dir / "dashboard_header_04_done_yours.png"))
    assert "done" in counter.text_content()
    box = counter.evaluate(_BOX_JS)
    line = float(counter.locator("span").first.evaluate("el => parseFloat(getComputedStyle(el).fontSize)"))
    assert box["height"] < 2 * 1.3 * line, box  # one line of text, not two
    picker = page.locator(".pagedkv-scenario").first.evaluate("el => el.getBoundingClientRect().width")
    assert picker >= 300 - 1, picker


def test_long_code_lines_wrap_at_the_cell_width(projector_notebook, screenshot_dir):
    """classroom/lab_overrides.json wraps code lines (`make lab`, Binder and these tests read
    it): 11b's longest line, 172 characters, stays inside its cell at 1280 px, with no
    sideways scroll a back row would miss."""
    nb = projector_notebook("11b_beyond_deep_dive.ipynb")
    cell = _cell_of(nb, 'work = prefill_work("Mistral-7B", "A100-40GB", 1024)')
    cell.scroll_into_view_if_needed()
    editor = cell.locator(".jp-InputArea .cm-scroller").first
    width = editor.evaluate("e => ({scroll: e.scrollWidth, client: e.clientWidth})")
    assert width["scroll"] <= width["client"], f"the line runs past the cell: {width}"
    nb.screenshot_whole(cell, screenshot_dir / "code_line_wrapped_1280.png")
