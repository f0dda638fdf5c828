"""Timeouts, limits, back-pressure and shutdown, against the real server on 127.0.0.1.

Each test would fail on a server without the limit: a slow-headers or slow-body client
would stay connected, stalled sockets would take every connection, a full engine would
queue requests instead of answering 503, SIGTERM would wait for a stalled request.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

import httpx
import pytest

from pagedkv.service.serve import ServerProcess

pytestmark = pytest.mark.slow  # every test starts a real server with its limits

LIMITS = ("--header-timeout", "1", "--body-timeout", "1", "--max-connections", "40")


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--num-pages", "256", "--page-size", "4", *LIMITS) as process:
        yield process


def _connect(server: ServerProcess) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=10)


def _closed_after(sock: socket.socket, drip: bytes = b"", limit: float = 8.0) -> tuple[float, bytes]:
    """Seconds until the server closes `sock` (dripping a byte of `drip` every 0.2 s), and
    what it sent."""
    start, received = time.monotonic(), b""
    sock.settimeout(0.2)
    for i in range(int(limit / 0.2)):  # bounded
        try:
            data = sock.recv(4096)
            if not data:
                return time.monotonic() - start, received
            received += data
        except TimeoutError:
            pass
        except ConnectionResetError:
            return time.monotonic() - start, received
        if i < len(drip):
            try:
                sock.send(drip[i : i + 1])
            except (BrokenPipeError, ConnectionResetError):
                return time.monotonic() - start, received
    return float("inf"), received


def test_slow_headers_are_cut_off_while_other_clients_are_served(server):
    sock = _connect(server)
    sock.send(b"GET /health HTTP/1.1\r\nHost: x\r\n")
    served: list[int] = []
    threading.Thread(target=lambda: served.append(httpx.get(f"{server.url}/health").status_code)).start()
    took, received = _closed_after(sock, drip=b"X-Slow: " + b"a" * 100)  # never finishes
    sock.close()
    assert took < 1 + 1.5 and received.startswith(b"HTTP/1.1 408"), (took, received)
    assert served == [200]


def test_a_connection_that_sends_nothing_is_closed(server):
    sock = _connect(server)
    took, _ = _closed_after(sock)
    sock.close()
    assert took < 1 + 1.5


def test_slow_body_is_answered_408_within_the_timeout(server):
    sock = _connect(server)
    sock.send(
        b"POST /sequences HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b'Content-Length: 100\r\n\r\n{"text":'
    )
    took, received = _closed_after(sock, drip=b" " * 100)  # 0.2 s a byte: 20 s for the body
    sock.close()
    assert took < 1 + 1.5 and received.startswith(b"HTTP/1.1 408"), (took, received)
    assert httpx.get(f"{server.url}/health").status_code == 200


def _still_open(sock: socket.socket) -> bool:
    """Whether the server still holds `sock` open (no end of stream yet; a 408 may precede it)."""
    sock.setblocking(False)
    try:
        while sock.recv(65536):
            pass
        return False
    except BlockingIOError:
        return True
    except OSError:
        return False


def test_hundreds_of_stalled_connections_never_lock_clients_out():
    # A long header timeout: the cap alone (evicting the oldest stalled connection) must
    # keep clients in.
    with ServerProcess("--header-timeout", "60", "--max-connections", "40") as server:
        _stall_and_serve(server)


def _stall_and_serve(server: ServerProcess) -> None:
    stalled = []
    try:
        for i in range(300):  # 7.5x the cap of 40
            s = _connect(server)
            s.send(b"GET / HTTP/1.1\r\n" if i % 2 else b"")
            stalled.append(s)
        answers = [httpx.get(f"{server.url}/health", timeout=5).status_code for _ in range(20)]
        time.sleep(0.3)  # let the last evictions reach the loop
        open_fds = len(os.listdir(f"/proc/{server.process.pid}/fd"))
        held = sum(_still_open(s) for s in stalled)
    finally:
        for s in stalled:
            s.close()
    print(
        f"300 stalled connections: {held} held open by the server (cap 40); "
        f"{answers.count(200)}/20 clients served; server fds {open_fds}"
    )
    assert answers == [200] * 20
    assert held <= 40 and open_fds < 40 + 30  # the cap, plus the server's own files


def test_too_many_requests_in_flight_are_answered_503_quickly():
    with ServerProcess("--num-pages", "512", "--page-size", "4", "--max-inflight", "2") as server:
        with httpx.Client(base_url=server.url, timeout=60) as c:
            for i in range(8):
                c.post("/sequences", json={"seq_id": f"s{i}", "text": "x" * 200})
        answers: list[tuple[int, float, str | None]] = []
        shared = httpx.Client(base_url=server.url, timeout=60, limits=httpx.Limits(max_connections=8))
        shared.get("/health")

        def generate(i: int) -> None:
            start = time.monotonic()
            r = shared.post(f"/sequences/s{i}/generate", json={"max_new_tokens": 200})
            answers.append((r.status_code, time.monotonic() - start, r.headers.get("retry-after")))

        threads = [threading.Thread(target=generate, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        shared.close()
        busy = [a for a in answers if a[0] == 503]
        served = [a for a in answers if a[0] == 200]
        assert busy and served and all(a[2] == "1" for a in busy), answers
        # refused at once: faster than the quickest request that was served
        assert max(a[1] for a in busy) < min(a[1] for a in served), answers
        assert len(server.log_tail().splitlines()) < 10  # rate-limited: not a line per refusal


def test_sigterm_drains_and_exits_in_time_leaving_a_recoverable_wal(tmp_path):
    args = ("--wal", str(tmp_path / "s"), "--shutdown-timeout", "2", "--body-timeout", "60")
    with ServerProcess(*args) as server:
        httpx.post(f"{server.url}/sequences", json={"seq_id": "kept", "text": "hello"})
        stalled = _connect(server)  # a request whose body never comes
        stalled.send(b"POST /sequences HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{")
        time.sleep(0.3)
        start = time.monotonic()
        code = server.stop(signal.SIGTERM)
        took = time.monotonic() - start
        stalled.close()
    assert code == 0 and took < 2 + 3, (code, took)
    with ServerProcess(*args) as again:
        assert httpx.get(f"{again.url}/sequences/kept").json()["text"] == "hello"


def test_live_sequences_are_limited_and_snapshots_paged():
    with ServerProcess("--max-sequences", "5", "--max-snapshot-sequences", "2") as server:
        with httpx.Client(base_url=server.url) as c:
            c.post("/sequences", json={"seq_id": "p", "text": "x" * 100})
            codes = [c.post("/sequences/p/fork", json={"child_id": f"f{i}"}).status_code for i in range(6)]
            assert codes == [201] * 4 + [503, 503]  # forks take no pages: the limit bounds them
            r = c.post("/sequences/p/fork", json={"child_id": "f9"})
            assert r.json()["error"] == "too_many_sequences" and r.headers["retry-after"] == "1"
            pages, offset = [], 0
            for _ in range(5):  # bounded
                snap = c.get("/snapshot", params={"offset": offset}).json()
                pages.append(list(snap["block_tables"]))
                offset = snap["next_offset"]
                if offset is None:
                    break
            assert pages == [["p", "f0"], ["f1", "f2"], ["f3"]]
            assert snap["seq_ids"] == ["p", "f0", "f1", "f2", "f3"]


def test_tokens_per_request_are_limited_as_configured_and_a_refusal_changes_nothing():
    limits = ("--max-prompt-tokens", "8", "--max-append-tokens", "3", "--max-new-tokens", "4")
    with ServerProcess(*limits) as server:
        with httpx.Client(base_url=server.url) as c:
            r = c.post("/sequences", json={"seq_id": "long", "text": "x" * 9})
            assert r.status_code == 422 and "at most 8" in r.json()["detail"][0]["msg"]
            assert c.get("/sequences/long").status_code == 404  # nothing was created
            assert c.post("/sequences", json={"seq_id": "p", "text": "x" * 8}).status_code == 201
            r = c.post("/sequences/p/append", json={"token_ids": [1, 2, 3, 4]})
            assert r.status_code == 422 and "at most 3" in r.json()["detail"][0]["msg"]
            r = c.post("/sequences/p/generate", json={"max_new_tokens": 5})
            assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "max_new_tokens"]
            assert c.get("/sequences/p").json()["num_tokens"] == 8  # refusals applied nothing
            assert c.post("/sequences/p/append", json={"token_ids": [1, 2, 3]}).status_code == 200
            r = c.post("/sequences/p/generate", json={"max_new_tokens": 4})
            assert r.status_code == 200 and len(r.json()["new_token_ids"]) == 4


def test_bench_api_quick_run_serves_every_kind_with_and_without_a_wal():
    from pagedkv.bench import api

    report = api.run(quick=True)
    assert {(row[0], row[1]) for row in report.rows} == {
        (server, kind)
        for server in ("no WAL", "WAL, fsync always")
        for kind in ("health", "create+free", "generate", "metrics")
    }
    # 4 clients never pass the default 32 requests in flight: nothing refused, all served
    assert all(row[3] == 0 and row[2] == (160 if row[1] == "create+free" else 80) for row in report.rows)


@pytest.mark.parametrize("durable", [False, True])
def test_the_copy_on_write_record_stays_bounded(tmp_path, durable):
    from pagedkv.service.durable import COW_LOG_KEEP
    from pagedkv.service.engine import ServiceEngine

    wal = tmp_path / "s" if durable else None
    engine = ServiceEngine(num_pages=16, page_size=4, wal=wal, fsync="never")
    engine.create(list(b"abcdef"), "p")  # a half-filled last page: each child copies it
    for _ in range(COW_LOG_KEEP + 20):  # bounded
        engine.fork("p", "c")
        engine.generate("c", 1)
        engine.free("c")
    assert len(engine.locked.snapshot().cow_log) == COW_LOG_KEEP
    assert engine.pool.stats.cow_copies == COW_LOG_KEEP + 20  # the counter still counts all
    engine.close()
