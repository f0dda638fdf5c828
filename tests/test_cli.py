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


def test_demo_counts_tokens_and_slots_as_the_notebooks_do():
    """Notebook 00 section 4 and the dashboard: request_A's prompt is 18 tokens, so its
    first generated token is token 19; slot = page x 4 + place, so page 4, place 2 is slot 18.
    Its token 21 opens page 5 (step 4); request_B's first eviction is at step 43, where its
    token 45 opens page 8, the LRU victim (slot 32 = 8 x 4 + 0)."""
    out = run("demo")
    lines = [line.strip() for line in out.splitlines()]
    assert "step  2: request_A appends its token 19, id 32 (a space), in slot 18 (page 4, place 2)" in lines
    assert "step  4: allocate page 5 for request_A: room for its tokens 21-24" in lines
    assert "request_A appends its token 21, id 104 'h', in slot 20 (page 5, place 0)" in lines
    assert "step 43: evict (LRU victim) page 8 for request_B" in lines
    assert "request_B appends its token 45, id 114 'r', in slot 32 (page 8, place 0)" in lines
    first_eviction = lines.index("step 43: evict (LRU victim) page 8 for request_B")
    assert not any("evict" in line for line in lines[:first_eviction] if line.startswith("step"))


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
