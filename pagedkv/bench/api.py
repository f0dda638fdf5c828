"""bench api: requests/s of the HTTP service, over real HTTP on loopback.

Starts `python -m pagedkv serve` in a child process (256 pages of 16; once without a
write-ahead log, once with one under fsync "always") and drives it from client threads
sharing one keep-alive httpx client. Request kinds, each timed on its own:

- `GET /health`: the framework's floor (routing, thread pool, JSON),
- `POST /sequences` + `DELETE`: admit and prefill a 48-byte prompt (half share a prefix), free,
- `POST .../generate` of 1 token: one decode step of TinyLM through the paged cache,
- `GET /metrics`: a Prometheus scrape.

Past `--max-inflight` requests in flight (the server's back-pressure, default 32) the
server answers 503 with Retry-After at once instead of queueing; those are counted in the
"503s" column and left out of requests/s, which counts served requests only.

The clients run in this process and share its two cores with the server, so the numbers
are a floor for what the server does, not a ceiling.

Then liveness under load (issue 24: `/health` p99 <= 50 ms): a server with room for
every sequence is driven past its in-flight cap by `--load-clients` threads (64) in a child
process, each sending `--load-requests` 4-token generates back to back (503s included,
never waiting), while this process probes `/health` every 10 ms on its own connection; the
p99 of those probes is printed beside the p99 of the same probes on the idle server.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time

from pagedkv.bench import Report, time_threads

HELP = "HTTP API requests/s (health, create+free, generate, metrics; with and without a WAL)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--requests", type=int, default=800, help="requests per kind and server")
    parser.add_argument("--clients", type=int, default=8, help="client threads")
    parser.add_argument(
        "--max-inflight", type=int, default=None, help="the server's limit (default: its own)"
    )
    parser.add_argument("--load-clients", type=int, default=64, help="clients driving the liveness test")
    parser.add_argument("--load-requests", type=int, default=40, help="generates per load client")


def _drive(client, kind: str, requests: int, clients: int, seed: int) -> tuple[float, int]:
    """(seconds, 503 answers) for `requests` requests of one kind over `clients` threads."""
    errors: list[str] = []
    busy: list[int] = []

    def work(k: int) -> None:
        for i in range(requests // clients):
            if kind == "health":
                responses = [client.get("/health")]
            elif kind == "create+free":
                text = (
                    "a shared system prompt, then " if i % 2 else f"{seed}-{k}-{i} unshared "
                ) + f"{k}:{i}"
                created = client.post("/sequences", json={"seq_id": f"b{k}-{i}", "text": text[:48]})
                responses = [created]
                if created.status_code != 503:  # refused: nothing to free (counted as 2)
                    responses.append(client.delete(f"/sequences/b{k}-{i}"))
                else:
                    busy.append(1)
            elif kind == "generate":
                responses = [client.post(f"/sequences/g{k}/generate", json={"max_new_tokens": 1})]
            else:
                responses = [client.get("/metrics")]
            busy.extend(1 for r in responses if r.status_code == 503)
            errors.extend(r.text[:100] for r in responses if r.status_code >= 300 and r.status_code != 503)

    seconds = time_threads(work, clients)
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed, e.g. {errors[0]}")
    return seconds, len(busy)


def run(
    *,
    quick: bool = False,
    seed: int = 0,
    requests: int = 800,
    clients: int = 8,
    max_inflight: int | None = None,
    load_clients: int = 64,
    load_requests: int = 40,
) -> Report:
    import httpx

    from pagedkv.service.serve import ServerProcess

    if quick:
        requests, clients, load_clients, load_requests = 80, 4, 16, 10
    limit = () if max_inflight is None else ("--max-inflight", str(max_inflight))
    rows: list[list[object]] = []
    data = {}
    store = tempfile.mkdtemp(prefix="pagedkv-bench-api-")
    try:
        for label, extra in (
            ("no WAL", ()),
            ("WAL, fsync always", ("--wal", f"{store}/s", "--fsync", "always")),
        ):
            with ServerProcess("--num-pages", "256", "--page-size", "16", *extra, *limit) as server:
                pool = httpx.Limits(max_connections=clients)
                assert server.url is not None  # set once the server answers /health
                with httpx.Client(base_url=server.url, timeout=120, limits=pool) as client:
                    for k in range(clients):  # the sequences the generate requests grow
                        client.post("/sequences", json={"seq_id": f"g{k}", "text": f"sequence {k} says"})
                    for kind in ("health", "create+free", "generate", "metrics"):
                        seconds, refused = _drive(client, kind, requests, clients, seed)
                        sent = requests // clients * clients * (2 if kind == "create+free" else 1)
                        done = sent - refused
                        rows.append(
                            [label, kind, done, refused, done / seconds, 1e3 * seconds / sent * clients]
                        )
                        data[f"{label}/{kind}"] = {
                            "requests_per_s": done / seconds,
                            "requests": done,
                            "refused_503": refused,
                        }
                    assert client.get("/invariants").json() == {"ok": True}
    finally:
        shutil.rmtree(store, ignore_errors=True)
    health = health_under_load(load_clients, load_requests)
    data["health_under_load"] = health
    return Report(
        title=(f"bench api: {clients} client threads, keep-alive httpx, 256 pages of 16, loopback"),
        columns=["server", "request", "served", "503s", "requests/s", "ms/request (per client)"],
        rows=rows,
        notes=[
            "create+free counts both requests; generate decodes 1 token per request",
            *_health_notes(health, load_clients),
        ],
        data=data,
    )


def load(url: str, clients: int, requests: int) -> None:
    """The liveness test's load (run in a child process): `clients` threads each sending
    `requests` 4-token generates back to back; prints {status: count} as JSON."""
    import httpx

    from pagedkv.bench import time_threads

    codes: list[int] = []
    with httpx.Client(base_url=url, timeout=120, limits=httpx.Limits(max_connections=clients)) as client:

        def work(k: int) -> None:
            for _ in range(requests):
                codes.append(client.post(f"/sequences/h{k}/generate", json={"max_new_tokens": 4}).status_code)

        time_threads(work, clients)
    print(json.dumps({str(c): codes.count(c) for c in sorted(set(codes))}), flush=True)


def _probe(clients: list, n: int, until=lambda: False) -> list[list[float]]:
    """Seconds each GET /health took, per client: up to `n` rounds, one client after the
    other, a round every 10 ms, until `until()`."""
    took: list[list[float]] = [[] for _ in clients]
    for _ in range(n):
        if until():
            break
        for client, times in zip(clients, took):
            start = time.perf_counter()
            response = client.get("/health")
            times.append(time.perf_counter() - start)
            if response.status_code != 200:
                raise RuntimeError(f"/health answered {response.status_code}: {response.text[:100]}")
        time.sleep(0.01)
    return took


def health_under_load(clients: int, requests: int) -> dict:
    """/health p50 and p99 (ms), idle and under `clients` load clients, on the API's port and
    on --health-port (health.py), probed in turns; and the load's answers."""
    import httpx
    import numpy as np

    from pagedkv.service.serve import ServerProcess

    with ServerProcess("--num-pages", "4096", "--page-size", "16", "--health-port", "0") as server:
        assert server.url is not None and server.health_url is not None
        with httpx.Client(base_url=server.url, timeout=60) as c:
            for k in range(clients):
                c.post("/sequences", json={"seq_id": f"h{k}", "text": f"liveness {k} says"})
        ports = [
            httpx.Client(base_url=url.removesuffix("/health"), timeout=30)
            for url in (server.url, server.health_url)
        ]
        idle = _probe(ports, 200)
        code = f"from pagedkv.bench.api import load; load({server.url!r}, {clients}, {requests})"
        child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)  # the load's threads connect and start
        busy = _probe(ports, 20_000, until=lambda: child.poll() is not None)
        answers = json.loads(child.communicate(timeout=600)[0] or "{}")
        for port in ports:
            port.close()
    result: dict = {"probes": len(busy[0]), "answers": answers}
    for name, times in (
        ("api idle", idle[0]),
        ("api load", busy[0]),
        ("port idle", idle[1]),
        ("port load", busy[1]),
    ):
        for q in (50, 99):
            result[f"{name} p{q} ms"] = float(np.percentile(times, q)) * 1e3
    return result


def _health_notes(health: dict, clients: int) -> list[str]:
    """The liveness lines under the table: p99 under load beside p99 idle, per port."""
    answers = health["answers"]
    refused = answers.get("503", 0) / max(1, sum(answers.values()))
    lines = [
        f"/health with {clients} clients past the in-flight cap ({refused:.0%} of their requests "
        f"answered 503), {health['probes']} probes per port; target p99 <= 50 ms:"
    ]
    for port, name in (("api", "API port (event loop)"), ("port", "--health-port (own thread)")):
        load, idle = health[f"{port} load p99 ms"], health[f"{port} idle p99 ms"]
        lines.append(
            f"  {name}: p99 {load:.1f} ms under load vs {idle:.1f} ms idle ({load / idle:.1f}x); "
            f"p50 {health[f'{port} load p50 ms']:.1f} vs {health[f'{port} idle p50 ms']:.1f} ms"
        )
    return lines
