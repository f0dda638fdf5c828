"""The connection cap is a cap, counted from outside: the server process's sockets in
/proc/<pid>/fd, against the real server on 127.0.0.1 (issue 24, point 2).

Stalled connections (nothing sent, or half a request line) arrive far beyond the cap; the
server's sockets are sampled while they arrive and after, and must never exceed the ones it
held idle plus the cap. Clients are still served meanwhile: the oldest connection without a
request is closed to make room for a newcomer.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time

import httpx
import pytest

from pagedkv.service.serve import ServerProcess

pytestmark = [
    pytest.mark.slow,  # real servers and hundreds of sockets
    pytest.mark.skipif(sys.platform != "linux", reason="counts /proc/<pid>/fd"),
]

CAP = 32
EXTRA = 200  # stalled connections beyond the cap


def _sockets(pid: int) -> int:
    """How many sockets the process holds (listening, connected, its own socketpairs)."""
    count = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            count += os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:")
        except FileNotFoundError:  # closed while we looked
            pass
    return count


def _burst(server: ServerProcess, n: int, sample) -> list[socket.socket]:
    """`n` connections opened at once (non-blocking connects, nothing sent)."""
    stalled = []
    for _ in range(n):  # bounded
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", server.port))
        stalled.append(s)
    for _ in range(20):  # while the server accepts them
        sample()
        time.sleep(0.01)
    return stalled


def _stall(server: ServerProcess, n: int, sample) -> list[socket.socket]:
    """`n` connections one after the other, half of them sending half a request line."""
    stalled = []
    for i in range(n):  # bounded
        s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        s.send(b"GET / HTTP/1.1\r\n" if i % 2 else b"")
        stalled.append(s)
        if i % 8 == 0:
            sample()
    return stalled


@pytest.mark.parametrize("arrive", ["one by one", "in a burst"])
def test_stalled_connections_never_hold_more_sockets_than_the_cap(arrive):
    with ServerProcess("--max-connections", str(CAP), "--header-timeout", "60") as server:
        pid = server.process.pid
        time.sleep(0.2)  # the launcher's probe connection is gone
        idle = _sockets(pid)
        peak = [idle]

        def sample() -> None:
            peak.append(_sockets(pid))

        stalled = (_stall if arrive == "one by one" else _burst)(server, CAP + EXTRA, sample)
        try:
            served = [httpx.get(f"{server.url}/health", timeout=10).status_code for _ in range(10)]
            for _ in range(20):  # a second after the flood
                sample()
                time.sleep(0.05)
        finally:
            for s in stalled:
                s.close()
    print(f"{CAP + EXTRA} stalled, {arrive}, cap {CAP}: server sockets idle {idle}, peak {max(peak)}")
    assert served == [200] * 10
    assert max(peak) - idle <= CAP, (idle, max(peak))


def test_when_every_connection_is_busy_a_newcomer_waits_in_the_backlog_then_is_served():
    cap = 4
    args = ("--max-connections", str(cap), "--body-timeout", "3", "--header-timeout", "60")
    with ServerProcess(*args) as server:
        pid = server.process.pid
        time.sleep(0.2)
        idle = _sockets(pid)
        busy = []
        for _ in range(cap):  # requests in flight whose bodies never come (408 after 3 s)
            s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            s.send(b"POST /sequences HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{")
            busy.append(s)
        time.sleep(0.3)
        peak: list[int] = []
        sampling = threading.Event()

        def sample() -> None:
            for _ in range(200):  # bounded: 10 s
                if sampling.is_set():
                    return
                peak.append(_sockets(pid))
                time.sleep(0.05)

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            status = httpx.get(f"{server.url}/health", timeout=30).status_code  # waits for a slot
        finally:
            sampling.set()
            sampler.join()
            for s in busy:
                s.close()
        log = server.log_tail()
    print(
        f"{cap} busy connections, cap {cap}: a newcomer got {status}; sockets idle {idle}, peak {max(peak)}"
    )
    assert status == 200
    assert max(peak) - idle <= cap, (idle, max(peak))
    assert "Traceback" not in log and "out of system resource" not in log, log
