"""A notebook open in JupyterLab, driven the way a person drives it: menus, buttons, the status bar.

Waiting rules learned the hard way: the kernel is ready when the status bar reads
"(ipykernel) | Idle" (the toolbar indicator reads idle before the kernel is connected, and
"Run All" then silently runs nothing); a widget callback has finished when, after its first
visible effect, the status bar is back to Idle (the kernel sends every comm update before its
idle status); an ipywidgets Image shows a new picture by swapping its blob `src`, so pictures
are compared by the PNG bytes behind the blob, never by URL.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # playwright is imported only once the browser tests run (it may be missing)
    from playwright.sync_api import Locator, Page

IDLE_TIMEOUT_MS = 120_000
RUN_ALL_TIMEOUT_MS = 600_000
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# An error output renders with the stderr MIME type like a warning does; its text tells them
# apart: the traceback header, a syntax error's "Cell In[n], line k", or a line "XxxError: ...".
_TRACEBACK = re.compile(
    r"Traceback \(most recent call last\)|^\s*Cell In\[\d+\], line \d+|^\s*\w*(Error|Exception)\b:",
    re.MULTILINE,
)

# The notebook open in the page: the one visible notebook panel (hidden tabs stay in the DOM).
NOTEBOOK = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook"

# A cell whose source is hidden (JupyterLab's collapsed input, e.g. 06's check cells) shows
# an empty prompt whatever its state: it is left out.
_PROMPTS_JS = f"""() => [...document.querySelectorAll('{NOTEBOOK} .jp-CodeCell .jp-InputPrompt')]
    .map(p => p.textContent.trim()).filter(t => t !== '')"""

_STATUS_JS = """() => (document.querySelector('#jp-main-statusbar') || {}).textContent || ''"""

_IDLE_OR_DIALOG_JS = """() => {
  const bar = document.querySelector('#jp-main-statusbar');
  const idle = bar !== null && bar.textContent.includes('(ipykernel)')
      && bar.textContent.includes('Idle');
  return idle || document.querySelector('.jp-Dialog') !== null;
}"""

# The PNG bytes behind an <img>'s blob: URL, as base64.
_IMG_BYTES_JS = """async img => {
  const blob = await (await fetch(img.src)).blob();
  return await new Promise(done => {
    const reader = new FileReader();
    reader.onload = () => done(reader.result.split(',')[1]);
    reader.readAsDataURL(blob);
  });
}"""


class NotebookPage:
    """One notebook open in its own browser page."""

    def __init__(self, page: Page, url: str) -> None:
        self.page = page
        self.url = url

    # -- opening and running -------------------------------------------------------------
    def open(self) -> NotebookPage:
        """Load the page and wait for the kernel; a dialog instead (e.g. "Select Kernel" for a
        kernel name this environment lacks) fails with the dialog's text."""
        self.page.goto(self.url)
        self.page.locator(f"{NOTEBOOK} .jp-Cell").first.wait_for(timeout=IDLE_TIMEOUT_MS)
        self.page.wait_for_function(_IDLE_OR_DIALOG_JS, timeout=IDLE_TIMEOUT_MS, polling=250)
        dialog = self.page.locator(".jp-Dialog")
        if dialog.count():
            raise AssertionError(f"JupyterLab opened a dialog: {dialog.first.inner_text()!r}")
        panels = self.page.locator(".jp-NotebookPanel").count()
        assert panels == 1, f"{panels} notebooks open; the page should restore no workspace"
        self.wait_idle()
        return self

    def status_bar(self) -> Locator:
        return self.page.locator("#jp-main-statusbar")

    def wait_idle(self, timeout_ms: int = IDLE_TIMEOUT_MS) -> None:
        """Until the status bar shows the ipykernel kernel as Idle."""
        self.status_bar().filter(has_text="(ipykernel)").filter(has_text="Idle").wait_for(timeout=timeout_ms)

    def menu(self, menu: str, item: str) -> None:
        """Click a menu-bar menu, then one of its items (exact labels)."""
        exact = re.compile(f"^{re.escape(menu)}$")
        self.page.locator(".lm-MenuBar-itemLabel", has_text=exact).click()
        # By the label element: a menu item's accessible name also holds its shortcut.
        exact = re.compile(f"^{re.escape(item)}$")
        self.page.locator(".lm-Menu-itemLabel", has_text=exact).click()

    def run_all(self, timeout_ms: int = RUN_ALL_TIMEOUT_MS) -> None:
        """Edit > Clear Outputs of All Cells, then Run > Run All Cells, until the run is over.

        Clearing first makes every prompt "[ ]:", so numbers seen afterwards come from this
        run and not from the outputs committed with the notebook. The run is over when no
        prompt shows "*" (queued or running) and the kernel is Idle, twice a second apart.
        """
        self.menu("Edit", "Clear Outputs of All Cells")
        self._poll(lambda p, _: all(x == "[ ]:" for x in p), 30_000, "clearing the outputs")
        self.menu("Run", "Run All Cells")
        self._poll(lambda p, _: any(x != "[ ]:" for x in p), 60_000, "Run All to start")

        def done(prompts: list[str], status: str) -> bool:
            return "*" not in "".join(prompts) and "Idle" in status

        while True:
            self._poll(done, timeout_ms, "Run All to finish")
            self.page.wait_for_timeout(1000)
            if done(self.prompts(), self._status()):
                return

    def _status(self) -> str:
        return self.page.evaluate(_STATUS_JS)

    def _poll(self, condition, timeout_ms: int, what: str) -> None:
        """Poll condition(prompts, status bar text) every 250 ms; fail with what the page shows."""
        for _ in range(max(1, timeout_ms // 250)):
            prompts = self.prompts()
            if prompts and condition(prompts, self._status()):
                return
            self.page.wait_for_timeout(250)
        raise AssertionError(
            f"waited {timeout_ms / 1000:.0f} s for {what}: prompts {prompts}, status bar {self._status()!r}"
        )

    def save(self) -> None:
        """File > Save Notebook; returns once the tab no longer shows unsaved changes."""
        self.menu("File", "Save Notebook")
        self.page.locator(".lm-TabBar-tab.jp-mod-current:not(.jp-mod-dirty)").wait_for(
            timeout=IDLE_TIMEOUT_MS
        )

    # -- what the page shows -------------------------------------------------------------
    def prompts(self) -> list[str]:
        """The input prompt of every code cell shown, e.g. "[3]:" ("[ ]:" if it never ran)."""
        return self.page.evaluate(_PROMPTS_JS)

    def error_outputs(self) -> list[str]:
        """Text of every output that shows a traceback or a widget that failed to display."""
        errors = []
        for output in self.page.locator(f"{NOTEBOOK} .jp-OutputArea-output").all():
            text = output.text_content() or ""
            mime = output.get_attribute("data-mime-type")
            if mime == "application/vnd.jupyter.stderr" and _TRACEBACK.search(text):
                errors.append(text)
            elif "Error displaying widget" in text:
                errors.append(text)
        return errors

    # -- widgets ---------------------------------------------------------------------------
    def image_bytes(self, locator: Locator) -> bytes:
        """The picture an ipywidgets Image shows (the PNG bytes behind its blob URL)."""
        data = base64.b64decode(locator.evaluate(_IMG_BYTES_JS))
        assert data.startswith(PNG_SIGNATURE), f"{locator} does not show a PNG"
        return data

    def wait_image_equal(self, locator: Locator, expected: bytes, timeout_ms: int = 30_000) -> None:
        """Poll until the picture is exactly `expected` (same PNG bytes)."""
        for _ in range(max(1, timeout_ms // 200)):
            if self.image_bytes(locator) == expected:
                return
            self.page.wait_for_timeout(200)
        raise AssertionError(f"picture of {locator} never returned to the expected bytes")

    def screenshot_cell(self, inner: Locator, path: Path) -> Path:
        """Screenshot of the notebook cell that contains `inner`, whole.

        The cell, not the page, and with the window made tall enough for all of it: JupyterLab
        scrolls inside its notebook panel, which would clip a cell taller than the window.
        """
        return self.screenshot_whole(self.page.locator(f"{NOTEBOOK} .jp-Cell").filter(has=inner), path)

    def screenshot_whole(self, element: Locator, path: Path) -> Path:
        """Screenshot of `element`, the window made tall enough for all of it (same width)."""
        viewport = self.page.viewport_size
        height = element.bounding_box()["height"]
        self.page.set_viewport_size(
            {"width": viewport["width"], "height": max(viewport["height"], int(height) + 300)}
        )
        try:
            element.scroll_into_view_if_needed()
            path.parent.mkdir(parents=True, exist_ok=True)
            element.screenshot(path=str(path))
        finally:
            self.page.set_viewport_size(viewport)
        return path
