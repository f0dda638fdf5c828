"""The `pagedkv` command line: `python -m pagedkv demo | bench <name> | serve`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

HELP = {  # command -> the line `--help` shows for it
    "demo": "print a scenario step by step (default: the walkthrough)",
    "bench": "benchmarks: numbers and ratios on this machine",
    "serve": "serve the cache over HTTP (FastAPI + uvicorn; needs the serve extra)",
}


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for `argv`: a command's module is imported only if `argv` runs it (every
    command's when argv is None, none for `--help`), and a benchmark's only if `argv` runs it
    (all of them for `bench --help`)."""
    parser = argparse.ArgumentParser(prog="python -m pagedkv", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    argv = list(argv) if argv is not None else None
    for name, text in HELP.items():
        if argv is None or argv[:1] == [name]:
            _ADD[name](sub.add_parser(name, help=text), argv)
        else:
            sub.add_parser(name, help=text)  # listed, not loaded: `argv` does not run it
    return parser


def _add_demo(parser: argparse.ArgumentParser, argv: list[str] | None) -> None:
    from pagedkv.scenarios import demo

    demo.add_arguments(parser)
    parser.set_defaults(func=demo.run)


def _add_bench(parser: argparse.ArgumentParser, argv: list[str] | None) -> None:
    from pagedkv import bench

    names = [a for a in (argv or [])[1:2] if a in bench.BENCHMARKS]
    bench.add_subcommands(parser, names or None)


def _add_serve(parser: argparse.ArgumentParser, argv: list[str] | None) -> None:
    from pagedkv.service import serve  # the service layer wraps the core; the core never imports it

    parser.description = serve.HELP
    serve.add_arguments(parser)  # FastAPI and uvicorn are imported only by serve.run
    parser.set_defaults(func=serve.run)


_ADD = {"demo": _add_demo, "bench": _add_bench, "serve": _add_serve}


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv).parse_args(argv)
    return args.func(args) or 0
