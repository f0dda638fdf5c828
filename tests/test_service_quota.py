"""Quotas per client, against the real server on 127.0.0.1 with two clients of a tokens file.

Each quota — pages held, live sequences, requests in flight — is filled by alice: her next
request is 429 with `Retry-After` and a body naming the quota, its limit and her use, and
the pool is exactly as before; bob is served meanwhile; once alice frees, she is served
again. Would fail on a server without quotas (alice's requests succeed until the whole
pool or server is full, and then everyone gets 503).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time

import httpx
import pytest

from pagedkv.service.serve import ServerProcess

pytestmark = pytest.mark.slow  # every test starts a real server

TOKENS = "# two clients of a classroom server\nalice:alice-token-1\n\nbob:bob-token-2   pages=16\n"
ARGS = ("--num-pages", "64", "--page-size", "4", "--quota-pages", "8", "--quota-sequences", "3")
ARGS += ("--quota-inflight", "1")


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    path = tmp_path_factory.mktemp("quota") / "tokens.txt"
    path.write_text(TOKENS)
    return path


@pytest.fixture(scope="module")
def server(tokens):
    with ServerProcess("--tokens-file", str(tokens), *ARGS) as process:
        yield process


def _as(server: ServerProcess, token: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, timeout=30, headers={"Authorization": f"Bearer {token}"})


@pytest.fixture()
def clients(server):
    with _as(server, "alice-token-1") as alice, _as(server, "bob-token-2") as bob:
        yield alice, bob
        for client in (alice, bob):  # each test starts from an empty pool
            for seq_id in client.get("/snapshot").json()["seq_ids"]:
                client.delete(f"/sequences/{seq_id}")


def _refused(response: httpx.Response, quota: str, limit: int, used: int) -> dict:
    assert response.status_code == 429, response.text
    assert response.headers["retry-after"] == "1"
    body = response.json()
    assert body["error"] == "quota_exceeded"
    assert (body["client"], body["quota"], body["limit"], body["used"]) == ("alice", quota, limit, used)
    assert quota in body["detail"]
    return body


def _metric(client: httpx.Client, name: str, who: str) -> float:
    text = client.get("/metrics").text
    match = re.search(rf'^{name}{{client="{who}"}} (\S+)$', text, re.M)
    assert match, name
    return float(match.group(1))


def _refusals(client: httpx.Client, quota: str) -> float:
    text = client.get("/metrics").text
    match = re.search(
        rf'^pagedkv_client_quota_refusals_total{{client="alice",quota="{quota}"}} (\S+)$', text, re.M
    )
    assert match
    return float(match.group(1))


def test_pages_quota_refuses_alice_only_until_she_frees(clients):
    alice, bob = clients
    assert alice.post("/sequences", json={"seq_id": "a1", "text": "x" * 28}).status_code == 201  # 7 pages
    before = alice.get("/snapshot").json()
    refused = _refusals(alice, "pages")
    body = _refused(alice.post("/sequences", json={"seq_id": "a2", "text": "y" * 8}), "pages", 8, 7)
    assert body["requested"] == 2
    _refused(alice.post("/sequences/a1/generate", json={"max_new_tokens": 8}), "pages", 8, 7)
    _refused(alice.post("/sequences/a1/append", json={"token_ids": [1] * 5}), "pages", 8, 7)
    assert alice.get("/snapshot").json() == before  # the refusals changed nothing
    assert _metric(alice, "pagedkv_client_pages", "alice") == 7
    assert _refusals(alice, "pages") == refused + 3
    # bob is unaffected: his own pages, forks and generations
    assert bob.post("/sequences", json={"seq_id": "b1", "text": "z" * 28}).status_code == 201
    assert bob.post("/sequences/b1/generate", json={"max_new_tokens": 16}).status_code == 200
    assert bob.post("/sequences/b1/fork", json={"child_id": "b2"}).status_code == 201
    assert alice.delete("/sequences/a1").status_code == 204
    assert alice.post("/sequences", json={"seq_id": "a2", "text": "y" * 8}).status_code == 201
    assert alice.post("/sequences/a2/generate", json={"max_new_tokens": 8}).status_code == 200
    assert _metric(alice, "pagedkv_client_pages", "alice") == 4


def test_sequences_quota_refuses_alice_only_until_she_frees(clients):
    alice, bob = clients
    assert alice.post("/sequences", json={"seq_id": "a1", "text": "abcd"}).status_code == 201
    for child in ("a2", "a3"):  # forks of her own sequence take no pages of hers
        assert alice.post("/sequences/a1/fork", json={"child_id": child}).status_code == 201
    before = alice.get("/snapshot").json()
    _refused(alice.post("/sequences/a1/fork", json={"child_id": "a4"}), "sequences", 3, 3)
    _refused(alice.post("/sequences", json={"seq_id": "a4", "text": "q"}), "sequences", 3, 3)
    assert alice.get("/snapshot").json() == before
    assert bob.post("/sequences", json={"seq_id": "b1", "text": "abcd"}).status_code == 201
    assert bob.post("/sequences/b1/fork", json={"child_id": "b2"}).status_code == 201
    assert bob.post("/sequences/b2/generate", json={"max_new_tokens": 3}).status_code == 200
    assert _metric(bob, "pagedkv_client_sequences", "alice") == 3
    assert alice.delete("/sequences/a3").status_code == 204
    assert alice.post("/sequences/a1/fork", json={"child_id": "a4"}).status_code == 201


def _stall(server: ServerProcess, token: str) -> socket.socket:
    """A request whose body never arrives: in flight until the socket closes."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    head = f"POST /sequences HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
    sock.sendall(head.encode() + b"Content-Type: application/json\r\nContent-Length: 40\r\n\r\n{")
    return sock


def _wait_inflight(client: httpx.Client, who: str, value: int) -> None:
    for _ in range(200):  # bounded: 10 s
        if _metric(client, "pagedkv_client_requests_inflight", who) == value:
            return
        time.sleep(0.05)
    raise AssertionError(f"{who} never had {value} requests in flight")


def test_inflight_quota_refuses_alice_only_until_her_request_ends(server, clients):
    alice, bob = clients
    stalled = _stall(server, "alice-token-1")
    try:
        _wait_inflight(bob, "alice", 1)
        before = bob.get("/snapshot").json()
        _refused(alice.post("/sequences", json={"seq_id": "a1", "text": "abc"}), "inflight", 1, 1)
        _refused(alice.get("/snapshot"), "inflight", 1, 1)
        assert alice.get("/health").status_code == 200  # liveness is never counted
        assert bob.post("/sequences", json={"seq_id": "b1", "text": "abc"}).status_code == 201
        assert bob.post("/sequences/b1/generate", json={"max_new_tokens": 2}).status_code == 200
        assert bob.delete("/sequences/b1").status_code == 204
        after = bob.get("/snapshot").json()
        assert after["seq_ids"] == before["seq_ids"] == []
    finally:
        stalled.close()
    _wait_inflight(bob, "alice", 0)
    assert alice.post("/sequences", json={"seq_id": "a1", "text": "abc"}).status_code == 201


def test_a_client_reaches_only_its_own_sequences(clients):
    alice, bob = clients
    assert alice.post("/sequences", json={"seq_id": "a1", "text": "mine"}).status_code == 201
    for response in (
        bob.get("/sequences/a1"),
        bob.delete("/sequences/a1"),
        bob.post("/sequences/a1/fork", json={"child_id": "b1"}),
        bob.post("/sequences/a1/append", json={"token_ids": [1]}),
        bob.post("/sequences/a1/generate", json={"max_new_tokens": 1}),
    ):
        assert response.status_code == 404, response.text
    assert alice.get("/sequences/a1").json()["text"] == "mine"


def test_idempotency_keys_are_per_client(clients):
    alice, bob = clients
    key = {"Idempotency-Key": "same-key"}
    assert alice.post("/sequences", json={"seq_id": "a1", "text": "one"}, headers=key).status_code == 201
    second = bob.post("/sequences", json={"seq_id": "b1", "text": "two"}, headers=key)
    assert second.status_code == 201 and "idempotent-replayed" not in second.headers
    again = alice.post("/sequences", json={"seq_id": "a1", "text": "one"}, headers=key)
    assert again.status_code == 201 and again.headers["idempotent-replayed"] == "true"


def _client_labels(text: str) -> set[str]:
    return set(re.findall(r'client="([^"]*)"', text))


def test_unknown_tokens_are_401_and_add_no_metric_label(server, clients):
    alice, _ = clients
    before = alice.get("/metrics").text
    assert _client_labels(before) == {"alice", "bob"}
    with _as(server, "mallory-token") as mallory:
        for path in ("/health", "/metrics", "/sequences/x", "/docs"):
            assert mallory.get(path).status_code == 401
        assert mallory.post("/sequences", json={"text": "hi"}).status_code == 401
    with httpx.Client(base_url=server.url) as anonymous:
        assert anonymous.get("/health").status_code == 401
    after = alice.get("/metrics").text
    assert _client_labels(after) == {"alice", "bob"}
    assert len(re.findall(r"^pagedkv_client_\w+\{", after, re.M)) == 2 * (3 + 3 + 3)


def test_two_authorization_headers_are_still_400(server):
    headers = [("Authorization", "Bearer alice-token-1"), ("Authorization", "Bearer bob-token-2")]
    with httpx.Client(base_url=server.url) as c:
        assert c.get("/health", headers=headers).status_code == 400


@pytest.mark.parametrize("checkpoint", [False, True])
def test_owners_and_use_survive_a_crash(tokens, tmp_path, checkpoint):
    args = ("--tokens-file", str(tokens), "--wal", str(tmp_path / "store"), *ARGS)
    with ServerProcess(*args) as server, _as(server, "alice-token-1") as alice:
        with _as(server, "bob-token-2") as bob:
            assert alice.post("/sequences", json={"seq_id": "a1", "text": "x" * 28}).status_code == 201
            assert bob.post("/sequences", json={"seq_id": "b1", "text": "bob's"}).status_code == 201
            assert alice.post("/sequences/a1/fork", json={"child_id": "a2"}).status_code == 201
            if checkpoint:
                assert alice.post("/checkpoint").status_code == 200
            assert bob.post("/sequences/b1/fork", json={"child_id": "b2"}).status_code == 201
        snapshot = alice.get("/snapshot").json()
        server.stop(9)  # kill -9
    with ServerProcess(*args) as server, _as(server, "alice-token-1") as alice:
        with _as(server, "bob-token-2") as bob:
            assert alice.get("/snapshot").json() == snapshot
            assert bob.get("/sequences/a2").status_code == 404  # still alice's
            assert alice.get("/sequences/b2").status_code == 404  # still bob's
            _refused(alice.post("/sequences", json={"text": "y" * 8}), "pages", 8, 7)
            assert alice.post("/sequences/a1/fork", json={"child_id": "a3"}).status_code == 201
            _refused(alice.post("/sequences/a1/fork", json={"child_id": "a4"}), "sequences", 3, 3)
            assert _metric(bob, "pagedkv_client_sequences", "bob") == 2
        assert server.stop() == 0


def test_promtool_accepts_the_client_metrics(clients):
    if not os.access("/usr/bin/promtool", os.X_OK):
        if os.environ.get("CI", "").lower() == "true":  # CI installs it: it must run there
            pytest.fail("CI=true: /usr/bin/promtool not found", pytrace=False)
        pytest.skip("/usr/bin/promtool not found (apt-get install prometheus)")
    text = clients[0].get("/metrics").text
    assert "pagedkv_client_quota_refusals_total{" in text
    cmd = ["/usr/bin/promtool", "check", "metrics"]
    checked = subprocess.run(cmd, input=text, capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
