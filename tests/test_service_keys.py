"""Idempotency keys across a restart, at a bound above the default, on the real server.

The server holds `--idempotency-keys 1200` keys; 1,100 keyed appends (more than the
default 1,024) go in, the server restarts from its write-ahead log (once replaying only the
log, once from a checkpoint plus the log), and a retry of the *oldest* append must return
its first answer (`Idempotent-Replayed: true`) and change nothing. The oracle is the
client's own count of acknowledged tokens. Before recovery built the key store with the
configured bound, the oldest 76 keys were forgotten and that retry appended again.
"""

from __future__ import annotations

import httpx
import pytest

from pagedkv.service.serve import ServerProcess

# Real servers on 127.0.0.1: part of `make test`, not of `make test-fast`.
pytestmark = pytest.mark.slow

N = 1100  # keyed appends: more than the default bound (1,024), fewer than the configured


@pytest.mark.parametrize("checkpoint_every", [100_000, 500])
def test_keys_above_the_default_bound_survive_recovery(tmp_path, checkpoint_every):
    args = ("--wal", str(tmp_path / "store"), "--fsync", "never", "--idempotency-keys", "1200")
    args += ("--checkpoint-every", str(checkpoint_every), "--max-context-tokens", "4096")
    with ServerProcess(*args) as server, httpx.Client(base_url=server.url, timeout=30) as c:
        assert c.post("/sequences", json={"seq_id": "s", "text": "k"}).status_code == 201
        answers = []
        for i in range(N):
            r = c.post(
                "/sequences/s/append", json={"token_ids": [i % 256]}, headers={"Idempotency-Key": f"k{i}"}
            )
            assert r.status_code == 200, r.text
            answers.append(r.json())
        if checkpoint_every < N:
            assert c.post("/checkpoint").status_code == 200
        assert server.stop() == 0
    with ServerProcess(*args) as server, httpx.Client(base_url=server.url, timeout=30) as c:
        assert c.get("/sequences/s").json()["num_tokens"] == 1 + N
        for i in (0, 1, N - 1025, N - 1):  # the oldest, and those around the default bound
            r = c.post(
                "/sequences/s/append", json={"token_ids": [i % 256]}, headers={"Idempotency-Key": f"k{i}"}
            )
            assert r.status_code == 200 and r.headers.get("idempotent-replayed") == "true", (i, r.text)
            assert r.json() == answers[i]
        assert c.get("/sequences/s").json()["num_tokens"] == 1 + N  # nothing applied twice
