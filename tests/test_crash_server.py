"""kill -9 in the middle of requests: the real server with a write-ahead log, restarted.

Each seed starts `python -m pagedkv serve --wal DIR` on loopback, drives it with one
client issuing generates and appends back to back, each with its own Idempotency-Key, and
SIGKILLs the server at a random moment of a random generate (so most kills land inside
it: the server decodes token by token, logging each one). After the restart:

- no operation is half-applied: every sequence holds exactly the tokens of the operations
  acknowledged before the kill, plus either all or none of the one in flight;
- a retry with the in-flight operation's key applies it exactly once; a retry of every
  acknowledged one returns its original answer (`Idempotent-Replayed: true`) and changes
  nothing, so keys survive recovery;
- the final tokens equal dense generation without any cache (`TinyLM.generate_reference`),
  the independent oracle;
- the server says what recovery discarded (`pagedkv_recovery_discarded_*` metrics).
"""

from __future__ import annotations

import signal
import threading
import time

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from pagedkv import TinyLM
from pagedkv.service.serve import ServerProcess

pytestmark = pytest.mark.slow  # every test kills a real server process with SIGKILL

MODEL = TinyLM.pretrained()  # what the server runs by default
SEEDS = range(8)
ROLLED_BACK: list[int] = []  # per seed: records recovery rolled back (checked across seeds)


def _metric(client: httpx.Client, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(client.get("/metrics").text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    raise KeyError(name)


def _op(rng: np.random.Generator, i: int, seqs: list[str]) -> tuple:
    """(key, seq_id, path, body, tokens it adds) of operation i."""
    seq_id = seqs[int(rng.integers(len(seqs)))]
    if rng.random() < 0.8:
        n = int(rng.integers(16, 48))
        return f"op-{i}", seq_id, "generate", {"max_new_tokens": n}, n
    ids = [int(t) for t in rng.integers(0, 256, int(rng.integers(1, 24)))]
    return f"op-{i}", seq_id, "append", {"token_ids": ids}, len(ids)


@pytest.mark.parametrize("seed", SEEDS)
def test_kill_9_mid_generate_is_all_or_nothing_and_retries_apply_once(tmp_path, seed):
    rng = np.random.default_rng(seed)
    store = str(tmp_path / "store")
    args = ("--wal", store, "--fsync", "never", "--num-pages", "512", "--page-size", "4")
    seqs = ["a", "b"]
    done: list[tuple] = []  # (op, answer) acknowledged before the kill
    in_flight: list[tuple] = []
    server = ServerProcess(*args)
    with httpx.Client(base_url=server.url, timeout=30) as c:
        for s in seqs:
            r = c.post(
                "/sequences",
                json={"seq_id": s, "text": f"prompt {s} {seed}"},
                headers={"Idempotency-Key": f"create-{s}"},
            )
            assert r.status_code == 201
        kill_at, took, killer = int(rng.integers(2, 8)), 0.05, None
        for i in range(12):  # the kill comes during operation kill_at or the next generate
            op = _op(rng, i, seqs)
            if i >= kill_at and killer is None and op[2] == "generate":
                # a random moment within what the last generate took
                killer = threading.Timer(float(rng.uniform(0.0, took)), server.process.kill)
                killer.start()
            start = time.perf_counter()
            try:
                r = c.post(f"/sequences/{op[1]}/{op[2]}", json=op[3], headers={"Idempotency-Key": op[0]})
            except httpx.HTTPError:
                in_flight.append(op)
                break
            assert r.status_code == 200, r.text
            done.append((op, r.json()))
            if op[2] == "generate":
                took = time.perf_counter() - start
        if killer is None or not in_flight:  # the kill came too late: make it come now
            server.process.kill()
            in_flight.append(None)
        else:
            killer.join()
    assert server.stop() == -signal.SIGKILL

    with ServerProcess(*args) as restarted, httpx.Client(base_url=restarted.url, timeout=30) as c:
        prompt = {s: len(f"prompt {s} {seed}".encode()) for s in seqs}
        acked = {s: prompt[s] + sum(op[4] for op, _ in done if op[1] == s) for s in seqs}
        now = {s: c.get(f"/sequences/{s}").json()["num_tokens"] for s in seqs}
        ROLLED_BACK.append(_metric(c, "pagedkv_recovery_discarded_records", reason="uncommitted"))
        (op,) = in_flight
        if op is None:  # killed between requests: exactly the acknowledged ones
            assert now == acked
            return
        applied = now[op[1]] == acked[op[1]] + op[4]
        # all or nothing: the acknowledged operations, and all or none of the one in flight
        assert now == {**acked, op[1]: acked[op[1]] + (op[4] if applied else 0)}

        r = c.post(f"/sequences/{op[1]}/{op[2]}", json=op[3], headers={"Idempotency-Key": op[0]})
        assert r.status_code == 200 and (r.headers.get("idempotent-replayed") == "true") == applied
        assert r.json()["num_tokens"] == acked[op[1]] + op[4]  # applied exactly once
        for old, answer in done[-5:]:  # keys survived recovery: the first answer, unchanged
            again = c.post(f"/sequences/{old[1]}/{old[2]}", json=old[3], headers={"Idempotency-Key": old[0]})
            assert again.headers.get("idempotent-replayed") == "true" and again.json() == answer
        final = {s: c.get(f"/sequences/{s}").json() for s in seqs}
        assert {s: q["num_tokens"] for s, q in final.items()} == {**acked, op[1]: acked[op[1]] + op[4]}
        assert c.get("/invariants").json() == {"ok": True}

    for s in seqs:  # the oracle: dense generation with no cache, op by op
        tokens = list(f"prompt {s} {seed}".encode())
        for o in [o for o, _ in done] + in_flight:
            if o[1] == s:
                tokens += MODEL.generate_reference(tokens, o[4]) if o[2] == "generate" else o[3]["token_ids"]
        assert final[s]["token_ids"] == tokens


def test_some_kills_landed_inside_a_transaction():
    """The kills above are only a test of rollback if some cut a request off half-way."""
    if len(ROLLED_BACK) < len(SEEDS):
        pytest.skip("needs the kill -9 tests of this module to have run")
    print(
        f"{len(ROLLED_BACK)} kills; recovery rolled back a cut-off request after "
        f"{sum(n > 0 for n in ROLLED_BACK)}; 0 operations half-applied"
    )
    assert sum(n > 0 for n in ROLLED_BACK) >= 2, ROLLED_BACK


def test_the_crash_drill_kills_the_server_right_after_the_record_it_names(tmp_path):
    """`crash_during` (notebook 07) restarts the server with the log's crash drill 20 records
    ahead: the generate is cut off with exactly 20 of its records on disk (its `begin` and
    19 operations, no `commit`), on any machine however busy. Oracle: the log file itself
    (`read_log`) and the state before the request."""
    from pagedkv.service.wal import read_log
    from pagedkv.service.workload import crash_during

    store = tmp_path / "store"
    args = ("--num-pages", "128", "--page-size", "4", "--wal", str(store), "--fsync", "never")
    server = ServerProcess(*args)
    httpx.post(f"{server.url}/sequences", json={"seq_id": "story", "text": "Once upon a time"})
    before = httpx.get(f"{server.url}/sequences/story").json()
    assert crash_during(server, "/sequences/story/generate", {"max_new_tokens": 80}, key="k", records=20)
    records, _ = read_log(store / "wal.log")
    tail = [r.payload for r in records][-20:]
    assert tail[0].get("op") == "begin" and all(p.get("op") != "commit" for p in tail)
    with ServerProcess(*args) as again, httpx.Client(base_url=again.url) as client:
        assert _metric(client, "pagedkv_recovery_discarded_records", reason="uncommitted") == 20
        assert client.get("/sequences/story").json() == before
    with pytest.raises(ValueError, match="die_after_record"):
        ServerProcess(*args, die_after_record=0)


@pytest.mark.parametrize("records", [1, 10])
def test_a_cut_off_request_that_evicted_cached_pages_gets_them_dropped(tmp_path, records):
    """`crash_after_eviction` (notebook 07b's drill): recovery makes FREE exactly the
    CACHED pages the cut-off records evicted, so the freed prompt hits only the pages left.
    Oracle: the log file read before the restart (its `evict` fields) against the restarted
    server's own metric; with 1 record (the `begin` alone) nothing was evicted or dropped.
    With 10 records the last one is the 5th append, whose page got no K/V before the crash:
    that page alone still matches its logged CRC, and recovery drops it all the same."""
    from pagedkv.service.workload import crash_after_eviction

    drill = crash_after_eviction(tmp_path / "store", records=records)
    assert drill["old_pages"] == [0, 1, 2, 3]
    assert drill["dropped"] == len(drill["evicted"]) == (2 if records == 10 else 0)
    assert drill["crc_still_matches"] == (drill["evicted"][-1:] if records == 10 else [])
    kept = 0
    while kept < 4 and drill["old_pages"][kept] not in drill["evicted"]:
        kept += 1
    # a prompt's last token is always computed, so its last full page is never a hit
    assert drill["hit_tokens"] == 4 * min(kept, (16 - 1) // 4)
