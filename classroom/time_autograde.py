"""Seconds per student for `nbgrader autograde` of the exercises, with the real nbgrader.

    python classroom/time_autograde.py [--students 10] [--profile]

Builds a course in a temporary directory (generate_assignment), submits the source notebook
(solutions in) as `--students` students, then times one `nbgrader autograde` call over all of
them and prints seconds per student. `--profile` also times the parts of one notebook's run:
the kernel start, the notebook's imports, every graded check, and nbgrader's own start.
Wall-clock numbers of this machine, for the closing note and docs/teaching.md; no test
asserts them.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "pagedkv_exercises.ipynb"


def nbgrader(course: Path, *args: str) -> tuple[float, float]:
    """Run one nbgrader command in the course; return its wall-clock and CPU seconds (the
    CPU seconds of nbgrader and the kernels it started: what a busy machine does not change)."""
    cpu_before = _children_cpu()
    bin_dir = Path(sys.executable).parent  # nbgrader runs `alembic` from PATH
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR", "MPLCONFIGDIR"):
        env[name] = str(course / ".home" / name.lower())
    if (ROOT / "classroom" / "nbgrader_config.py").exists():  # as the Makefile does
        env["JUPYTER_CONFIG_PATH"] = str(ROOT / "classroom")
    start = time.perf_counter()
    subprocess.run(
        [str(bin_dir / "nbgrader"), *args, f"--CourseDirectory.root={course}"],
        cwd=course,
        env=env,
        check=True,
        capture_output=True,
        timeout=3600,
    )
    return time.perf_counter() - start, _children_cpu() - cpu_before


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def profile_parts() -> None:
    """Time the parts of one graded run in this process (imports are cold only the first time)."""
    start = time.perf_counter()
    import nbformat
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3")
    print(f"kernel start:           {time.perf_counter() - start:6.2f} s")
    nb = nbformat.read(ROOT / "notebooks" / "exercises" / NOTEBOOK, as_version=4)
    try:
        for cell in (c for c in nb.cells if c.cell_type == "code"):
            start = time.perf_counter()
            kc.execute_interactive(cell.source, timeout=600, output_hook=lambda msg: None)
            label = cell.metadata.get("nbgrader", {}).get("grade_id") or cell.source.splitlines()[0][:40]
            tags = cell.metadata.get("tags", [])
            skipped = "  (left out when grading)" if "skip-in-grading" in tags else ""
            print(f"{label:40} {time.perf_counter() - start:6.2f} s{skipped}")
    finally:
        km.shutdown_kernel(now=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=10)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--keep", type=Path, help="copy the autograded notebooks here")
    args = parser.parse_args()
    if not 1 <= args.students <= 200:
        parser.error(f"--students must be 1..200, got {args.students}")
    with tempfile.TemporaryDirectory() as tmp:
        course = Path(tmp)
        shutil.copytree(ROOT / "notebooks" / "exercises", course / "source" / "exercises")
        wall, cpu = nbgrader(course, "generate_assignment", "exercises")
        print(f"generate_assignment: {wall:7.2f} s wall, {cpu:7.2f} s CPU")
        for i in range(args.students):
            folder = course / "submitted" / f"student{i:03d}" / "exercises"
            folder.mkdir(parents=True)
            shutil.copy(course / "source" / "exercises" / NOTEBOOK, folder / NOTEBOOK)
        n = args.students
        for step in ("autograde", "generate_feedback"):
            wall, cpu = nbgrader(course, step, "exercises")
            if step == "autograde" and args.keep:
                shutil.copytree(course / "autograded", args.keep, dirs_exist_ok=True)
            print(
                f"{step} of {n}: {wall:7.2f} s wall = {wall / n:5.2f} s per student; "
                f"{cpu:7.2f} s CPU = {cpu / n:5.2f} s per student (load {os.getloadavg()[0]:.1f})"
            )
    if args.profile:
        profile_parts()


if __name__ == "__main__":
    main()
