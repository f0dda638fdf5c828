"""The `pagedkv` command line: `python -m pagedkv demo | bench <name> | serve`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pagedkv import bench
from pagedkv.scenarios import demo


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for `argv`: a benchmark's module is imported only if `argv` runs it (all
    of them for `bench --help`, none for `demo`)."""
    parser = argparse.ArgumentParser(prog="python -m pagedkv", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo_parser = sub.add_parser("demo", help="print a scenario step by step (default: the walkthrough)")
    demo.add_arguments(demo_parser)
    demo_parser.set_defaults(func=demo.run)
    bench_parser = sub.add_parser("bench", help="benchmarks: numbers and ratios on this machine")
    argv = list(argv) if argv is not None else None
    if argv is None or argv[:1] == ["bench"]:
        wanted = [a for a in (argv or [])[1:2] if a in bench.BENCHMARKS]
        bench.add_subcommands(bench_parser, wanted or None)
    else:
        bench.add_subcommands(bench_parser, [])
    from pagedkv.service import serve  # the service layer wraps the core; the core never imports it

    serve_parser = sub.add_parser("serve", help=serve.HELP, description=serve.HELP)
    serve.add_arguments(serve_parser)  # FastAPI and uvicorn are imported only by serve.run
    serve_parser.set_defaults(func=serve.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv).parse_args(argv)
    return args.func(args) or 0
