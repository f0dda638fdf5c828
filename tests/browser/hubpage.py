"""A user of the class hub (classroom/hub.py) in Chromium: the hub's login page, JupyterLab's
Nbgrader menu and its Assignment List (Fetch, Submit, Fetch Feedback), the formgrader's
buttons, and the user's own Jupyter server API.

Every wait is bounded; a formgrader action has succeeded when its "Success" dialog opens
(nbgrader opens an "Error" dialog with the log otherwise, whose text the failure shows).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # playwright is imported only once the browser tests run (it may be missing)
    from playwright.sync_api import Browser, Locator, Page

LOGIN_TIMEOUT_MS = 180_000  # login, then the hub starts the user's server (~12 s on an idle machine)
ACTION_TIMEOUT_MS = 240_000  # one nbgrader action (autograde of one notebook is the longest)


class HubUser:
    """One person logged in to the hub in their own browser context (their own cookies)."""

    def __init__(self, browser: Browser, hub_url: str, name: str, viewport: dict) -> None:
        self.name = name
        self.hub_url = hub_url
        self.server = f"{hub_url}/user/{name}"
        self.context = browser.new_context(viewport=viewport)
        self.page: Page = self.context.new_page()

    def close(self) -> None:
        self.context.close()

    # -- the hub and JupyterLab ------------------------------------------------------------
    def log_in(self, password: str) -> None:
        """Fill and send the hub's login form (the hub then starts the user's server)."""
        page = self.page
        page.goto(f"{self.hub_url}/hub/login")
        page.fill("#username_input", self.name)
        page.fill("#password_input", password)
        page.click("#login_submit")

    def wait_lab(self) -> None:
        """Until the user's JupyterLab shows its Nbgrader menu (or the login page an error)."""
        page = self.page
        lab_or_error = page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Nbgrader$")).or_(
            page.locator("#login-main .alert, .login_error")
        )
        lab_or_error.first.wait_for(timeout=LOGIN_TIMEOUT_MS)
        assert f"/user/{self.name}/lab" in page.url, f"{self.name} did not reach JupyterLab: {page.url}"

    def menu(self, menu: str, item: str) -> None:
        """Click a menu-bar menu, then one of its items (exact labels)."""
        self.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{re.escape(menu)}$")).click()
        self.page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$")).click()

    # -- nbgrader's Assignment List (students) ---------------------------------------------
    def assignment_list(self) -> Locator:
        """Open Nbgrader > Assignment List (or bring it forward); the panel, once loaded."""
        self.menu("Nbgrader", "Assignment List")
        panel = self.page.locator("#assignments").last
        panel.wait_for(timeout=ACTION_TIMEOUT_MS)
        return panel

    def refresh_assignments(self) -> Locator:
        panel = self.page.locator("#assignments").last
        panel.locator("#refresh_assignments_list").click()
        return panel

    def click_in_list(self, section: str, assignment: str, button: str) -> None:
        """Click `button` in the row of `assignment` in one section of the Assignment List
        ("released", "fetched" or "submitted")."""
        row = self.page.locator(f"#{section}_assignments_list .list_item:not(.nested_list_item)").filter(
            has_text=assignment
        )
        row.get_by_role("button", name=button, exact=True).first.click(timeout=ACTION_TIMEOUT_MS)

    def _rows(self, section: str) -> Locator:
        """The assignments' rows of one section (not the nested rows of their notebooks)."""
        return self.page.locator(f"#{section}_assignments_list .list_item:not(.nested_list_item)")

    def wait_in_list(self, section: str, text: str | re.Pattern) -> Locator:
        """Until a row of that section shows `text`; the row."""
        row = self.page.locator(f"#{section}_assignments_list .list_item:not(.nested_list_item)").filter(
            has_text=text
        )
        row.first.wait_for(timeout=ACTION_TIMEOUT_MS)
        return row.first

    # -- the formgrader (the instructor) ---------------------------------------------------
    def formgrader(self, view: str) -> None:
        """Open one of the formgrader's pages, e.g. "manage_assignments", once its table loaded."""
        self.page.goto(f"{self.server}/formgrader/{view}")
        self.page.locator("table tbody tr td").filter(has_text=re.compile(r"\S")).first.wait_for(
            timeout=ACTION_TIMEOUT_MS
        )
        self.page.get_by_text("Loading, please wait...").wait_for(state="hidden", timeout=ACTION_TIMEOUT_MS)

    def formgrader_action(self, row_text: str, column: str) -> str:
        """Click the button of `column` (e.g. "release", "collect", "autograde") in the row that
        shows `row_text`; wait for nbgrader's Success dialog, close it; the dialog's text."""
        row = self.page.locator("table tbody tr").filter(has_text=row_text).first
        row.locator(f"td.{column} a").click(timeout=ACTION_TIMEOUT_MS)
        dialog = self.page.locator("#success-modal, #error-modal").first
        dialog.wait_for(timeout=ACTION_TIMEOUT_MS)
        text = dialog.inner_text()
        assert dialog.get_attribute("id") == "success-modal", f"formgrader {column} of {row_text}: {text}"
        dialog.locator(".modal-footer button").click()
        dialog.wait_for(state="detached", timeout=30_000)
        return text

    # -- the user's own Jupyter server -----------------------------------------------------
    def api(self, method: str, path: str, body: Any = None) -> Any:
        """One call to the user's Jupyter server with this browser's login (cookie + XSRF)."""
        xsrf = next((c["value"] for c in self.context.cookies(self.server + "/") if c["name"] == "_xsrf"), "")
        response = self.page.request.fetch(
            f"{self.server}/api/{path}",
            method=method,
            headers={"X-XSRFToken": xsrf, "Content-Type": "application/json"},
            data=json.dumps(body) if body is not None else None,
            timeout=60_000,
        )
        assert response.ok, f"{method} {path}: {response.status} {response.text()[:500]}"
        return response.json() if response.body() else None

    def screenshot(self, path: Path, element: Locator | None = None) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        (element or self.page).screenshot(path=str(path))
        return path


def resident_mb(pids: list[int]) -> float:
    """The resident memory of these processes together, in MB (Linux /proc)."""
    total = 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
        total += int(match.group(1)) if match else 0
    return total / 1024


class Steps:
    """Wall-clock seconds of each named step of the round trip, for the report."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.times: list[tuple[str, float]] = []
        self.notes: list[str] = []
        self._last = self.started

    def done(self, name: str) -> None:
        now = time.monotonic()
        self.times.append((name, now - self._last))
        self._last = now

    def note(self, text: str) -> None:
        self.notes.append(text)

    def report(self) -> str:
        lines = [f"{seconds:6.1f} s  {name}" for name, seconds in self.times]
        lines += [f"          {text}" for text in self.notes]
        lines.append(f"{time.monotonic() - self.started:6.1f} s  in all")
        return "\n".join(lines)
