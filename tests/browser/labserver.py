"""A real JupyterLab server for the browser tests, started the way `make lab` starts it.

The arguments come from the Makefile's `LAB_ARGS` (so the tests open what a learner opens),
with the repository's root swapped for a temporary copy of its notebooks/ and docs/ (autosave
and checkpoints write into it; the notebooks' links into docs/ resolve as in the repository)
and the additions a headless test needs: `--no-browser`, a free 127.0.0.1 port, a random
token, fresh config / runtime / settings / workspace directories with the settings `make lab`
installs (classroom/lab_overrides.json). `stop()` asks the server to shut down through its
API, which also shuts down every kernel it started, then checks that no kernel connection
file was left behind.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAKEFILE = ROOT / "Makefile"
NOTEBOOKS = ROOT / "notebooks"
SERVED = ("notebooks", "docs")  # the folders of the repository the copy holds

# The JupyterLab defaults `make lab` and Binder install (no news toast, no update check, code
# lines wrapped at the cell's width), written as the user settings a fresh JupyterLab reads
# instead of ~/.jupyter/lab/user-settings: plugin "a:b" is the file "a/b.jupyterlab-settings".
OVERRIDES = ROOT / "classroom" / "lab_overrides.json"


def user_settings(overrides: Path = OVERRIDES) -> dict[str, dict]:
    """classroom/lab_overrides.json, one user-settings file per plugin."""
    plugins = json.loads(overrides.read_text())
    return {f"{plugin.replace(':', '/')}.jupyterlab-settings": values for plugin, values in plugins.items()}


def lab_args_from_makefile(makefile: Path = MAKEFILE) -> list[str]:
    """The `LAB_ARGS := ...` words of the Makefile, the arguments of `make lab`."""
    match = re.search(r"^LAB_ARGS\s*:?=\s*(.+)$", makefile.read_text(), re.MULTILINE)
    if match is None:
        raise RuntimeError(f"{makefile} defines no LAB_ARGS; the browser tests start that command")
    return shlex.split(match.group(1))


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class JupyterLabServer:
    """`jupyter lab $(LAB_ARGS)` on a copy of notebooks/ and docs/ in `workdir`, for one test
    session. Paths the server sees (`url`, sessions) are relative to the copy's root, as they
    are relative to the repository's root under `make lab`: notebooks/00_start_here.ipynb."""

    def __init__(self, workdir: Path, log_path: Path, startup_timeout: float = 90.0) -> None:
        self.workdir = workdir
        self.root_dir = workdir / "repo"  # the repository's root, as the server sees it
        self.notebook_dir = self.root_dir / "notebooks"
        self.startup_timeout = startup_timeout
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path  # kept after the run, for troubleshooting
        self.runtime_dir = workdir / "runtime"
        self.process: subprocess.Popen | None = None

    # -- life cycle --------------------------------------------------------------------
    def command(self) -> list[str]:
        args = lab_args_from_makefile()
        root_flags = [a for a in args if a.startswith("--ServerApp.root_dir=")]
        if root_flags != ["--ServerApp.root_dir=."]:
            raise RuntimeError(f"LAB_ARGS should serve the repository's root (root_dir=.): {args}")
        args = [f"--ServerApp.root_dir={self.root_dir}" if a in root_flags else a for a in args]
        extra = [
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--LabApp.user_settings_dir={self.workdir / 'user-settings'}",
            f"--LabApp.workspaces_dir={self.workdir / 'workspaces'}",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            extra.append("--allow-root")  # CI containers run as root; Jupyter refuses without it
        return [sys.executable, "-m", "jupyter", "lab", *args, *extra]

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        for var, sub in (
            ("JUPYTER_CONFIG_DIR", "config"),
            ("JUPYTER_RUNTIME_DIR", "runtime"),
            ("IPYTHONDIR", "ipython"),
            ("MPLCONFIGDIR", "matplotlib"),
        ):
            env[var] = str(self.workdir / sub)
        # The test session forces matplotlib's Agg backend; kernels must pick the inline
        # backend a learner gets, or figures would not show.
        env.pop("MPLBACKEND", None)
        return env

    def start(self) -> None:
        skip = shutil.ignore_patterns(".ipynb_checkpoints")
        for folder in SERVED:
            shutil.copytree(ROOT / folder, self.root_dir / folder, ignore=skip)
        for name, values in user_settings().items():
            path = self.workdir / "user-settings" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
        (self.workdir / "workspaces").mkdir()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                self.command(),
                cwd=ROOT,
                env=self.environment(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                code = self.process.returncode
                raise RuntimeError(f"JupyterLab exited with {code}:\n{self.log_tail()}")
            try:
                self.api("GET", "/api/status")
                return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.25)
        self.stop()
        raise RuntimeError(
            f"JupyterLab did not answer /api/status within {self.startup_timeout:.0f} s:\n{self.log_tail()}"
        )

    def stop(self, timeout: float = 30.0) -> None:
        """POST /api/shutdown (kernels included); kill the process only if that fails."""
        if self.process is None or self.process.poll() is not None:
            return
        try:
            self.api("POST", "/api/shutdown")
            self.process.wait(timeout=timeout)
        except (urllib.error.URLError, ConnectionError, TimeoutError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
            log = self.log_tail()
            raise RuntimeError(f"JupyterLab did not shut down cleanly:\n{log}") from None
        left = sorted(p.name for p in self.runtime_dir.glob("kernel-*.json"))
        if left:
            raise RuntimeError(f"kernels outlived the server (connection files {left})")

    # -- helpers -----------------------------------------------------------------------
    def api(self, method: str, path: str) -> object:
        """One authenticated REST call; the decoded JSON answer (None when empty)."""
        request = urllib.request.Request(
            self.base_url + path,
            method=method,
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def url(self, notebook: str) -> str:
        """The notebook's page; `reset` starts from an empty workspace (not the previous page's)."""
        return f"{self.base_url}/lab/tree/notebooks/{notebook}?reset&token={self.token}"

    def shutdown_kernels_of(self, notebook: str) -> None:
        """End the sessions (and kernels) of one notebook so the next test starts clean."""
        for session in self.api("GET", "/api/sessions"):
            if session["path"] == f"notebooks/{notebook}":
                self.api("DELETE", f"/api/sessions/{session['id']}")

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
