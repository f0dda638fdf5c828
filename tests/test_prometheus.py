"""A real Prometheus scrapes the real server: what it stores equals the server's counters.

Starts `/usr/bin/prometheus` (the Debian package; `.ci/run` installs it) on a free loopback
port with a temporary config and storage, scraping `python -m pagedkv serve --vllm-metrics`
every second while clients create prompts that share prefixes. After the load stops and a
scrape has seen the final state, Prometheus's HTTP API must report the hit ratio and the
usage the server itself reports in `/health` — under the pagedkv names and vLLM's. Then
`promtool check metrics` must accept the exposition; its only complaint about the vLLM
names is their colon, which vLLM's own names have too (promtool reserves colons for
recording rules). Without Prometheus the tests skip
(fail when CI=true, where they must run).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time

import httpx
import pytest

from pagedkv.service.serve import ServerProcess

# Real servers on 127.0.0.1: part of `make test`, not of `make test-fast`.
pytestmark = pytest.mark.slow

PROMETHEUS, PROMTOOL = "/usr/bin/prometheus", "/usr/bin/promtool"


def _need(binary: str) -> None:
    if not os.access(binary, os.X_OK):
        reason = f"{binary} not found (apt-get install prometheus)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true: {reason}", pytrace=False)
        pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    with ServerProcess("--num-pages", "1024", "--page-size", "4", "--vllm-metrics") as process:
        yield process


@pytest.fixture
def prometheus(server, tmp_path):
    _need(PROMETHEUS)
    target = server.url.removeprefix("http://")
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        f"scrape_configs:\n  - job_name: pagedkv\n    static_configs:\n"
        f"      - targets: ['{target}']\n"
    )
    port = _free_port()
    process = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):  # bounded: up to ~30 s for start-up
            try:
                if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        else:
            pytest.fail("prometheus did not become ready")
        yield url
    finally:
        process.terminate()
        process.wait(15)


def _query(url: str, expr: str) -> float | None:
    result = httpx.get(f"{url}/api/v1/query", params={"query": expr}).json()["data"]["result"]
    return float(result[0]["value"][1]) if result else None


def test_prometheus_reports_the_servers_hit_ratio_and_usage(server, prometheus):
    with httpx.Client(base_url=server.url, timeout=30) as c:
        deadline = time.monotonic() + 3
        for i in range(200):  # bounded; about 3 s of load
            if time.monotonic() > deadline:
                break
            c.post("/sequences", json={"seq_id": f"q{i}", "text": f"a shared system prompt, then {i}"})
            if i % 3 == 2:
                c.delete(f"/sequences/q{i - 1}")
        own = c.get("/health").json()  # the server's own counters, final
    want_ratio = own["prefix_hits"] / own["prefix_queries"]
    assert 0 < want_ratio < 1 and 0 < own["usage"] < 1
    for _ in range(100):  # bounded: wait for a scrape that saw the final state
        if _query(prometheus, "pagedkv_prefix_cache_queries_total") == own["prefix_queries"]:
            break
        time.sleep(0.2)
    ratio = "pagedkv_prefix_cache_hits_total / pagedkv_prefix_cache_queries_total"
    vllm_ratio = "vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total"
    assert _query(prometheus, ratio) == pytest.approx(want_ratio, rel=1e-12)
    assert _query(prometheus, "pagedkv_prefix_cache_hit_ratio") == pytest.approx(want_ratio)
    assert _query(prometheus, vllm_ratio) == pytest.approx(want_ratio, rel=1e-12)
    assert _query(prometheus, "pagedkv_kv_cache_usage_perc") == pytest.approx(own["usage"])
    assert _query(prometheus, "vllm:kv_cache_usage_perc") == pytest.approx(own["usage"])
    assert _query(prometheus, "pagedkv_num_preemptions_total") == 0  # present, at 0


def test_promtool_accepts_the_exposition_and_no_created_series(server):
    _need(PROMTOOL)
    text = httpx.get(f"{server.url}/metrics").text
    assert "_created" not in text
    assert "vllm:num_preemptions_total" in text and "pagedkv_recovery" not in text  # no WAL
    pagedkv_only = "".join(line for line in text.splitlines(True) if "vllm:" not in line)
    assert _promtool(pagedkv_only) == []
    complaints = _promtool(text)
    assert complaints and all(
        c.startswith("vllm:") and c.endswith("metric names should not contain ':'") for c in complaints
    ), complaints


def _promtool(text: str) -> list[str]:
    """promtool check metrics's complaints about an exposition ([] when it passes)."""
    checked = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    complaints = (checked.stdout + checked.stderr).strip().splitlines()
    assert (checked.returncode == 0) == (not complaints), complaints
    return complaints
