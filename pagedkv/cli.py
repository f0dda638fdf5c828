"""The `pagedkv` command line: `python -m pagedkv demo | bench <name> | serve`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from . import bench, demo


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pagedkv", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo_parser = sub.add_parser("demo", help="print a scenario step by step (default: the walkthrough)")
    demo.add_arguments(demo_parser)
    demo_parser.set_defaults(func=demo.run)
    bench_parser = sub.add_parser("bench", help="benchmarks: numbers and ratios on this machine")
    bench.add_subcommands(bench_parser)
    from .service import serve  # the service layer wraps the core; the core never imports it

    serve_parser = sub.add_parser("serve", help=serve.HELP, description=serve.HELP)
    serve.add_arguments(serve_parser)  # FastAPI and uvicorn are imported only by serve.run
    serve_parser.set_defaults(func=serve.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args) or 0
