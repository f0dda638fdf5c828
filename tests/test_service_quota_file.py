"""The tokens file and the quota options: what a teacher writes, and the one-line refusals.

The quotas themselves are tested on the real server in test_service_quota.py."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from pagedkv.service import clients
from pagedkv.service.clients import MAX_CLIENTS, Client, parse_tokens_file, read_clients
from pagedkv.service.serve import add_arguments

DEFAULTS = {"pages": 8, "sequences": 4, "inflight": 2}


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_a_file_a_teacher_writes(tmp_path):
    path = tmp_path / "tokens"
    path.write_text("# class of 2026\n\nalice:s3cret:with:colons\n  bob:t0k pages=32 inflight=1  \n")
    assert parse_tokens_file(path, DEFAULTS) == [
        Client("alice", "s3cret:with:colons", 8, 4, 2),
        Client("bob", "t0k", 32, 4, 1),
    ]
    assert "s3cret" not in repr(parse_tokens_file(path, DEFAULTS))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("alice", "line 1: expected 'name:token'"),
        ("al ice:Zq9tok", "line 1: expected 'name:token'"),
        ("-alice:Zq9tok", "line 1: expected 'name:token'"),
        ("alice:", "line 1: client 'alice' has an empty token"),
        ("alice:Zq9tok\nalice:Zq9other", "line 2: client 'alice' is named twice"),
        ("alice:Zq9tok\n# bob\nbob:Zq9tok", "line 3: this token is already another client's"),
        ("alice:Zq9tok pages=0", "line 1: pages must be a whole number >= 1, got '0'"),
        ("alice:Zq9tok pages=x", "line 1: pages must be a whole number >= 1, got 'x'"),
        ("alice:Zq9tok memory=3", "line 1: expected pages=N, sequences=N or inflight=N, got 'memory=3'"),
        ("# nobody\n", "names no client"),
    ],
)
def test_a_bad_file_is_refused_naming_the_line_never_the_token(tmp_path, text, message):
    path = tmp_path / "tokens"
    path.write_text(text)
    with pytest.raises(ValueError, match="--tokens-file") as info:
        parse_tokens_file(path, DEFAULTS)
    assert message in str(info.value) and str(path) in str(info.value)
    assert "Zq9" not in str(info.value)


def test_at_most_max_clients(tmp_path):
    path = tmp_path / "tokens"
    path.write_text("".join(f"c{i}:t{i}\n" for i in range(MAX_CLIENTS + 1)))
    with pytest.raises(ValueError, match=f"line {MAX_CLIENTS + 1}: more than {MAX_CLIENTS} clients"):
        parse_tokens_file(path, DEFAULTS)


def test_default_quotas_are_half_the_server_and_options_override_them(tmp_path):
    path = tmp_path / "tokens"
    path.write_text("alice:a\nbob:b sequences=2\n")
    alice, bob = read_clients(_args("--tokens-file", str(path), "--num-pages", "100"))
    assert (alice.pages, alice.sequences, alice.inflight) == (50, 512, 16)
    assert (bob.pages, bob.sequences, bob.inflight) == (50, 2, 16)
    alice, _ = read_clients(_args("--tokens-file", str(path), "--quota-pages", "7", "--quota-inflight", "3"))
    assert (alice.pages, alice.inflight) == (7, 3)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--quota-pages", "0"), "--quota-pages must be at least 1, got 0"),
        (("--token", "x"), "give --tokens-file or --token, not both"),
        (("--token-file", "x"), "give --tokens-file or --token-file, not both"),
    ],
)
def test_bad_options_are_refused_naming_them(tmp_path, argv, message):
    path = tmp_path / "tokens"
    path.write_text("alice:a\n")
    with pytest.raises(ValueError, match=message):
        read_clients(_args("--tokens-file", str(path), *argv))


def test_quotas_need_a_tokens_file():
    assert read_clients(_args()) is None
    with pytest.raises(ValueError, match="--quota-\\* options need --tokens-file"):
        read_clients(_args("--quota-sequences", "3"))


def test_serve_refuses_a_bad_tokens_file_with_one_line_and_exit_2(tmp_path):
    path = tmp_path / "tokens"
    path.write_text("alice:secret-one\nalice:secret-two\n")
    cmd = [sys.executable, "-m", "pagedkv", "serve", "--tokens-file", str(path), "--port", "0"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, out.stderr
    assert f"--tokens-file {path}, line 2: client 'alice' is named twice" in lines[0]
    assert "secret" not in out.stderr


def test_the_help_documents_the_file_format():
    parser = argparse.ArgumentParser()
    clients.add_arguments(parser)
    text = " ".join(parser.format_help().split())
    assert "name:token [pages=N] [sequences=N] [inflight=N]" in text
    assert all(f"--quota-{q}" in text for q in clients.QUOTAS)
