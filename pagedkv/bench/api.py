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
"""

from __future__ import annotations

import argparse
import shutil
import tempfile

from pagedkv.bench import Report, time_threads

HELP = "HTTP API requests/s (health, create+free, generate, metrics; with and without a WAL)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--requests", type=int, default=800, help="requests per kind and server")
    parser.add_argument("--clients", type=int, default=8, help="client threads")
    parser.add_argument(
        "--max-inflight", type=int, default=None, help="the server's limit (default: its own)"
    )


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
) -> Report:
    import httpx

    from pagedkv.service.serve import ServerProcess

    if quick:
        requests, clients = 80, 4
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
    return Report(
        title=(f"bench api: {clients} client threads, keep-alive httpx, 256 pages of 16, loopback"),
        columns=["server", "request", "served", "503s", "requests/s", "ms/request (per client)"],
        rows=rows,
        notes=["create+free counts both requests; generate decodes 1 token per request"],
        data=data,
    )
