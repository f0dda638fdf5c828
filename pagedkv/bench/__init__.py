"""`python -m pagedkv bench <name>`: benchmarks that print a table, optionally JSON and a plot.

Speed targets are checked here, never in timed unit tests: shared machines are noisy, so
every benchmark measures the things it compares side by side in one run and reports
ratios. Each benchmark module defines `HELP`, `add_arguments(parser)` (options whose
destinations are `run`'s keyword names), `run(*, quick=False, seed=0, ...) -> Report` and,
where it draws one, `figure(report)`, a matplotlib Figure, passed as `Report(...,
plotter=figure)`. Notebooks and tests call `run(...)` directly (`scale.run(quick=True)`);
the command line only parses options into those keywords. `report.table()`,
`report.to_json()` and `report.figure()` give the printed table, the JSON the CLI's
`--json` writes and the PNG its `--plot` saves.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import textwrap
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

BENCHMARKS = {  # name -> module
    "ops": "pagedkv.bench.ops",
    "attention": "pagedkv.bench.attention",
    "memory": "pagedkv.bench.memory",
    "sharing": "pagedkv.bench.sharing",
    "page-size": "pagedkv.bench.page_size",
    "preempt": "pagedkv.bench.preempt",
    "scale": "pagedkv.bench.scale",
    "ui": "pagedkv.bench.ui",
    "threads": "pagedkv.bench.threads",
    "wal": "pagedkv.bench.wal",
    "api": "pagedkv.bench.api",
    "startup": "pagedkv.bench.startup",
    "routing": "pagedkv.bench.routing",
    "serving": "pagedkv.bench.serving",
    "tiers": "pagedkv.bench.tiers",
    "eviction": "pagedkv.bench.eviction",
    "radix": "pagedkv.bench.radix",
    "model": "pagedkv.bench.model",
    "notebooks": "pagedkv.bench.notebooks",
}


@dataclass
class Report:
    title: str
    columns: list[str]
    rows: list[list[object]]
    notes: list[str] = field(default_factory=list)  # lines printed under the table
    data: dict = field(default_factory=dict)  # extra machine-readable results
    plotter: Callable[[Report], object] | None = field(default=None, repr=False)  # module.figure
    # decimals of a column of floats, by the start of its name (format_table); else 3
    digits: dict[str, int] = field(default_factory=dict, repr=False)

    def as_dict(self) -> dict:
        return {
            "title": self.title,
            "rows": [dict(zip(self.columns, row)) for row in self.rows],
            "notes": self.notes,
            "data": self.data,
        }

    def table(self) -> str:
        """Title, table and notes as the command line prints them, in lines of at most
        WIDTH characters where words allow (a narrow notebook shows them unbroken)."""
        return "\n".join(
            [*_wrap(self.title), format_table(self.columns, self.rows, self.digits), *_wrap(*self.notes)]
        )

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2, default=float)

    def figure(self):
        """The benchmark's matplotlib Figure of this report."""
        if self.plotter is None:
            raise ValueError(f"report {self.title!r} has no figure")
        return self.plotter(self)


def _record_path(name: str) -> Path:
    return Path(str(resources.files("pagedkv").joinpath(f"data/{name.replace('-', '_')}_quick.json")))


def record(name: str) -> Path:
    """Run benchmark `name` with `quick=True` and write its report to
    pagedkv/data/<name>_quick.json, which `recorded(name)` reads back (`make records`)."""
    report = importlib.import_module(BENCHMARKS[name]).run(quick=True)
    fields = {k: getattr(report, k) for k in ("title", "columns", "rows", "notes", "data")}
    path = _record_path(name)
    path.write_text(json.dumps(fields, indent=1) + "\n", encoding="utf-8")
    return path


def recorded(name: str) -> Report:
    """The report of `run(quick=True)` of benchmark `name`, as `record(name)` wrote it, with
    its figure: the same table and picture without the wait (tests check the record against
    a fresh run)."""
    fields = json.loads(_record_path(name).read_text(encoding="utf-8"))
    module = importlib.import_module(BENCHMARKS[name])
    return Report(**fields, plotter=getattr(module, "figure", None), digits=getattr(module, "DIGITS", {}))


WIDTH = 95  # characters a printed report's lines keep to, where words allow


def _wrap(*texts: str) -> list[str]:
    """Each line of the texts, a line longer than WIDTH broken between words (the rest
    indented by two spaces)."""
    lines = []
    for text in texts:
        for line in text.splitlines():
            if len(line) <= WIDTH:
                lines.append(line)
            else:
                lines += textwrap.wrap(line, WIDTH, subsequent_indent="  ", break_long_words=False)
    return lines


def _cell(value: object, is_percent: bool, digits: int | None = None) -> str:
    if is_percent and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.1f}%"
    if isinstance(value, float) and digits is not None:
        return f"{value:,.{digits}f}"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def _lines(heads: list[list[str]], cells: list[list[str]], numeric: list[bool]) -> list[str]:
    """The table's lines: column names (each a list of lines, ending on one line), a rule, rows."""
    depth = max(len(h) for h in heads)
    heads = [[""] * (depth - len(h)) + h for h in heads]
    widths = [max([len(h) for h in head] + [len(r[i]) for r in cells]) for i, head in enumerate(heads)]

    def line(values: list[str]) -> str:
        return "  ".join(v.rjust(w) if n else v.ljust(w) for v, w, n in zip(values, widths, numeric)).rstrip()

    return (
        [line([h[k] for h in heads]) for k in range(depth)]
        + ["  ".join("-" * w for w in widths)]
        + [line(row) for row in cells]
    )


def _fits(lines: list[str]) -> bool:
    return max(len(line) for line in lines) <= WIDTH


def format_table(columns: list[str], rows: list[list[object]], digits: dict[str, int] | None = None) -> str:
    """A plain-text table with right-aligned numbers. A column whose name ends in "%" holds
    percentages: its numbers print with one decimal and a % sign (58.5 -> "58.5%"). Other
    floats print with 3 decimals, or with digits[key] for a column whose name starts with key.

    A table wider than WIDTH characters prints its column names over several lines, between
    words; if it is still too wide, it prints as several tables, each repeating the leading
    columns of text or whole numbers (the rows' labels)."""
    percent = [c.endswith("%") for c in columns]
    places = [next((n for key, n in (digits or {}).items() if c.startswith(key)), None) for c in columns]
    cells = [[_cell(v, p, d) for v, p, d in zip(row, percent, places)] for row in rows]
    numeric = [all(isinstance(r[i], (int, float)) for r in rows) for i in range(len(columns))]
    lines = _lines([[c] for c in columns], cells, numeric)
    if _fits(lines):
        return "\n".join(lines)
    value_widths = [max((len(r[i]) for r in cells), default=0) for i in range(len(columns))]
    heads = []
    for name, width in zip(columns, value_widths):  # "hit %" stays one word, and so do long words
        lines = textwrap.wrap(name.replace(" %", "\u00a0%"), max(width, 12), break_long_words=False)
        heads.append([line.replace("\u00a0", " ") for line in lines] or [""])
    label = [all(not isinstance(r[i], float) for r in rows) for i in range(len(columns))]  # text, counts
    labels = min(max(1, label.index(False) if False in label else len(columns)), len(columns) - 1)

    def table(part: list[int]) -> list[str]:  # the rows' label columns and those of `part`
        keep = [*range(labels), *part]
        names, values = [heads[k] for k in keep], [[r[k] for k in keep] for r in cells]
        return _lines(names, values, [numeric[k] for k in keep])

    parts: list[list[int]] = [[]]
    for i in range(labels, len(columns)):  # as many columns per table as fit
        if parts[-1] and not _fits(table([*parts[-1], i])):
            parts.append([])
        parts[-1].append(i)
    return "\n\n".join("\n".join(table(part)) for part in parts)


def best_time(fn: Callable[[], object], repeat: int) -> float:
    """Fastest of `repeat` runs of fn(), in seconds (the least disturbed by other load)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def time_threads(work: Callable[[int], object], threads: int) -> float:
    """Seconds until `threads` threads running work(0) .. work(threads - 1), released
    together by a barrier, have all finished."""
    barrier = threading.Barrier(threads + 1)

    def released(k: int) -> None:
        barrier.wait()
        work(k)

    pool = [threading.Thread(target=released, args=(k,)) for k in range(threads)]
    for thread in pool:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in pool:
        thread.join()
    return time.perf_counter() - start


def _call(module, args: argparse.Namespace) -> Report:
    """module.run with the parsed options as keywords."""
    params = inspect.signature(module.run).parameters
    return module.run(**{k: v for k, v in vars(args).items() if k in params})


def _run(module, args: argparse.Namespace) -> int:
    report = _call(module, args)
    print(report.table())
    if args.json:
        with open(args.json, "w") as f:
            f.write(report.to_json())
        print(f"wrote {args.json}")
    if args.plot:
        if report.plotter is None:
            raise SystemExit(f"bench {args.bench} has no plot")
        report.figure().savefig(args.plot, dpi=100)
        print(f"wrote {args.plot}")
    return 0


def add_subcommands(parser: argparse.ArgumentParser, names: Iterable[str] | None = None) -> None:
    """One subcommand per benchmark. Only the modules in `names` (all when None) are
    imported and get their options: `python -m pagedkv demo` imports none, and
    `bench scale` imports only `bench.scale` (the ui benchmark imports ipywidgets)."""
    names = set(BENCHMARKS) if names is None else set(names)
    sub = parser.add_subparsers(dest="bench", required=True, metavar="NAME")
    for name, module_name in BENCHMARKS.items():
        if name not in names:
            sub.add_parser(name, help=f"(python -m pagedkv bench {name} --help)")
            continue
        module = importlib.import_module(module_name)
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        p.add_argument("--quick", action="store_true", help="a small, fast configuration (tests)")
        p.add_argument("--seed", type=int, default=0, help="seed of the generated workload")
        p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
        p.add_argument("--plot", metavar="PATH", help="also write a PNG figure")
        module.add_arguments(p)
        p.set_defaults(func=lambda args, m=module: _run(m, args))
