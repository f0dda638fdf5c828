"""Liveness while the server is at its in-flight cap, and the `--health-port` listener,
against the real server on 127.0.0.1 (issue 24, point 6).

No timings here: how fast `/health` answers under load is measured by `python -m pagedkv
bench api` (p99 beside the idle p99, per port). These tests check that it answers at all,
on both ports, while every request slot is taken, and that the health port keeps the API's
rules (bearer token, GET /health only) and survives stalled connections.
"""

from __future__ import annotations

import selectors
import socket
import subprocess
import sys
import threading

import httpx
import pytest

from pagedkv.service.health import MAX_PROBES, HealthServer
from pagedkv.service.serve import EXIT_USAGE, ServerProcess

pytestmark = pytest.mark.slow  # real servers


def test_health_answers_on_both_ports_while_the_server_is_at_its_inflight_cap():
    args = ("--num-pages", "512", "--page-size", "4", "--max-inflight", "2", "--health-port", "0")
    with ServerProcess(*args) as server:
        assert server.url is not None and server.health_url is not None
        with httpx.Client(base_url=server.url, timeout=60) as c:
            for k in range(8):
                c.post("/sequences", json={"seq_id": f"s{k}", "text": "x" * 200})
        answers: list[int] = []
        done = threading.Event()

        def generate(k: int) -> None:
            with httpx.Client(base_url=server.url, timeout=60) as client:
                for _ in range(6):  # bounded
                    answers.append(
                        client.post(f"/sequences/s{k}/generate", json={"max_new_tokens": 64}).status_code
                    )

        load = [threading.Thread(target=generate, args=(k,)) for k in range(8)]
        for t in load:
            t.start()
        health: list[tuple[int, int]] = []
        with httpx.Client(timeout=30) as probe:
            for _ in range(200):  # bounded: probe until the load is done
                if not any(t.is_alive() for t in load):
                    break
                health.append(
                    (probe.get(f"{server.url}/health").status_code, probe.get(server.health_url).status_code)
                )
        for t in load:
            t.join()
        done.set()
    assert 503 in answers and 200 in answers, answers  # the cap was reached, and work was done
    assert health and all(h == (200, 200) for h in health), health


def test_the_health_port_keeps_the_token_and_answers_health_only(tmp_path):
    (tmp_path / "token").write_text("t0k3n\n")
    with ServerProcess(
        "--token-file", str(tmp_path / "token"), "--health-port", "0", token="t0k3n"
    ) as server:
        url = server.health_url
        assert url is not None and url.endswith("/health")
        assert httpx.get(url).status_code == 401
        assert httpx.get(url, headers={"Authorization": "Bearer wrong"}).status_code == 401
        two = [("Authorization", "Bearer t0k3n"), ("Authorization", "Bearer t0k3n")]
        assert httpx.get(url, headers=two).status_code == 401  # which copy would a proxy check?
        good = {"Authorization": "Bearer t0k3n"}
        r = httpx.get(url, headers=good)
        assert r.status_code == 200 and r.json()["status"] == "ok" and "num_free_pages" in r.json()
        head = httpx.head(url, headers=good)
        assert head.status_code == 200 and head.content == b""
        assert httpx.get(url.removesuffix("/health") + "/sequences", headers=good).status_code == 404
        assert httpx.post(url, headers=good).status_code == 404


def test_stalled_connections_to_the_health_port_do_not_stop_it():
    with ServerProcess("--health-port", "0") as server:
        assert server.health_url is not None
        port = int(server.health_url.split(":")[2].split("/")[0])
        stalled = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(MAX_PROBES * 3)]
        try:
            for s in stalled[::2]:
                s.send(b"GET /health HTTP/1.1\r\n")  # never finished
            answers = [httpx.get(server.health_url, timeout=10).status_code for _ in range(3)]
        finally:
            for s in stalled:
                s.close()
    assert answers == [200] * 3


@pytest.mark.parametrize("port", ["-1", "70000", "taken"])
def test_a_bad_health_port_is_one_line_naming_the_option(port):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        value = str(taken.getsockname()[1]) if port == "taken" else port
        done = subprocess.run(
            [sys.executable, "-m", "pagedkv.service.serve", "--port", "0", "--health-port", value],
            capture_output=True,
            text=True,
            timeout=60,
        )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == EXIT_USAGE and len(lines) == 1 and "--health-port" in lines[0], done.stderr


def test_an_accept_that_closes_the_oldest_probe_skips_that_probe_later_in_the_same_wake_up():
    """The flake behind the test above: one wake-up finds both a newcomer and data from the
    oldest open probe; the accept closes the oldest, and reading it after must not happen
    (it raised inside the listener's thread, which died and left every later probe unanswered)."""
    health = HealthServer(("127.0.0.1", 0), lambda: {"num_free_pages": 1}, token=None)
    try:
        address = health.server_address
        probes = []
        for _ in range(MAX_PROBES):
            probes.append(socket.create_connection(address, timeout=5))
            for _ in range(20):  # bounded: until the listener holds it
                if len(health.open) == len(probes):
                    break
                health.serve_once(0.05)
        assert len(health.open) == MAX_PROBES
        probes[0].send(b"GET /health HTTP/1.0\r\n")  # the oldest has data ...
        newcomer = socket.create_connection(address, timeout=5)  # ... as a newcomer arrives
        with selectors.DefaultSelector() as ready:  # bounded wait until both are readable
            ready.register(health.sock, selectors.EVENT_READ)
            ready.register(next(iter(health.open)), selectors.EVENT_READ)
            for _ in range(20):
                if len(ready.select(0.05)) == 2:
                    break
        health.serve_once(0.2)  # one wake-up sees both
        newcomer.send(b"GET /health HTTP/1.0\r\n\r\n")
        for _ in range(20):
            if newcomer not in health.open and len(health.open) < MAX_PROBES:
                break
            health.serve_once(0.05)
        answer = newcomer.recv(4096)
        assert answer.startswith(b"HTTP/1.0 200 OK") and b'"num_free_pages": 1' in answer
        with pytest.raises(ConnectionResetError):  # the oldest was closed, its request unread
            probes[0].recv(4096)
    finally:
        for s in [*probes, newcomer]:
            s.close()
        health.selector.close()
        health.sock.close()
