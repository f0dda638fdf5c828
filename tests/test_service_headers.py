"""Hostile headers and values against the real server on 127.0.0.1.

Two copies of a header whose copies could disagree (`Idempotency-Key`, `Authorization`)
are 400 naming the header, never "the first one wins"; headers over the stated bound
(`MAX_HEADER_BYTES`) are 431; every 422 names its field in `loc`, a lone surrogate in a
prompt included. Each refusal changes nothing (the snapshot before it is the oracle).
"""

from __future__ import annotations

import socket

import httpx
import pytest

from pagedkv.service.guard import MAX_HEADER_BYTES
from pagedkv.service.serve import ServerProcess

# Real servers on 127.0.0.1: part of `make test`, not of `make test-fast`.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--num-pages", "64", "--page-size", "4", "--max-context-tokens", "64") as process:
        yield process


@pytest.fixture
def client(server):
    with httpx.Client(base_url=server.url, timeout=30) as c:
        yield c


def test_two_idempotency_keys_are_400_naming_the_header(client):
    before = client.get("/snapshot").json()
    headers = [("Idempotency-Key", "a"), ("Idempotency-Key", "b"), ("content-type", "application/json")]
    r = client.post("/sequences", content=b'{"seq_id": "dup", "text": "x"}', headers=headers)
    assert r.status_code == 400 and "Idempotency-Key" in r.json()["detail"], r.text
    assert client.get("/snapshot").json() == before
    # and neither key was stored: the same request with key "b" alone runs afresh
    r = client.post("/sequences", json={"seq_id": "dup", "text": "x"}, headers={"Idempotency-Key": "b"})
    assert r.status_code == 201 and "idempotent-replayed" not in r.headers
    assert client.delete("/sequences/dup").status_code == 204


def test_two_authorization_headers_are_400_without_a_token_too(client):
    r = client.get("/health", headers=[("Authorization", "Bearer a"), ("Authorization", "Bearer b")])
    assert r.status_code == 400 and "Authorization" in r.json()["detail"]


def _raw(server, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(request)
        s.shutdown(socket.SHUT_WR)
        return b"".join(iter(lambda: s.recv(65536), b""))


@pytest.mark.parametrize("size", [MAX_HEADER_BYTES, 100_000])
def test_headers_over_the_bound_are_431(server, size):
    answer = _raw(server, b"GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * size + b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert str(MAX_HEADER_BYTES).encode() in answer  # the answer states the bound


def test_headers_under_the_bound_are_served(client):
    assert client.get("/health", headers={"X-Pad": "a" * (MAX_HEADER_BYTES - 200)}).status_code == 200


@pytest.mark.parametrize(
    ("path", "body", "loc"),
    [
        ("/sequences", b'{"text": "ok \\ud800"}', ["body", "text"]),
        ("/sequences", b'{"text": "\\udfff"}', ["body", "text"]),
        ("/sequences", b'{"text": "a", "extra_key": "\\ud83d"}', ["body", "extra_key"]),
        ("/sequences/s1/append", b'{"text": "\\ud800x"}', ["body", "text"]),
        ("/sequences", b'{"token_ids": [' + b"1," * 70 + b"1]}", ["body", "token_ids"]),  # over context
        ("/sequences/s1/append", b'{"token_ids": [' + b"1," * 70 + b"1]}", ["body", "token_ids"]),
    ],
)
def test_every_422_names_the_field(client, path, body, loc):
    client.post("/sequences", json={"seq_id": "s1", "text": "live"})
    before = client.get("/snapshot").json()
    r = client.post(path, content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert [d["loc"][: len(loc)] for d in r.json()["detail"]] == [loc], r.text
    assert client.get("/snapshot").json() == before


def test_a_reused_idempotency_key_is_422_naming_the_header(client):
    key = {"Idempotency-Key": "reuse"}
    assert client.post("/sequences", json={"seq_id": "r1", "text": "a"}, headers=key).status_code == 201
    before = client.get("/snapshot").json()
    r = client.post("/sequences", json={"seq_id": "r2", "text": "b"}, headers=key)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["header", "Idempotency-Key"], r.text
    assert client.get("/snapshot").json() == before
