"""The command line: `python -m pagedkv demo` and `bench ops` run as a user would run them."""

from __future__ import annotations

import json
import subprocess
import sys


def run(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pagedkv", *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_demo_walks_request_a_then_b():
    out = run("demo")
    assert "request_A" in out and "request_B" in out
    assert "prefix hit: 16 tokens" in out
    assert "evict" in out


def test_bench_ops_quick_writes_json(tmp_path):
    path = tmp_path / "ops.json"
    out = run("bench", "ops", "--quick", "--json", str(path))
    assert "entries/s" in out
    report = json.loads(path.read_text())
    modes = {row["mode"]: row for row in report["rows"]}
    assert len(modes) == 3  # sha256, xxhash, caching off
    hashing = report["data"]["hashing"]
    assert hashing["entries_per_s"] > 0 and hashing["prefix_hit_blocks"] > 0
    assert report["data"]["no_hashing"]["prefix_hit_blocks"] == 0


def test_unknown_command_fails_with_usage():
    done = subprocess.run([sys.executable, "-m", "pagedkv", "nope"], capture_output=True, text=True)
    assert done.returncode == 2 and "usage" in done.stderr
