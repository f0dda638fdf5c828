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


def _stall(server: ServerProcess, n: int, sample) -> list[socket.socket]:
    stalled = []
    for i in range(n):  # bounded
        s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        s.send(b"GET / HTTP/1.1\r\n" if i % 2 else b"")
        stalled.append(s)
        if i % 8 == 0:
            sample()
    return stalled


def test_stalled_connections_never_hold_more_sockets_than_the_cap():
    with ServerProcess("--max-connections", str(CAP), "--header-timeout", "60") as server:
        pid = server.process.pid
        time.sleep(0.2)  # the launcher's probe connection is gone
        idle = _sockets(pid)
        peak = [idle]

        def sample() -> None:
            peak.append(_sockets(pid))

        stalled = _stall(server, CAP + EXTRA, sample)
        try:
            served = [httpx.get(f"{server.url}/health", timeout=10).status_code for _ in range(10)]
            for _ in range(20):  # a second after the flood
                sample()
                time.sleep(0.05)
        finally:
            for s in stalled:
                s.close()
    print(f"{CAP + EXTRA} stalled connections, cap {CAP}: server sockets idle {idle}, peak {max(peak)}")
    assert served == [200] * 10
    assert max(peak) - idle <= CAP, (idle, max(peak))
