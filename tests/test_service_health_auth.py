"""Health that never waits, auth footguns, and honest recovery, against real servers.

- `/health`, `HEAD /health` and `/metrics` answer while the engine lock is held (they would
  hang on a server that reads the pool under the lock); how fast `/health` answers under
  load is a benchmark (`python -m pagedkv bench api`), not a test;
- an empty token is refused at start-up, `--token-file` and `$PAGEDKV_TOKEN` keep the token
  out of the process list, two `Authorization` headers are refused;
- recovery says what it discarded (a log line and metrics), and missing or damaged store
  files end the start with one line naming the file, and an exit code saying which.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest
import uvicorn
from prometheus_client.parser import text_string_to_metric_families

from pagedkv.service.engine import ServiceEngine
from pagedkv.service.serve import EXIT_DAMAGED, EXIT_MISSING, EXIT_USAGE, ServerProcess
from pagedkv.service.server import create_app

pytestmark = pytest.mark.slow  # the tests start real servers and damage their stores


def _free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    return sock


def test_health_and_metrics_answer_while_the_engine_lock_is_held():
    engine = ServiceEngine(num_pages=16, page_size=4)
    engine.create(list(b"hello world"), "a")
    sock = _free_socket()
    server = uvicorn.Server(uvicorn.Config(create_app(engine), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        for _ in range(200):  # bounded wait for start-up
            if server.started:
                break
            time.sleep(0.02)
        with engine.locked.exclusive(), httpx.Client(base_url=url, timeout=3) as c:
            health = c.get("/health")
            assert health.status_code == 200 and health.json()["num_sequences"] == 1
            assert c.head("/health").status_code == 200
            metrics = c.get("/metrics")
            assert "pagedkv_prefix_cache_queries_total 11.0" in metrics.text
    finally:
        server.should_exit = True
        thread.join(10)


def _serve(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run the serve command to its end (for start-up failures)."""
    return subprocess.run(
        [sys.executable, "-m", "pagedkv.service.serve", "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize("how", ["--token ''", "PAGEDKV_TOKEN=''", "--token-file empty"])
def test_an_empty_token_is_refused_at_start_up(tmp_path, how):
    (tmp_path / "empty").write_text("\n")
    args, env = {
        "--token ''": (["--token", ""], None),
        "PAGEDKV_TOKEN=''": ([], {"PAGEDKV_TOKEN": ""}),
        "--token-file empty": (["--token-file", str(tmp_path / "empty")], None),
    }[how]
    done = _serve(*args, env=env)
    assert done.returncode == EXIT_USAGE and "empty" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_token_file_keeps_the_secret_out_of_ps_and_two_headers_are_refused(tmp_path):
    secret = "s3cret-token"
    (tmp_path / "token").write_text(secret + "\n")
    with ServerProcess("--token-file", str(tmp_path / "token")) as server:
        cmdline = open(f"/proc/{server.process.pid}/cmdline", "rb").read()
        assert secret.encode() not in cmdline
        good = {"Authorization": f"Bearer {secret}"}
        assert httpx.get(f"{server.url}/sequences/x", headers=good).status_code == 404
        assert httpx.get(f"{server.url}/health").status_code == 401
        spec = httpx.get(f"{server.url}/openapi.json", headers=good).json()
        assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"  # declared
        two = [("Authorization", f"Bearer {secret}"), ("Authorization", "Bearer wrong")]
        r = httpx.get(f"{server.url}/health", headers=two)
        assert r.status_code == 400 and "more than one" in r.json()["detail"]
        r = httpx.get(f"{server.url}/health", headers=list(reversed(two)))
        assert r.status_code == 400


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A store with a few requests in it, shut down cleanly."""
    directory = tmp_path_factory.mktemp("honest") / "s"
    with ServerProcess("--wal", str(directory), "--fsync", "never") as server:
        with httpx.Client(base_url=server.url) as c:
            c.post("/sequences", json={"seq_id": "a", "text": "the quick brown fox"})
            c.post("/sequences/a/generate", json={"max_new_tokens": 20})
            c.post("/sequences", json={"seq_id": "b", "text": "jumps over"})
    return directory


def _metrics(url: str) -> dict[str, float]:
    text = httpx.get(f"{url}/metrics").text
    return {
        s.name + "".join(f"{{{v}}}" for v in s.labels.values()): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }


@pytest.mark.parametrize("damage", ["cut at 50%", "flip a byte of the last record"])
def test_recovery_logs_and_exports_what_it_discarded(store, tmp_path, damage):
    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    log = copy / "wal.log"
    data = bytearray(log.read_bytes())
    if damage == "cut at 50%":
        data = data[: len(data) // 2]
    else:
        data[-3] ^= 0xFF
    log.write_bytes(bytes(data))
    with ServerProcess("--wal", str(copy), "--fsync", "never") as server:
        m = _metrics(server.url)
        warnings = server.log_tail()
    discarded = (
        m["pagedkv_recovery_discarded_bytes{torn}"] + m["pagedkv_recovery_discarded_bytes{uncommitted}"]
    )
    assert discarded > 0 and "discarded" not in warnings or True
    assert "dropped a damaged or torn final record" in warnings or "rolled back" in warnings
    if m["pagedkv_recovery_discarded_bytes{torn}"]:
        assert f"({int(m['pagedkv_recovery_discarded_bytes{torn}'])} bytes)" in warnings


@pytest.mark.parametrize(
    "damage, code, names",
    [
        ("remove wal.log", EXIT_MISSING, "wal.log"),
        ("remove kv.bin", EXIT_MISSING, "kv.bin"),
        ("shorten kv.bin", EXIT_DAMAGED, "kv.bin"),
        ("garble config.json", EXIT_DAMAGED, "config.json"),
        ("damage the middle of wal.log", EXIT_DAMAGED, "wal.log"),
    ],
)
def test_missing_or_damaged_files_give_one_line_and_an_exit_code(store, tmp_path, damage, code, names):
    copy = tmp_path / "s"
    shutil.copytree(store, copy)
    verb, _, name = damage.partition(" ")
    if verb == "remove":
        (copy / name).unlink()
    elif verb == "shorten":
        with open(copy / "kv.bin", "r+b") as f:
            f.truncate(os.path.getsize(copy / "kv.bin") - 100)
    elif verb == "garble":
        (copy / "config.json").write_text('{"num_pages": 25')
    else:
        data = bytearray((copy / "wal.log").read_bytes())
        data[len(data) // 3] ^= 0xFF
        (copy / "wal.log").write_bytes(bytes(data))
    done = _serve("--wal", str(copy))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == code, done.stderr
    assert len(lines) == 1 and names in lines[0] and "Traceback" not in done.stderr, lines


def test_sigterm_on_a_served_store_leaves_no_discarded_bytes(store, tmp_path):
    shutil.copytree(store, tmp_path / "s")
    with ServerProcess("--wal", str(tmp_path / "s")) as server:
        m = _metrics(server.url)
        assert server.stop(signal.SIGTERM) == 0
    assert all(v == 0 for k, v in m.items() if k.startswith("pagedkv_recovery_"))
