"""The HTTP API, tested against a real server: `python -m pagedkv serve` in a child process
on a free loopback port, spoken to over HTTP with httpx.

Oracles: TinyLM.generate_reference (dense recompute, no cache) for generated tokens; the
clients' own records of what they created and freed for the final state; block-table
membership for ref counts; the snapshot before a bad request for "changed nothing".
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading

import httpx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from pagedkv import OutOfPagesError, TinyLM
from pagedkv.service import recover
from pagedkv.service.engine import ServiceEngine, snapshot_json
from pagedkv.service.serve import ServerProcess

from .hypothesis_profiles import examples

MODEL = TinyLM.pretrained()  # the weights the service loads


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--num-pages", "64", "--page-size", "4") as process:
        yield process


@pytest.fixture
def client(server):
    with httpx.Client(base_url=server.url, timeout=60) as c:
        yield c


def consistent(snapshot: dict) -> None:
    """Ref counts equal block-table membership; held pages ACTIVE, FREE pages empty."""
    holders = np.zeros(snapshot["num_pages"], dtype=int)
    for table in snapshot["block_tables"].values():
        holders[table] += 1
    assert holders.tolist() == snapshot["ref_count"]
    state, fill = np.array(snapshot["state"]), np.array(snapshot["fill"])
    assert ((holders > 0) == (state == 1)).all() and (fill[state == 0] == 0).all()


@pytest.mark.slow
def test_full_lifecycle(client):
    prompt = "paged attention!"  # 16 bytes: 4 full pages of 4
    r = client.post("/sequences", json={"seq_id": "life", "text": prompt})
    assert r.status_code == 201
    life = r.json()
    assert life["seq_id"] == "life" and life["num_tokens"] == 16 and len(life["block_table"]) == 4
    assert life["num_cached_tokens"] == 0 and life["num_computed_tokens"] == 16
    # A second prompt sharing the first three pages hits them (never the page of its last token).
    r = client.post("/sequences", json={"seq_id": "life2", "token_ids": MODEL.encode(prompt[:12] + "xyz")})
    assert r.json()["num_cached_tokens"] == 12 and r.json()["block_table"][:3] == life["block_table"][:3]
    # Generation through the paged cache equals dense recomputation, token for token.
    r = client.post("/sequences/life/generate", json={"max_new_tokens": 6})
    assert r.status_code == 200
    assert r.json()["new_token_ids"] == MODEL.generate_reference(prompt, 6)
    assert r.json()["new_text"] == MODEL.decode(r.json()["new_token_ids"])
    r = client.post("/sequences/life/append", json={"text": " more"})
    assert r.json()["num_tokens"] == 16 + 6 + 5
    context = r.json()["token_ids"]
    r = client.post("/sequences/life/fork", json={"child_id": "kid"})
    assert (
        r.status_code == 201
        and r.json()["block_table"] == client.get("/sequences/life").json()["block_table"]
    )
    r = client.post("/sequences/kid/generate", json={"max_new_tokens": 3})
    assert r.json()["new_token_ids"] == MODEL.generate_reference(context, 3)
    kid_table = r.json()["block_table"]
    assert kid_table[-2] != client.get("/sequences/life").json()["block_table"][-1]  # copied on write
    snap = client.get("/snapshot").json()
    consistent(snap)
    assert snap["stats"]["cow_copies"] == 1 and ["life", "life2", "kid"] == [
        s for s in snap["seq_ids"] if s in ("life", "life2", "kid")
    ]
    families = {f.name: f for f in text_string_to_metric_families(client.get("/metrics").text)}
    assert families["pagedkv_cow_copies"].samples[0].value == snap["stats"]["cow_copies"]
    for seq_id in ("life", "life2", "kid"):
        assert client.delete(f"/sequences/{seq_id}").status_code == 204
    assert client.get("/sequences/life").status_code == 404
    assert client.delete("/sequences/life").json()["error"] == "unknown_sequence"
    assert client.get("/invariants").json() == {"ok": True}
    assert client.get("/health").json()["status"] == "ok"
    assert client.get("/docs").status_code == 200
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/sequences", "/sequences/{seq_id}/generate", "/snapshot", "/metrics"} <= set(paths)


@pytest.mark.slow
def test_duplicate_ids_and_server_assigned_ids(client):
    first = client.post("/sequences", json={"text": "auto"}).json()["seq_id"]
    second = client.post("/sequences", json={"text": "auto"}).json()["seq_id"]
    assert first.startswith("seq-") and second.startswith("seq-") and first != second
    r = client.post("/sequences", json={"seq_id": first, "text": "again"})
    assert r.status_code == 409 and first in r.json()["detail"]
    for seq_id in (first, second):
        client.delete(f"/sequences/{seq_id}")


@pytest.mark.slow
def test_a_request_larger_than_the_pool_is_422_and_one_past_its_free_pages_503(client):
    """Never servable (more pages than the pool has in all): 422 naming the field, no
    Retry-After. Servable later (fits the pool, not its FREE + CACHED pages now): 503 with
    Retry-After. Neither changes anything. Each 503 out_of_pages, and nothing else, is
    counted by pagedkv_out_of_pages_refusals_total."""
    before = client.get("/snapshot").json()
    refused = _out_of_pages_refusals(client)
    r = client.post("/sequences", json={"seq_id": "huge", "token_ids": [7] * 2000})
    assert r.status_code == 422 and "retry-after" not in r.headers
    body = r.json()
    assert body["error"] == "exceeds_pool" and body["detail"][0]["loc"] == ["body", "token_ids"]
    msg = body["detail"][0]["msg"]  # 2,000 tokens are 500 pages of 4; the pool has 64
    assert "500 pages of 4 tokens" in msg and "64 pages in all" in msg, msg
    r = client.post("/sequences", json={"text": "x" * 257})  # 65 pages: the field it came in
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "text"]
    assert client.get("/snapshot").json() == before
    client.post("/sequences", json={"seq_id": "big", "token_ids": [1] * 100})  # 25 full pages
    client.post("/sequences", json={"seq_id": "other", "token_ids": [2] * 20})  # 5 more
    mid = client.get("/snapshot").json()
    available = sum(s != 1 for s in mid["state"])  # FREE + CACHED
    tokens = np.random.default_rng(5).integers(0, 256, 4 * (available + 1)).tolist()
    r = client.post("/sequences", json={"token_ids": tokens})  # one page more than is left
    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    body = r.json()
    assert body["error"] == "out_of_pages" and body["num_pages"] == 64
    assert body["num_available_pages"] == available
    r = client.post("/sequences/big/generate", json={"max_new_tokens": 152})  # 63 pages in all
    assert r.status_code == 503 and r.headers["retry-after"] == "1"  # needs 38 of <= 34
    r = client.post("/sequences/big/generate", json={"max_new_tokens": 157})  # 65 pages
    assert r.status_code == 422 and "retry-after" not in r.headers
    assert r.json()["detail"][0]["loc"] == ["body", "max_new_tokens"]
    assert "65 pages of 4 tokens" in r.json()["detail"][0]["msg"]
    assert client.get("/snapshot").json() == mid
    assert _out_of_pages_refusals(client) == refused + 2  # the two 503s; no 422 counted
    for seq_id in ("big", "other"):
        client.delete(f"/sequences/{seq_id}")
    after = client.get("/snapshot").json()
    assert after["seq_ids"] == before["seq_ids"]


def _out_of_pages_refusals(client) -> float:
    families = {f.name: f for f in text_string_to_metric_families(client.get("/metrics").text)}
    family = families["pagedkv_out_of_pages_refusals"]
    assert family.type == "counter" and "503 out_of_pages" in family.documentation
    return family.samples[0].value


@pytest.mark.slow
def test_body_limit(client):
    r = client.post(
        "/sequences",
        content=b"[" + b"1," * 200_000 + b"1]",
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 413


# ---- bad input, fuzzed: always 4xx naming the field, never 5xx, nothing changed ------------

JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.lists(st.integers(-5, 300), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
BAD_TOKEN_LISTS = st.one_of(
    st.just([]),
    st.lists(st.integers(256, 2**40), min_size=1, max_size=3),
    st.lists(st.integers(-(2**40), -1), min_size=1, max_size=3),
    st.just([1.0]),
    st.just(["a"]),
    st.just([True]),
    st.just([1] * 2049),
)
BAD_IDS = st.one_of(
    st.just(""), st.just("-lead"), st.just("x" * 65), st.just("sp ace"), st.just("é"), st.integers()
)


def _not(valid: type, strategy):
    return strategy.filter(lambda v: not isinstance(v, valid) or isinstance(v, bool))


BAD_REQUESTS = st.one_of(
    # (method, path, body, the field the answer must name)
    st.tuples(
        st.just("POST"),
        st.just("/sequences"),
        st.fixed_dictionaries({"token_ids": BAD_TOKEN_LISTS}),
        st.just("token_ids"),
    ),
    st.tuples(
        st.just("POST"),
        st.just("/sequences"),
        st.fixed_dictionaries({"text": st.one_of(st.just(""), st.just("é" * 1025), _not(str, JUNK))}),
        st.just("text"),
    ),
    st.tuples(
        st.just("POST"),
        st.just("/sequences"),
        st.fixed_dictionaries({"text": st.just("ok"), "seq_id": BAD_IDS}),
        st.just("seq_id"),
    ),
    st.tuples(
        st.just("POST"),
        st.just("/sequences"),
        st.fixed_dictionaries(
            {
                "text": st.just("ok"),
                "extra_key": st.one_of(st.just("k" * 65), _not(str, JUNK).filter(lambda v: v is not None)),
            }
        ),
        st.just("extra_key"),
    ),
    st.tuples(
        st.just("POST"),
        st.just("/sequences"),
        st.just({"text": "a", "token_ids": [1]}),
        st.just("text or token_ids"),
    ),
    st.tuples(
        st.just("POST"),
        st.just("/sequences"),
        st.fixed_dictionaries({"text": st.just("ok"), "surprise": JUNK}),
        st.just("surprise"),
    ),
    st.tuples(
        st.just("POST"),
        st.just("/sequences/fz/generate"),
        st.fixed_dictionaries(
            {"max_new_tokens": st.one_of(st.integers(257, 2**40), st.integers(-5, 0), _not(int, JUNK))}
        ),
        st.just("max_new_tokens"),
    ),
    st.tuples(
        st.just("POST"),
        st.just("/sequences/fz/generate"),
        st.fixed_dictionaries(
            {"temperature": st.one_of(st.floats(10.001, 1e300), st.floats(max_value=-1e-9), st.just("hot"))}
        ),
        st.just("temperature"),
    ),
    st.tuples(
        st.just("POST"),
        st.just("/sequences/fz/generate"),
        st.fixed_dictionaries({"seed": st.one_of(st.integers(2**32, 2**70), st.integers(max_value=-1))}),
        st.just("seed"),
    ),
    st.tuples(
        st.just("POST"),
        st.just("/sequences/fz/append"),
        st.fixed_dictionaries({"token_ids": BAD_TOKEN_LISTS}),
        st.just("token_ids"),
    ),
    st.tuples(
        st.just("POST"),
        st.just("/sequences/fz/fork"),
        st.fixed_dictionaries({"child_id": BAD_IDS}),
        st.just("child_id"),
    ),
    st.tuples(
        st.sampled_from(["GET", "DELETE"]),
        st.sampled_from(["/sequences/-x", "/sequences/" + "y" * 65, "/sequences/a b"]),
        st.none(),
        st.just("seq_id"),
    ),
    st.tuples(
        st.just("POST"),
        st.just("/sequences"),
        st.binary(max_size=20).map(lambda b: b"\xff{" + b),
        st.just("body"),
    ),
)


@pytest.mark.slow
@settings(
    max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(request=BAD_REQUESTS)
def test_bad_input_is_4xx_names_the_field_and_changes_nothing(client, request):
    method, path, body, field = request
    if "fz" in path:  # a live sequence for the per-sequence endpoints (409 once it exists)
        client.post("/sequences", json={"seq_id": "fz", "text": "fuzz me"})
    before = client.get("/snapshot").json()
    content = body if isinstance(body, bytes) else (json.dumps(body) if body is not None else None)
    r = client.request(method, path, content=content, headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    if r.status_code == 422:
        assert field.split()[0] in r.text  # FastAPI's "loc" or the message names the field
    assert client.get("/snapshot").json() == before


# ---- many clients at once ------------------------------------------------------------------


@pytest.mark.slow
def test_32_clients_x_50_requests_leave_a_consistent_pool(server):
    live_by_client: list[set] = [set() for _ in range(32)]
    failures: list = []
    c = httpx.Client(base_url=server.url, timeout=120, limits=httpx.Limits(max_connections=32))  # shared

    def run(k: int) -> None:
        rng = np.random.default_rng(k)
        live = live_by_client[k]
        for i in range(50):
            r = rng.random()
            try:
                if not live or r < 0.3:
                    seq_id = f"c{k}-{i}"
                    text = ["shared system prompt: ", "other prefix "][k % 2] + f"{k}/{i}"
                    res = c.post("/sequences", json={"seq_id": seq_id, "text": text})
                    if res.status_code == 201:
                        live.add(seq_id)
                    expect = (201, 503)
                elif r < 0.55:
                    res = c.post(f"/sequences/{sorted(live)[0]}/generate", json={"max_new_tokens": 1})
                    expect = (200, 503)
                elif r < 0.65:
                    child = f"c{k}-{i}-f"
                    res = c.post(f"/sequences/{sorted(live)[-1]}/fork", json={"child_id": child})
                    live.add(child)
                    expect = (201,)
                elif r < 0.85:
                    res = c.delete(f"/sequences/{live.pop()}")
                    expect = (204,)
                else:
                    res = c.get("/snapshot" if r < 0.93 else "/metrics")
                    expect = (200,)
                if res.status_code not in expect:
                    failures.append((k, i, res.status_code, res.text[:200]))
            except httpx.HTTPError as exc:
                failures.append((k, i, repr(exc)))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    try:
        assert c.get("/invariants").json() == {"ok": True}
        snap = c.get("/snapshot").json()
        consistent(snap)
        mine = {s for s in snap["seq_ids"] if s.startswith("c")}
        assert mine == set().union(*live_by_client)
        for seq_id in mine:
            c.delete(f"/sequences/{seq_id}")
    finally:
        c.close()


# ---- auth, binding, restart with a write-ahead log -----------------------------------------


@pytest.mark.slow
def test_bearer_token_guards_every_endpoint():
    with ServerProcess("--num-pages", "16", token="s3cret") as server:
        with httpx.Client(base_url=server.url) as c:
            for path in (
                "/health",
                "/snapshot",
                "/metrics",
                "/docs",
                "/openapi.json",
                "/no-such-page",
            ):
                r = c.get(path)
                assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
                assert c.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401
                assert c.get(path, headers={"Authorization": "Basic s3cret"}).status_code == 401
            assert c.post("/sequences", json={"text": "x"}).status_code == 401
            assert c.get("/snapshot").status_code == 401
            ok = {"Authorization": "Bearer s3cret"}
            assert c.get("/health", headers=ok).status_code == 200
            assert c.post("/sequences", json={"text": "hi"}, headers=ok).status_code == 201
            assert c.get("/metrics", headers=ok).status_code == 200


@pytest.mark.slow
def test_without_a_token_no_header_is_needed_and_loopback_is_the_default(server, client):
    assert client.get("/health").status_code == 200
    assert server.url.startswith("http://127.0.0.1:")


@pytest.mark.slow
def test_restart_with_wal_recovers_the_state(tmp_path):
    store = str(tmp_path / "store")
    args = ("--num-pages", "32", "--page-size", "4", "--wal", store, "--fsync", "batch 4")
    with ServerProcess(*args, via_cli=True) as server:  # the real `python -m pagedkv serve`
        with httpx.Client(base_url=server.url) as c:
            c.post("/sequences", json={"seq_id": "keep", "text": "durable pages"})
            c.post("/sequences/keep/generate", json={"max_new_tokens": 4})
            c.post("/sequences/keep/fork", json={"child_id": "twin"})
            c.post("/sequences/twin/append", json={"text": "!"})
            c.post("/sequences", json={"seq_id": "gone", "text": "durable pages too"})
            c.delete("/sequences/gone")
            assert c.post("/checkpoint").status_code == 200
            c.post("/sequences/keep/generate", json={"max_new_tokens": 2})
            before = c.get("/snapshot").json()
            keep = c.get("/sequences/keep").json()
        server.stop(signal.SIGKILL)  # a crash: no shutdown hook runs
    with ServerProcess(*args) as server:
        with httpx.Client(base_url=server.url) as c:
            assert c.get("/snapshot").json() == before
            assert c.get("/sequences/keep").json() == keep
            # Decoding continues from the recovered cache: still equal to dense recompute.
            r = c.post("/sequences/keep/generate", json={"max_new_tokens": 3})
            assert r.json()["new_token_ids"] == MODEL.generate_reference(keep["token_ids"], 3)
            after = c.get("/snapshot").json()
        # Graceful: uvicorn finishes, the engine syncs and closes its log (releasing the
        # store's lock), then uvicorn re-raises the SIGTERM it caught.
        assert server.stop() in (0, -signal.SIGTERM)
    with recover(store) as manager:
        assert manager.recovery["torn_bytes"] == 0
        assert snapshot_json(manager.snapshot()) == after


def test_serve_is_listed_binds_loopback_and_demo_does_not_import_fastapi():
    code = (
        "import sys, contextlib, io\n"
        "from pagedkv.cli import build_parser, main\n"
        "assert 'serve' in build_parser().format_help()\n"
        "with contextlib.redirect_stdout(io.StringIO()): main(['demo'])\n"
        "print(sorted(m for m in ('fastapi', 'uvicorn', 'starlette') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    from pagedkv.cli import build_parser

    serve = build_parser().parse_args(["serve"])
    assert (serve.host, serve.port, serve.wal, serve.fsync) == ("127.0.0.1", 8000, None, "always")


# ---- the engine underneath: a request reserves exactly the pages it will take --------------


def _engine_with(prompt_len: int, fork: bool) -> tuple[ServiceEngine, str]:
    engine = ServiceEngine(num_pages=32, page_size=4)
    engine.create(list(range(1, prompt_len + 1)), "a")
    if fork:  # "b" shares every page of "a", its partial last page too
        engine.fork("a", "b")
    return engine, "b" if fork else "a"


@pytest.mark.parametrize(
    "prompt_len, fork, n",
    [
        (4, False, 1),
        (4, False, 5),
        (5, False, 3),
        (5, False, 4),
        (5, True, 1),
        (5, True, 4),
        (7, True, 9),
        (8, True, 1),
    ],
)
def test_a_request_fits_exactly_when_the_pages_it_takes_are_available(prompt_len, fork, n):
    """The oracle: the allocations the same append makes in a roomy pool. With that many
    pages available the append succeeds; with one fewer it is refused and changes nothing."""
    roomy, target = _engine_with(prompt_len, fork)
    before = roomy.pool.stats.allocations
    roomy.append(target, [9] * n)
    needed = roomy.pool.stats.allocations - before
    for spare in (needed, needed - 1):
        if spare < 0:
            continue
        engine, target = _engine_with(prompt_len, fork)
        fill = engine.pool.num_available_pages - spare
        engine.create([200 + k % 50 for k in range(4 * fill)], "filler")  # `fill` pages
        assert engine.pool.num_available_pages == spare
        snapshot = engine.snapshot()
        if spare == needed:
            assert engine.append(target, [9] * n)["num_tokens"] == prompt_len + n
        else:
            with pytest.raises(OutOfPagesError):
                engine.append(target, [9] * n)
            assert engine.snapshot() == snapshot
        engine.check()


def test_describe_error_gives_the_status_line_the_field_and_the_message_wrapped_between_words():
    from types import SimpleNamespace

    from pagedkv.service.answers import describe_error

    body = {"error": "bad_request", "detail": [{"loc": ["body", "text"], "msg": "word " * 30}]}
    response = SimpleNamespace(
        status_code=422, reason_phrase="Unprocessable Content", headers={}, json=lambda: body
    )
    lines = describe_error(response, width=40).splitlines()
    assert lines[0] == "HTTP 422 Unprocessable Content | error: bad_request | Retry-After: None"
    assert lines[1] == "  loc: ['body', 'text']"
    assert all(len(line) <= 40 and line.split()[-1] == "word" for line in lines[2:])
    assert sum(line.count("word") for line in lines[2:]) == 30
