"""A learner's review kit: one notebook in real JupyterLab in headless Chromium at 1280x720.

docs/reviewing.md is the brief a reviewer follows. Start a lab (the Makefile's `make lab`
arguments, on a private copy of notebooks/ and docs/) and leave it running:

    python tests/browser/review_kit.py WORKDIR      # writes WORKDIR/lab.json; stop: kill PID

then drive it from small scripts:

    import sys; sys.path.insert(0, "tests/browser"); import review_kit as kit
    with kit.session(WORKDIR, "07_production") as (page, lab):
        lab.run_all()                          # Edit > Clear outputs, Run > Run All, wait
        print(kit.cell_texts(page))            # every cell's visible text (inputs + outputs)
        kit.shot_cell(lab, 19, "x.png")        # screenshot of cell 19 (0-based), whole
        q = kit.cell(page, 19)                 # a Locator for cell 19
        q.get_by_text("turns them FREE", exact=False).first.click()   # pick an option
        q.locator(".pagedkv-quiz-check").first.click()                # press Check
        kit.open_boxes(page)                   # open every closed result / answer box

Each `session` opens a new browser; the kernel keeps its state on the server between sessions.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from playwright.sync_api import Locator, Page, sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent))

from labpage import NOTEBOOK, NotebookPage  # noqa: E402
from labserver import JupyterLabServer  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
CELLS = f"{NOTEBOOK} .jp-Cell"  # the open notebook's cells


def serve(workdir: Path) -> None:
    """Start the lab, write its address to WORKDIR/lab.json and keep it up until killed."""
    workdir.mkdir(parents=True, exist_ok=True)
    server = JupyterLabServer(workdir / "lab", workdir / "lab.log")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # `kill PID` stops the lab too
    server.start()
    info = {"base": server.base_url, "token": server.token, "notebook_url": server.url("NAME.ipynb")}
    (workdir / "lab.json").write_text(json.dumps(info))
    print("up", server.base_url, flush=True)
    try:
        while True:
            time.sleep(5)
    finally:
        server.stop()


@contextlib.contextmanager
def session(workdir: str | Path, name: str) -> Iterator[tuple[Page, NotebookPage]]:
    """Open notebook NAME (no .ipynb) of the lab in WORKDIR in a fresh headless Chromium."""
    info = json.loads((Path(workdir) / "lab.json").read_text())
    url = info["notebook_url"].replace("NAME", name)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        lab = NotebookPage(page, url).open()
        try:
            yield page, lab
        finally:
            with contextlib.suppress(Exception):
                lab.save()
            browser.close()


def cell(page: Page, i: int) -> Locator:
    return page.locator(CELLS).nth(i)


def cell_texts(page: Page) -> str:
    """Every cell's visible text, each scrolled into view first (JupyterLab draws lazily)."""
    cells = page.locator(CELLS)
    out = []
    for i in range(cells.count()):
        c = cells.nth(i)
        with contextlib.suppress(Exception):  # a hidden cell with no output has nothing to show
            c.scroll_into_view_if_needed(timeout=2000)
        time.sleep(0.05)
        out.append(f"===== cell {i} =====\n" + c.inner_text())
    return "\n".join(out)


def shot_cell(lab: NotebookPage, i: int, path: str | Path) -> Path:
    """Screenshot of cell `i`, whole (the window grown for a tall cell: `screenshot_whole`)."""
    return lab.screenshot_whole(cell(lab.page, i), Path(path))


def open_boxes(page: Page) -> None:
    """Open every closed box (results and answer notes); a locked one stays locked."""
    boxes = page.locator(f"{NOTEBOOK} .jupyter-widget-Collapse")
    for i in range(boxes.count()):
        contents = boxes.nth(i).locator(".jupyter-widget-Collapse-contents").first
        if "lm-mod-hidden" not in (contents.get_attribute("class") or ""):
            continue  # already open: a click would close it
        header = boxes.nth(i).locator(".jupyter-widget-Collapse-header").first
        header.scroll_into_view_if_needed()
        header.click()
        time.sleep(0.3)


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
