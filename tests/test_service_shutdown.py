"""SIGTERM under load, against the real server on 127.0.0.1 (issue 24, point 3).

16 clients each have a generate in flight (one runs, the others wait for the engine) when
the server gets SIGTERM: every client must get a whole HTTP answer, 200 (it ran) or 503
with Retry-After (refused, nothing applied), and the process must exit 0 within
`--shutdown-timeout` plus a little slack. Before the fix the waiting requests went on
running one after the other past the timeout and their clients got a closed connection.
"""

from __future__ import annotations

import signal
import threading
import time

import httpx
import pytest

from pagedkv.service.serve import ServerProcess

pytestmark = pytest.mark.slow  # a real server under load

CLIENTS = 16
TIMEOUT = 8.0  # --shutdown-timeout, the default
SLACK = 2.0  # process start-up of the signal handler, the last log sync, interpreter exit


def test_sigterm_answers_every_request_in_flight_and_exits_0_in_time(tmp_path):
    args = ("--wal", str(tmp_path / "s"), "--fsync", "never", "--num-pages", "1024")
    with ServerProcess(*args, "--shutdown-timeout", str(TIMEOUT)) as server:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            for k in range(CLIENTS):
                r = c.post("/sequences", json={"seq_id": f"s{k}", "token_ids": [k + 1] * 200})
                assert r.status_code == 201
        answers: list[int | str] = []
        ready = threading.Barrier(CLIENTS + 1)

        def generate(k: int) -> None:
            with httpx.Client(base_url=server.url, timeout=60) as client:
                client.get("/health")  # connected before the load starts
                ready.wait()
                try:
                    r = client.post(f"/sequences/s{k}/generate", json={"max_new_tokens": 256})
                    assert r.status_code != 503 or r.headers["retry-after"] == "1"
                    answers.append(r.status_code)
                except httpx.HTTPError as exc:  # a connection closed without an answer
                    answers.append(type(exc).__name__)

        clients = [threading.Thread(target=generate, args=(k,)) for k in range(CLIENTS)]
        for t in clients:
            t.start()
        ready.wait(30)
        time.sleep(1.0)  # every request sent; one holds the engine, the rest wait for it
        start = time.monotonic()
        code = server.stop(signal.SIGTERM, timeout=TIMEOUT + 20)
        took = time.monotonic() - start
        for t in clients:
            t.join(30)
    print(f"SIGTERM, {CLIENTS} in flight: exit {code} after {took:.1f} s; {sorted(map(str, answers))}")
    assert len(answers) == CLIENTS and all(a in (200, 503) for a in answers), answers
    assert code == 0 and took <= TIMEOUT + SLACK, (code, took)
