"""Fixtures for the browser tests: the Debian Chromium, a real JupyterLab, notebooks open in it.

Chromium is the system's /usr/bin/chromium driven by the `playwright` package (never a
downloaded browser). Without it the browser tests are skipped with one reason line; when
CI=true they fail instead, because CI is where they must run.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .labpage import NotebookPage
from .labserver import ROOT, JupyterLabServer

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
SCREENSHOTS = ROOT / "build" / "screenshots"
LAB_LOG = ROOT / "build" / "browser" / "jupyterlab.log"
VIEWPORT = {"width": 1400, "height": 1000}


def _missing_requirement() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        return f"browser tests need Chromium at {CHROMIUM} (Debian: apt-get install -y chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "browser tests need the playwright package (pip install -e '.[test]')"
    return None


@pytest.fixture(scope="session")
def chromium() -> Path:
    """The Chromium binary; skip (or fail when CI=true) if it or playwright is missing."""
    reason = _missing_requirement()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true: {reason}", pytrace=False)
        pytest.skip(reason)
    return CHROMIUM


@pytest.fixture(scope="session")
def jupyterlab(chromium: Path) -> Iterator[JupyterLabServer]:
    """`make lab`'s JupyterLab on a temporary copy of notebooks/, shut down (kernels too) after."""
    with tempfile.TemporaryDirectory(prefix="pagedkv-lab-") as workdir:
        server = JupyterLabServer(Path(workdir), LAB_LOG)
        server.start()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture(scope="session")
def browser(chromium: Path):
    """One headless Chromium for the session."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chrome = playwright.chromium.launch(executable_path=str(chromium), headless=True, args=CHROMIUM_ARGS)
        try:
            yield chrome
        finally:
            chrome.close()


@pytest.fixture
def open_notebook(browser, jupyterlab: JupyterLabServer) -> Iterator[Callable[[str], NotebookPage]]:
    """open_notebook("00_start_here.ipynb") -> the notebook open in a fresh page, kernel idle.

    Afterwards the page closes and the notebook's kernel is shut down through the server API
    (closing a browser tab leaves kernels running).
    """
    context = browser.new_context(viewport=VIEWPORT)
    opened: list[str] = []

    def _open(name: str) -> NotebookPage:
        opened.append(name)
        return NotebookPage(context.new_page(), jupyterlab.url(name)).open()

    try:
        yield _open
    finally:
        context.close()
        for name in opened:
            jupyterlab.shutdown_kernels_of(name)


@pytest.fixture(scope="session")
def screenshot_dir() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
