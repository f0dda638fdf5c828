"""Start-up: what `serve` imports before it runs, and the start-up benchmark's shape.

The speed itself is measured by `python -m pagedkv bench startup`, never asserted here.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from pagedkv.bench import startup

# Real servers on 127.0.0.1: part of `make test`, not of `make test-fast`.
pytestmark = pytest.mark.slow

# Loaded only when the server really starts (FastAPI, uvicorn, the store) or only by the
# test launcher (ServerProcess): `serve --help` and argument parsing need none of them.
NOT_FOR_HELP = (
    "fastapi",
    "uvicorn",
    "starlette",
    "pydantic",
    "prometheus_client",
    "pagedkv.service.durable",
    "pagedkv.service.recovery",
    "pagedkv.service.wal",
    "pagedkv.service.launcher",
    "http.client",
    "subprocess",
    "tempfile",
)


def test_serve_arguments_import_nothing_the_server_does_not_need_yet():
    code = (
        "import argparse, sys\n"
        "import pagedkv.service.serve as serve\n"
        "parser = argparse.ArgumentParser()\n"
        "serve.add_arguments(parser)\n"
        "parser.parse_args(['--wal', 'x'])\n"
        f"print([m for m in {NOT_FOR_HELP!r} if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_server_process_is_still_importable_from_serve():
    from pagedkv.service.launcher import ServerProcess
    from pagedkv.service.serve import ServerProcess as FromServe

    assert FromServe is ServerProcess


def test_startup_bench_measures_the_three_starts():
    report = startup.run(quick=True)
    assert [row[0] for row in report.rows] == list(startup.TARGETS)
    assert all(0 < row[1] < 60 and 0 <= row[2] < 60 for row in report.rows)
    assert report.data["operations"] == 1000 and report.data["records"] > 1000


def _imported_by(*argv: str) -> set[str]:
    """Every module `python -m pagedkv ARGV` imports (read from -X importtime)."""
    cmd = [sys.executable, "-X", "importtime", "-m", "pagedkv", *argv]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return {
        line.rsplit("|", 1)[1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")
    }


def test_serve_help_through_the_cli_imports_no_server_library():
    loaded = _imported_by("serve", "--help")
    assert "pagedkv.service.serve" in loaded and "pagedkv.service.clients" in loaded
    too_early = {m for m in loaded if m.split(".")[0] in NOT_FOR_HELP or m in NOT_FOR_HELP}
    too_early |= {m for m in loaded if m.startswith(("pagedkv.model", "pagedkv.engine", "pagedkv.bench"))}
    too_early |= {m for m in loaded if m.startswith(("pagedkv.viz", "pagedkv.scenarios", "matplotlib"))}
    assert not too_early, sorted(too_early)
