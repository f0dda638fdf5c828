"""The few lines of `pagedkv/labs/naive.py` that make each of notebook 08's mistakes.

`mistake_excerpt(name)` finds them in the module's own source, by a marker (a piece of the
first line of each run of lines), and returns them numbered as in the file, under the name of
the method they sit in. Nothing is copied, so an excerpt cannot drift from the code it shows:
a marker that no longer matches exactly one line raises.
"""

from __future__ import annotations

import inspect
import textwrap

import pagedkv.labs.naive

# mistake -> runs of lines, each (a piece of its first line, number of lines)
EXCERPTS: dict[str, tuple[tuple[str, int], ...]] = {
    "page_per_token": (('per_page = 1 if "page_per_token"', 2),),
    "leak": (("table = self.tables.pop(seq_id)", 3),),
    "no_cached_eviction": (("free = len(self.free_list)", 7),),
    "one_stamp_per_release": (
        ('one_stamp = "one_stamp_per_release"', 3),
        ("self.stamp[page] = now if one_stamp", 1),
    ),
    "stale_heap": (
        ("self.ref[page] += 1  # revived", 1),
        ('if "stale_heap" not in self.mistakes', 2),
    ),
    "naive_attention": (("summed = (k * v).sum(axis=0)", 2),),
}


def _enclosing(lines: list[str], i: int) -> str:
    """The name of the function or method line `i` (from 0) sits in, as `Class.method`."""
    name, indent = "", len(lines[i]) - len(lines[i].lstrip())
    for line in reversed(lines[:i]):
        stripped, depth = line.lstrip(), len(line) - len(line.lstrip())
        if depth < indent and stripped.startswith(("def ", "class ")):
            word = stripped.split()[1].split("(")[0].rstrip(":")
            name, indent = (f"{word}.{name}" if name else word), depth
            if depth == 0:
                break
    return name


def mistake_excerpt(mistake: str) -> str:
    """The lines of naive.py behind `mistake` (a key of `EXCERPTS`), each with its line
    number, under a heading naming the file and the method; runs that are apart are
    separated by a line '...'."""
    lines = inspect.getsource(pagedkv.labs.naive).splitlines()
    parts, where = [], []
    for marker, count in EXCERPTS[mistake]:
        found = [i for i, line in enumerate(lines) if marker in line]
        if len(found) != 1:
            raise LookupError(f"{marker!r} is on {len(found)} lines of naive.py, not 1")
        first = found[0]
        where.append(_enclosing(lines, first))
        body = textwrap.dedent("\n".join(lines[first : first + count])).splitlines()
        parts.append([f"{first + 1 + k:4} | {text}" for k, text in enumerate(body)])
    names = ", ".join(dict.fromkeys(where))
    shown = "\n     ...\n".join("\n".join(part) for part in parts)
    return f"pagedkv/labs/naive.py, {names}:\n{shown}"
