"""Give every hand-copied submission a `timestamp.txt`, so nbgrader regrades a resubmission.

    python classroom/stamp_submissions.py build/submitted

nbgrader's autograde (and generate_feedback after it) skips a submission it has graded
before ("Skipping existing assignment") unless the submission's `timestamp.txt` is newer
than the graded copy's. Submissions that come through nbgrader's exchange (submit ->
collect) carry that file; notebooks a teacher copies into build/submitted/<student>/<assignment>/
by hand do not, so a corrected notebook copied over an old one kept its old grade. This
writes `timestamp.txt` = the newest notebook's modification time (UTC) wherever the file is
missing or older than a notebook: a copy made after grading then counts as a new submission.

An exchange submission is never touched: collect keeps the student's save times, which are
before their submit time, so its notebooks are never newer than its timestamp.

Leaves out: deciding lateness (nbgrader compares the timestamp with the due date).
"""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path

from nbgrader.utils import parse_utc

FORMAT = "%Y-%m-%d %H:%M:%S.%f UTC"  # what nbgrader's exchange writes, and parses back


def stamp(submitted: Path) -> list[Path]:
    """Write or renew timestamp.txt in every <student>/<assignment>/ under `submitted`."""
    renewed = []
    for folder in sorted(p for p in submitted.glob("*/*") if p.is_dir()):
        notebooks = list(folder.glob("*.ipynb"))
        if not notebooks:
            continue
        newest = datetime.fromtimestamp(max(nb.stat().st_mtime for nb in notebooks), tz=timezone.utc)
        path = folder / "timestamp.txt"
        if path.exists():
            if parse_utc(path.read_text().strip()).replace(tzinfo=timezone.utc) >= newest:
                continue
        path.write_text(newest.strftime(FORMAT))
        renewed.append(folder)
    return renewed


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    submitted = Path(argv[0])
    if not submitted.is_dir():
        print(f"no submissions yet: {submitted} does not exist", file=sys.stderr)
        return 0
    for folder in stamp(submitted):
        print(f"new or changed submission: {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
