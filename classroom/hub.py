"""A JupyterHub for one class on one machine: an instructor, students and nbgrader's exchange.

    make hub                       # = python classroom/hub.py (after installing what it needs)
    python classroom/hub.py --workdir build/hub --port 8000 --students 2

For a teacher trying the whole nbgrader round trip before a course, and for
tests/browser/test_hub_class.py, which drives this same hub in Chromium. It starts a real
JupyterHub on 127.0.0.1 (its proxy, configurable-http-proxy, installed from npm by
`make hub-proxy` into build/hub-node/) with:

- the trial authenticator ("shared-password"): every student logs in with one password,
  the instructor (the hub's admin) with a longer admin password; both are printed;
- SimpleLocalProcessSpawner: each user's JupyterLab runs as this machine's user, with its own
  home folder under the work folder (no operating-system accounts; a trial, not a deployment);
- nbgrader's exchange in the work folder (mode 777), the course "pagedkv" in a global
  nbgrader_config.py, each student's id pinned in their ~/.jupyter/nbgrader_config.py, and
  the instructor's course folder (~/pagedkv-course) holding notebooks/exercises/ as the source
  of the assignment "exercises", graded with classroom/nbgrader_config.py's settings.

Leaves out: real accounts, HTTPS, resource limits (docs/teaching.md: The Littlest JupyterHub
and Zero to JupyterHub for a real class).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROXY = ROOT / "build" / "hub-node" / "node_modules" / ".bin" / "configurable-http-proxy"
COURSE_ID = "pagedkv"
ASSIGNMENT = "exercises"
COURSE_FOLDER = "pagedkv-course"  # in the instructor's home
INSTRUCTOR = "instructor"
NOTIFICATIONS = "@jupyterlab/apputils-extension/notification.jupyterlab-settings"


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def missing_requirement() -> str | None:
    """Why this hub cannot start here (one line), or None."""
    absent = [name for name in ("jupyterhub", "nbgrader") if importlib.util.find_spec(name) is None]
    if absent:
        return f"the hub needs {' and '.join(absent)} (pip install -e '.[teach,hub]')"
    if not os.access(PROXY, os.X_OK):
        return f"the hub needs configurable-http-proxy at {PROXY.relative_to(ROOT)} (make hub-proxy)"
    return None


@dataclass
class ClassHub:
    """One JupyterHub process (with its proxy and the users' servers) for a class."""

    workdir: Path
    students: tuple[str, ...] = ("student1", "student2")
    port: int = field(default_factory=free_port)
    startup_timeout: float = 120.0
    student_password: str = field(default_factory=lambda: secrets.token_urlsafe(9))  # 12 characters
    instructor_password: str = field(default_factory=lambda: secrets.token_urlsafe(24))  # 32: the minimum
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def home(self, user: str) -> Path:
        return self.workdir / "home" / user

    @property
    def course(self) -> Path:
        return self.home(INSTRUCTOR) / COURSE_FOLDER

    @property
    def exchange(self) -> Path:
        return self.workdir / "exchange"

    def password(self, user: str) -> str:
        return self.instructor_password if user == INSTRUCTOR else self.student_password

    # -- the folders and config files --------------------------------------------------
    def prepare(self) -> None:
        """Write the hub's and nbgrader's configuration; keep what a previous run left (homes,
        course, exchange), so a teacher's hub can be stopped and started again."""
        hub_dir, etc = self.workdir / "hub", self.workdir / "etc"
        for folder in (hub_dir, etc, self.exchange):
            folder.mkdir(parents=True, exist_ok=True)
        self.exchange.chmod(0o777)  # every user's server writes here (nbgrader's exchange)
        _write(
            etc / "nbgrader_config.py",
            f"c.CourseDirectory.course_id = {COURSE_ID!r}",
            f"c.Exchange.root = {str(self.exchange)!r}",
            "# Every trial user is this machine's one OS user: collect must not compare owners.",
            "c.CollectApp.check_owner = False",
        )
        for user in (INSTRUCTOR, *self.students):  # no "news?" toast, no update check (loopback only)
            settings = self.home(user) / ".jupyter" / "lab" / "user-settings" / NOTIFICATIONS
            settings.parent.mkdir(parents=True, exist_ok=True)
            settings.write_text('{"fetchNews": "false", "checkForUpdates": false}\n')
        for student in self.students:
            _write(
                self.home(student) / ".jupyter" / "nbgrader_config.py",
                f"c.CourseDirectory.student_id = {student!r}",
            )
        _write(
            self.home(INSTRUCTOR) / ".jupyter" / "nbgrader_config.py",
            f"c.CourseDirectory.root = {str(self.course)!r}",
        )
        source = self.course / "source" / ASSIGNMENT
        if not source.exists():
            shutil.copytree(
                ROOT / "notebooks" / "exercises", source, ignore=shutil.ignore_patterns(".ipynb_checkpoints")
            )
        (hub_dir / "jupyterhub_config.py").write_text(self.hub_config(etc))

    def hub_config(self, etc: Path) -> str:
        """jupyterhub_config.py: loopback ports, trial accounts, local user servers."""
        users = sorted({INSTRUCTOR, *self.students})
        hub_dir = self.workdir / "hub"
        env = {
            # nbgrader's course and exchange (etc/), then the grading settings (classroom/).
            "JUPYTER_CONFIG_PATH": os.pathsep.join([str(etc), str(ROOT / "classroom")]),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "PATH": _path_with_python(),  # nbgrader runs `alembic` from PATH
        }
        root_args = ["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
        lines = [
            f"c.JupyterHub.ip = '127.0.0.1'; c.JupyterHub.port = {self.port}",
            f"c.JupyterHub.hub_ip = '127.0.0.1'; c.JupyterHub.hub_port = {free_port()}",
            f"c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:{free_port()}'",
            f"c.ConfigurableHTTPProxy.command = [{str(PROXY)!r}]",
            f"c.ConfigurableHTTPProxy.pid_file = {str(hub_dir / 'proxy.pid')!r}",
            f"c.JupyterHub.db_url = {'sqlite:///' + str(hub_dir / 'jupyterhub.sqlite')!r}",
            f"c.JupyterHub.cookie_secret_file = {str(hub_dir / 'cookie_secret')!r}",
            "c.JupyterHub.authenticator_class = 'shared-password'",
            f"c.SharedPasswordAuthenticator.user_password = {self.student_password!r}",
            f"c.SharedPasswordAuthenticator.admin_password = {self.instructor_password!r}",
            f"c.Authenticator.allowed_users = {set(users)!r}",
            f"c.Authenticator.admin_users = {{{INSTRUCTOR!r}}}",
            "c.JupyterHub.spawner_class = 'jupyterhub.spawner.SimpleLocalProcessSpawner'",
            f"c.SimpleLocalProcessSpawner.home_dir_template = {str(self.workdir / 'home' / '{username}')!r}",
            f"c.Spawner.cmd = [{sys.executable!r}, '-m', 'jupyterhub.singleuser']",
            f"c.Spawner.args = {root_args!r}",
            "c.Spawner.default_url = '/lab'",
            f"c.Spawner.environment = {env!r}",
            "c.Spawner.start_timeout = 120; c.Spawner.http_timeout = 120",
        ]
        return "\n".join(["# Written by classroom/hub.py on every start.", *lines, ""])

    # -- life cycle --------------------------------------------------------------------
    def start(self, log_path: Path) -> None:
        """Start the hub (in its own session: Ctrl-C reaches the launcher, which stops it)."""
        self.prepare()
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "jupyterhub", "-f", "jupyterhub_config.py"],
                cwd=self.workdir / "hub",
                env={**os.environ, "PATH": _path_with_python()},
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"jupyterhub exited with {self.process.returncode}; its log: {log_path}")
            try:
                with urllib.request.urlopen(f"{self.url}/hub/api/", timeout=5):
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the hub did not answer within {self.startup_timeout:.0f} s; its log: {log_path}")

    def stop(self, timeout: float = 30.0) -> list[int]:
        """SIGTERM the hub, which stops the proxy and every user's server; then kill whatever
        of ours is left (by process id: the processes working inside the work folder).
        Returns the ids that had to be killed (empty after a clean stop)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        left = processes_in(self.workdir)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return left

    def accounts(self) -> str:
        """The trial accounts, as printed for the teacher."""
        lines = [f"  {INSTRUCTOR:12} password {self.instructor_password}   (instructor: formgrader)"]
        lines += [f"  {s:12} password {self.student_password}" for s in self.students]
        return "\n".join(lines)


def _write(path: Path, *lines: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(["# Written by classroom/hub.py.", "c = get_config()", *lines, ""]))


def _path_with_python() -> str:
    """PATH with this Python's bin/ first (jupyterhub-singleuser, nbgrader and alembic live there)."""
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


def processes_in(folder: Path) -> list[int]:
    """Ids of the processes (not this one) whose working directory is inside `folder` (Linux)."""
    found: list[int] = []
    folder = folder.resolve()
    proc = Path("/proc")
    if not proc.is_dir():
        return found
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue
        if cwd == folder or folder in cwd.parents:
            found.append(int(entry.name))
    return found


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # `kill` (SIGTERM) stops the hub the way Ctrl-C does


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workdir", type=Path, default=ROOT / "build" / "hub", help="homes, exchange, hub state"
    )
    parser.add_argument("--port", type=int, default=8000, help="the hub's address is http://127.0.0.1:PORT")
    parser.add_argument("--students", type=int, default=2, help="trial student accounts (1..50)")
    args = parser.parse_args(argv)
    if not 1 <= args.students <= 50:
        parser.error(f"--students must be 1..50, got {args.students}")
    reason = missing_requirement()
    if reason:
        print(reason, file=sys.stderr)
        return 1
    if not _port_is_free(args.port):
        print(f"port {args.port} is taken: --port N (make hub HUB_ARGS='--port N')", file=sys.stderr)
        return 1
    students = tuple(f"student{i}" for i in range(1, args.students + 1))
    hub = ClassHub(args.workdir.resolve(), students=students, port=args.port)
    log = hub.workdir / "hub" / "jupyterhub.log"
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        print(f"starting JupyterHub (log: {log}) ...", flush=True)
        started = time.monotonic()
        hub.start(log)
        print(f"\nJupyterHub for the class is up in {time.monotonic() - started:.0f} s: {hub.url}\n")
        print(f"Trial accounts (log in at {hub.url}/hub/login):\n{hub.accounts()}\n")
        print(f"The instructor's course folder: {hub.course} (Nbgrader > Formgrader)")
        print("Students: Nbgrader > Assignment List. Stop the hub with Ctrl-C.", flush=True)
        code = hub.process.wait() if hub.process else 1
        print(f"jupyterhub exited by itself with {code}; its log: {log}")
        return 1
    except KeyboardInterrupt:
        print("\nstopping the hub, its proxy and the users' servers ...", flush=True)
        killed = hub.stop()
        print("stopped" + (f" (killed leftovers: {killed})" if killed else ""))
        return 0


if __name__ == "__main__":
    sys.exit(main())
