"""bench notebooks: each notebook's Run All in a fresh kernel, next to a bare kernel's start.

For every notebook of `notebooks/` (00–11) and `notebooks/exercises/`, in file order: first a
bare kernel is started and runs `pass` (its start-up time), then the notebook is executed in
a fresh kernel of the same kind, cell by cell, like Run All in JupyterLab; its seconds run
from the kernel's start to the last cell's end (shutting the kernel down is not counted).
The two are measured one after the other for each notebook, so the machine's load is about
the same for both; the ratio column says how many kernel starts the notebook costs.

Beside the times, each notebook's size as a reader meets it: words of prose and code cells,
for the whole notebook and for its core path (the cells JupyterLab shows when it opens the
notebook, before any folded Optional section is opened), and the minutes docs/teaching.md
estimates from them (100 words a minute, one minute per code cell).

Target (issue 21): every notebook <= 12 s, kernel start included. On a shared machine every
number here moves with the load (the notes give it); the test of this benchmark checks the
table's shape only. Needs `nbclient` and `jupyter_client` (installed with JupyterLab).
"""

from __future__ import annotations

import argparse
import os
import re
import time
from pathlib import Path

from pagedkv.bench import Report

HELP = "Run All seconds of each notebook in a fresh kernel, beside a bare kernel's start-up"
TARGET_S = 12.0
ROOT = Path(__file__).resolve().parents[2]
KERNEL = "python3"
FOLDED = "jp-MarkdownHeadingCollapsed"  # a heading cell JupyterLab opens folded
WORDS_PER_MINUTE, MINUTES_PER_CODE_CELL = 100, 1  # docs/teaching.md's reading estimate
_HEADING = re.compile(r"(#{1,6})\s")
_WORD = re.compile(r"\w+")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--directory", default=None, help="folder of the notebooks (default: the repository's notebooks/)"
    )
    parser.add_argument(
        "--only", nargs="+", default=None, help="run only notebooks whose name starts with one of these"
    )
    parser.add_argument("--timeout", type=int, default=600, help="seconds a cell may take before it fails")


def _notebooks(directory: Path, only: list[str] | None) -> list[Path]:
    if not directory.is_dir():
        raise ValueError(f"directory must be a folder of notebooks, got {str(directory)!r}")
    found = sorted(directory.glob("*.ipynb")) + sorted(directory.glob("exercises/*.ipynb"))
    if only:
        found = [p for p in found if p.name.startswith(tuple(only))]
    if not found:
        raise ValueError(f"no notebook in {directory}" + (f" starting with {only}" if only else ""))
    return found


def _heading_level(cell) -> int | None:
    """The level of the heading a markdown cell starts with (1 for "# ..."), else None."""
    match = _HEADING.match(cell.source.lstrip()) if cell.cell_type == "markdown" else None
    return len(match.group(1)) if match else None


def folded(cells: list) -> list[bool]:
    """For each cell, whether JupyterLab hides it when it opens the notebook: a heading cell
    whose metadata sets FOLDED hides every later cell up to the next heading of the same or a
    higher level (a deeper heading stays hidden with the rest)."""
    hidden, fold_level = [], None
    for cell in cells:
        level = _heading_level(cell)
        if fold_level is not None and level is not None and level <= fold_level:
            fold_level = None
        hidden.append(fold_level is not None)
        if fold_level is None and level is not None and cell.metadata.get(FOLDED):
            fold_level = level
    return hidden


def reading_size(cells: list) -> dict[str, int]:
    """Words of prose and code cells of the whole notebook and of its core path (the cells
    shown before any fold is opened), and the minutes docs/teaching.md estimates from them."""
    size = {}
    for part, keep in (("all", [True] * len(cells)), ("core", [not h for h in folded(cells)])):
        shown = [c for c, k in zip(cells, keep) if k]
        words = sum(len(_WORD.findall(c.source)) for c in shown if c.cell_type == "markdown")
        code = sum(c.cell_type == "code" for c in shown)
        size[f"{part}_words"], size[f"{part}_code_cells"] = words, code
        size[f"{part}_minutes"] = round(words / WORDS_PER_MINUTE + code * MINUTES_PER_CODE_CELL)
    return size


def _bare_kernel_seconds(cwd: Path) -> float:
    """Seconds from asking for a kernel to its first executed statement."""
    from jupyter_client.manager import start_new_kernel

    start = time.perf_counter()
    manager, client = start_new_kernel(kernel_name=KERNEL, cwd=str(cwd))
    try:
        client.execute_interactive("pass", timeout=120)
        return time.perf_counter() - start
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def _run_all_seconds(path: Path, timeout: int) -> tuple[float, str]:
    """Seconds of Run All in a fresh kernel (its start included) and "ok" or the error."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=timeout, kernel_name=KERNEL, resources={"metadata": {"path": str(path.parent)}}
    )
    client.reset_execution_trackers()
    start = time.perf_counter()
    status = "ok"
    with client.setup_kernel():
        try:
            for index, cell in enumerate(nb.cells):
                client.execute_cell(cell, index)
        except CellExecutionError as error:
            status = f"error: {str(error).strip().splitlines()[-1][:80]}"
        seconds = time.perf_counter() - start
    return seconds, status


def run(
    *,
    quick: bool = False,
    seed: int = 0,
    directory: str | None = None,
    only: list[str] | None = None,
    timeout: int = 600,
) -> Report:
    import nbformat

    folder = Path(directory) if directory is not None else ROOT / "notebooks"
    paths = _notebooks(folder, only)
    if quick:
        paths = paths[:1]
    rows: list[list[object]] = []
    data: dict[str, dict[str, object]] = {}
    for path in paths:
        kernel = _bare_kernel_seconds(path.parent)
        seconds, status = _run_all_seconds(path, timeout)
        verdict = status if status != "ok" else ("met" if seconds <= TARGET_S else "NOT met")
        name = str(path.relative_to(folder))
        size = reading_size(nbformat.read(path, as_version=4).cells)
        rows.append([name, seconds, kernel, seconds / kernel, verdict, *size.values()])
        data[name] = {"seconds": seconds, "kernel_start_seconds": kernel, "status": status, **size}
    slow = [row[0] for row in rows if row[4] != "met"]
    notes = [
        f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
        f"target: every notebook <= {TARGET_S:.0f} s, kernel start included: "
        + ("met" if not slow else f"NOT met by {', '.join(map(str, slow))}"),
    ]
    return Report(
        title=f"bench notebooks: Run All in a fresh '{KERNEL}' kernel, beside a bare kernel's start",
        columns=[
            "notebook",
            "Run All s",
            "bare kernel start s",
            "ratio",
            f"<= {TARGET_S:.0f} s",
            "words",
            "code cells",
            "minutes",
            "core words",
            "core code cells",
            "core minutes",
        ],
        rows=rows,
        notes=notes,
        data=data,
    )
