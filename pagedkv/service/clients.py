"""Clients of a shared server: one bearer token per client, from a tokens file, each with quotas.

`serve --tokens-file PATH` reads a plain text file a teacher can write by hand, one client
per line:

    # name:token [pages=N] [sequences=N] [inflight=N]
    alice:8f3c0e5b9a7d4c21
    bob:1d9e77aa04c5b3f6    pages=32 sequences=8
    grader:0b5f2c9e81d4a7e3 inflight=4

- `name`: 1-32 of A-Z a-z 0-9 _ . - (starting with a letter or digit); it is the client's
  label in `/metrics`, never the token;
- `token`: everything after the first `:` up to the first space; no spaces, not empty;
- quotas, optional, override `--quota-pages`, `--quota-sequences`, `--quota-inflight`
  for that client: pages held (distinct pages in the block tables of its live sequences),
  live sequences, and requests in flight (`/health` and `/metrics` not counted).

Blank lines and lines starting with `#` are skipped. A name or token given twice, a bad
quota or more than `MAX_CLIENTS` clients is refused with the file and line number (and
never the token). The file replaces `--token` / `--token-file` / `$PAGEDKV_TOKEN`: a request
must carry one of its tokens (401 otherwise). Enforcement is in quota.py.

Defaults, so that no one client can take the whole server: half the pool's pages, half of
`--max-sequences`, half of `--max-inflight`. Lower them for a bigger class.

This module imports argparse-level things only, so `serve --help` stays quick. vLLM's
server takes one `--api-key`; per-key limits are usually a gateway's job (e.g. LiteLLM's
per-key budgets). Leaves out: reloading the file without a restart, hashed tokens on disk.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path

MAX_CLIENTS = 256  # clients in a tokens file: the bound on /metrics label values per family
QUOTAS = ("pages", "sequences", "inflight")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$")


@dataclass(frozen=True)
class Client:
    """One line of a tokens file, with its quotas resolved."""

    name: str
    token: str
    pages: int
    sequences: int
    inflight: int

    def limit(self, quota: str) -> int:
        return int(getattr(self, quota))

    def __repr__(self) -> str:  # never show the token (logs, tracebacks)
        quotas = ", ".join(f"{q}={self.limit(q)}" for q in QUOTAS)
        return f"Client({self.name!r}, {quotas})"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "clients and quotas (see pagedkv/service/clients.py)",
        "A request past one of its client's quotas is answered 429 with Retry-After and a JSON "
        "body naming the quota, its limit and the client's use; other clients are unaffected.",
    )
    group.add_argument(
        "--tokens-file",
        metavar="PATH",
        help="one client per line, 'name:token [pages=N] [sequences=N] [inflight=N]'; "
        "'#' starts a comment. Each client gets its own quotas; replaces --token",
    )
    for quota, what in (
        ("pages", "pages one client may hold (default: half of --num-pages)"),
        ("sequences", "live sequences one client may own (default: half of --max-sequences)"),
        ("inflight", "requests one client may have in flight (default: half of --max-inflight)"),
    ):
        group.add_argument(f"--quota-{quota}", type=int, default=None, metavar="N", help=what)


def default_quotas(args: argparse.Namespace) -> dict[str, int]:
    """The quotas of a client whose line names none: the options, else half the server's bounds."""
    halves = {
        "pages": args.num_pages // 2,
        "sequences": args.max_sequences // 2,
        "inflight": args.max_inflight // 2,
    }
    quotas = {}
    for quota in QUOTAS:
        given = getattr(args, f"quota_{quota}")
        if given is not None and (isinstance(given, bool) or given < 1):
            raise ValueError(f"--quota-{quota} must be at least 1, got {given}")
        quotas[quota] = given if given is not None else max(1, halves[quota])
    return quotas


def read_clients(args: argparse.Namespace) -> list[Client] | None:
    """The clients of `--tokens-file`, or None without one. ValueError naming the option or
    the file and line; OSError when the file cannot be read."""
    if args.tokens_file is None:
        if any(getattr(args, f"quota_{q}") is not None for q in QUOTAS):
            raise ValueError("--quota-* options need --tokens-file (quotas are per client)")
        return None
    for other in ("token", "token_file"):
        if getattr(args, other, None) is not None:
            raise ValueError(f"give --tokens-file or --{other.replace('_', '-')}, not both")
    return parse_tokens_file(Path(args.tokens_file), default_quotas(args))


def parse_tokens_file(path: Path, defaults: dict[str, int]) -> list[Client]:
    """Every client of the file at `path` (see the module docstring for the format)."""
    clients: list[Client] = []
    names: set[str] = set()
    tokens: set[str] = set()
    lines = path.read_text().splitlines()
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        where = f"--tokens-file {path}, line {number}"
        client = _parse_line(text, defaults, where)
        if client.name in names:
            raise ValueError(f"{where}: client {client.name!r} is named twice")
        if client.token in tokens:
            raise ValueError(f"{where}: this token is already another client's")
        if len(clients) == MAX_CLIENTS:
            raise ValueError(f"{where}: more than {MAX_CLIENTS} clients")
        names.add(client.name)
        tokens.add(client.token)
        clients.append(client)
    if not clients:
        raise ValueError(f"--tokens-file {path} names no client: give at least one 'name:token' line")
    return clients


def _parse_line(text: str, defaults: dict[str, int], where: str) -> Client:
    first, *options = text.split()
    name, colon, token = first.partition(":")
    if not colon or not _NAME.match(name):
        raise ValueError(
            f"{where}: expected 'name:token' with a name of 1-32 of A-Z a-z 0-9 _ . -, got {name!r}"
        )
    if not token:
        raise ValueError(f"{where}: client {name!r} has an empty token")
    quotas = dict(defaults)
    for option in options:
        quota, equals, value = option.partition("=")
        if quota not in QUOTAS or not equals:
            raise ValueError(f"{where}: expected pages=N, sequences=N or inflight=N, got {option!r}")
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"{where}: {quota} must be a whole number >= 1, got {value!r}")
        quotas[quota] = int(value)
    return Client(name, token, **quotas)
