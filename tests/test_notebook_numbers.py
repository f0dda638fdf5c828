"""Every float a strictly compared notebook output prints comes from exact arithmetic.

Strict nbval compares the stored `text/plain` and stream output of every code cell not marked
`# NBVAL_IGNORE_OUTPUT` / `# NBVAL_SKIP` (after the sanitizers in tests/nbval_sanitize.cfg)
with what the cell prints when the tests run. A float computed by numpy (an attention error,
a log-probability, a sum over a float32 matmul) can differ in its last digits from one CPU to
the next (OpenBLAS picks its kernel by CPU model, numpy its SIMD loops): notebook 02 once
printed `max |batch - dense| = 1e-07` here and `3e-07` on an AMD EPYC, and main went red on a
machine nobody had changed. So a cell prints what is exact and asserts what is approximate.

How this is checked, without a kernel: every float literal in a strict output (a number with
a decimal point or an exponent, `%` included; hex digests and `NxM` figure sizes are told
apart) must be one of:

- a constant the cell writes: the same literal appears in the cell's source (a bound such as
  `< 1e-6` printed next to the assert that checks it);
- the size in matplotlib's `<Figure size WxH with N Axes>` repr (figsize x dpi, scalar
  arithmetic on constants the code sets);
- in a cell that declares its floats exact: the tag `exact-floats` and, in the cell's
  metadata, `"exact_floats": "<kinds>: <why>"`, where <kinds> are some of `EXACT_KINDS` below:
  arithmetic that rounds the same on every IEEE-754 machine (integer counts and their ratios,
  byte sizes, scalar Python arithmetic on constants). A declared cell's source may not touch
  what makes floats machine-dependent (`FLOAT_NOISE`: random normals, attention kernels,
  differences of arrays, timings, model scores), and a declaration that covers no float is
  stale and fails too.

A float outside these three fails with the cell and its source line. The old notebook 02
fails (`1e-07` in an undeclared cell whose source computes `np.abs(batch[b] - row).max()`),
and declaring it would not help, since the cell draws random normals and differences
attention outputs (`FLOAT_NOISE`).

NOTE: the tests do not re-run the kernels with another BLAS core type to compare digits: the
machines this project runs on set OpenBLAS's core type themselves where a CPU needs it for
correct results, and the tests never override it.
"""

from __future__ import annotations

import configparser
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted(
    (ROOT / "notebooks/exercises").glob("*.ipynb")
)

TAG = "exact-floats"
EXACT_KINDS = {
    # An int divided by an int is one correctly rounded IEEE-754 division: the same double on
    # every machine, and so the same digits at any format (percentages, means of counts).
    "ratios of counts",
    # Products of integers; KiB/MiB/GiB divide by powers of two, exactly.
    "byte sizes",
    # Scalar Python float arithmetic (+ - * /) on constants: each operation correctly rounded;
    # CPython uses neither x87 extended precision nor fused multiply-adds. No numpy reductions,
    # no exp/log (libm and numpy's SIMD loops differ between machines).
    "cost model",
    # Integer counters that a library reports as floats (Prometheus samples: `16.0`).
    "counts",
    # A tolerance or other constant of the package, printed in a message.
    "constants",
    # One numpy float32 scalar + on constants: a single correctly rounded IEEE-754 single
    # precision addition (no array reduction, so no SIMD order; no fused multiply-add).
    "scalar float32 sums",
}
# Source text that makes a float depend on the machine; a declared cell may contain none.
FLOAT_NOISE = (
    "standard_normal",
    "random(",
    "_attention(",
    "attention_batch(",
    "np.abs(",
    ".max()",
    "perf_counter",
    "time.time",
    "logprob",
    "scores",
    "logits",
)

# A float literal: digits with a decimal point (a unit may follow: `2.5x`, `10.5ms`) or an
# exponent, not part of a word, a hex digest (`74e3d733`) or a version (`1.2.3`).
# `(\d)x(\d)` is split first so the height in `1210x449.429` is seen.
FLOAT = re.compile(r"(?<![\w.])[-+]?(?:\d[\d,]*\.\d+(?:[eE][-+]?\d+)?(?![\d.])|\d+[eE][-+]?\d+(?![\w.]))%?")
FIGURE = re.compile(r"<Figure size (\d+(?:\.\d+)?) ?x ?(\d+(?:\.\d+)?) with \d+ Axes>")


def _sanitizers() -> list[tuple[re.Pattern, str]]:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "tests/nbval_sanitize.cfg")
    return [(re.compile(cfg[s]["regex"]), cfg[s]["replace"]) for s in cfg.sections()]


def strict_cells(nb: dict):
    """(number, cell) for each code cell strict nbval compares (it has outputs and no marker);
    the number is the one nbval reports (`Cell 8`): code cells counted from 0."""
    code = [cell for cell in nb["cells"] if cell["cell_type"] == "code"]
    for number, cell in enumerate(code):
        if not cell.get("outputs"):
            continue
        source = "".join(cell["source"])
        tags = cell.get("metadata", {}).get("tags", [])
        if any(m in source for m in ("NBVAL_IGNORE_OUTPUT", "NBVAL_SKIP")) or any(
            t in tags for t in ("nbval-ignore-output", "nbval-skip")
        ):
            continue
        yield number, cell


def compared_text(cell: dict, sanitizers: list[tuple[re.Pattern, str]]) -> str:
    """The text strict nbval compares (streams and text/plain), sanitized."""
    text = ""
    for out in cell["outputs"]:
        if out["output_type"] == "stream":  # a stream may arrive in chunks: nbval joins them
            text += "".join(out["text"])
        elif out["output_type"] in ("execute_result", "display_data"):
            text += "\n" + "".join(out.get("data", {}).get("text/plain", "")) + "\n"
    for regex, replace in sanitizers:
        text = regex.sub(replace, text)
    return text


def floats_in(text: str) -> list[str]:
    """Float literals in `text`, matplotlib figure sizes left out.

    Example: "hit 39.3%, 2.5x, size 1e-07, hash 74e3d733, v1.2.3" -> ["39.3%", "2.5", "1e-07"]
    """
    text = FIGURE.sub("<Figure>", text)
    return FLOAT.findall(re.sub(r"(\d)x(\d)", r"\1 x \2", text))


def _value(literal: str) -> float:
    """Example: "1,234.5%" -> 1234.5"""
    return float(literal.rstrip("%").replace(",", ""))


def problems(nb: dict, name: str) -> list[str]:
    """Every float of `nb`'s strict outputs that is neither a written constant nor in a valid
    declared cell, and every invalid declaration, one message each."""
    found = []
    sanitizers = _sanitizers()
    for number, cell in strict_cells(nb):
        source = "".join(cell["source"])
        constants = {_value(f) for f in floats_in(source)}
        floats = [f for f in floats_in(compared_text(cell, sanitizers)) if _value(f) not in constants]
        where = f"{name}::Cell {number} ({source.splitlines()[0][:60]!r})"
        declared = TAG in cell.get("metadata", {}).get("tags", [])
        if not declared:
            found += [f"{where} prints {f}: print a bound or assert, or declare it {TAG!r}" for f in floats]
            continue
        why = cell["metadata"].get("exact_floats", "")
        kinds, _, reason = why.partition(":")
        if not reason.strip() or not {k.strip() for k in kinds.split(",")} <= EXACT_KINDS:
            found.append(f"{where}: exact_floats {why!r} is not '<kinds>: <why>' ({sorted(EXACT_KINDS)})")
        noise = [n for n in FLOAT_NOISE if n in source]
        if noise:
            found.append(f"{where} is declared exact but its source uses {noise}")
        if not floats:
            found.append(f"{where} is declared {TAG!r} but prints no float")
    compared = [id(cell) for _, cell in strict_cells(nb)]
    for cell in nb["cells"]:
        if TAG in cell.get("metadata", {}).get("tags", []) and id(cell) not in compared:
            first = "".join(cell["source"]).splitlines()[0][:60]
            found.append(f"{name}: {first!r} is declared {TAG!r} but nbval does not compare its output")
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_strict_outputs_print_only_exact_floats(path):
    found = problems(json.loads(path.read_text()), path.name)
    assert not found, "\n".join(found)


def test_floats_in_tells_floats_from_digests_and_sizes():
    text = "a 39.3% b 1e-07 c 74e3d733 d v1.2.3 e 1,234.5 f <Figure size 1210x449.429 with 1 Axes> g 4x4.5"
    assert floats_in(text) == ["39.3%", "1e-07", "1,234.5", "4.5"]
    assert floats_in("2.47x faster, 10.5ms, -3.587, 3e5 and 3e5f") == ["2.47", "10.5", "-3.587", "3e5"]


def _cell(source: str, printed: str, **metadata) -> dict:
    return {
        "cell_type": "code",
        "source": source,
        "metadata": metadata,
        "outputs": [{"output_type": "stream", "name": "stdout", "text": printed}],
    }


def test_the_old_notebook_02_cell_fails():
    """Notebook 02's ragged-batch cell as it was: an undeclared machine-dependent float, and
    declaring it does not help."""
    source = (
        "q = rng.standard_normal((2, 4, 8)).astype(np.float32)\n"
        'print(f"{seq_id}: {n} tokens, max |batch - dense| = {np.abs(batch[b] - row).max():.0e}")\n'
    )
    printed = "second: 15 tokens, max |batch - dense| = 1e-07\n"
    assert len(problems({"cells": [_cell(source, printed)]}, "02")) == 1
    declared = _cell(source, printed, tags=[TAG], exact_floats="constants: it is small")
    assert any("uses" in p for p in problems({"cells": [declared]}, "02"))


def test_bounds_declarations_and_stale_tags():
    bound = _cell(
        'assert err < 1e-6\nprint("max |batch - dense| < 1e-6:", err < 1e-6)',
        "max |batch - dense| < 1e-6: True\n",
    )
    counts = _cell(
        'print(f"{hits / total:.1%}")', "39.3%\n", tags=[TAG], exact_floats="ratios of counts: tokens"
    )
    vague = _cell('print(f"{hits / total:.1%}")', "39.3%\n", tags=[TAG], exact_floats="trust me")
    stale = _cell("print(hits)", "16\n", tags=[TAG], exact_floats="counts: hits")
    assert problems({"cells": [bound, counts]}, "nb") == []
    assert len(problems({"cells": [vague]}, "nb")) == 1
    assert len(problems({"cells": [stale]}, "nb")) == 1
