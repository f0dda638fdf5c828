"""Running a learner's code safely: a time limit, their exceptions, their mutations.

A checker never lets the learner's code crash it. Every call goes through `call`, which
turns an exception into a `Failure` naming the case and the line of the learner's code that
raised (never a traceback from inside pagedkv), and notices when the code changed its
inputs. `time_limit` stops code that loops forever.

The time limit: in the main thread on Unix (where a Jupyter kernel runs a cell) it is a
`signal.setitimer` alarm, which raises inside the runaway loop and so really stops it. A
thread with `join(timeout)` could only walk away from the loop and leave it burning a core
in the kernel until a restart, so that is the fallback only where no alarm exists (Windows,
a check called from another thread); its message says to restart the kernel.

Leaves out: sandboxing. The code runs in the learner's own process, with their rights.
"""

from __future__ import annotations

import copy
import signal
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # frames in here are not the learner's
running: dict[str, str] = {"inputs": ""}  # the case the learner's code was last given (timeouts name it)


class Failure(Exception):
    """A check failed; the message is ready to show to the learner."""


class TimeLimitExceeded(BaseException):
    """Raised by the alarm (a BaseException, so the learner's `except Exception` cannot eat it)."""


def can_interrupt() -> bool:
    """True where `time_limit` can stop a runaway loop (main thread, SIGALRM available)."""
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise TimeLimitExceeded in the code of the `with` block after `seconds`."""

    def on_alarm(signum: int, frame: object) -> None:
        raise TimeLimitExceeded

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL if previous is None else previous)


def run_with_limit(job: Callable[[], bool], seconds: float, name: str) -> bool:
    """Run a whole check under the time limit; print the timeout message and return False."""
    timeout = (
        f"✗ {name}: your code did not finish within {seconds:g} s. An endless loop? Look at the "
        "loop conditions: every loop must make progress towards its end."
    )
    running["inputs"] = ""
    if can_interrupt():
        try:
            with time_limit(seconds):
                return job()
        except TimeLimitExceeded:
            print(timeout + _last_case())
            return False
    result: list[bool] = []
    worker = threading.Thread(target=lambda: result.append(job()), daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        print(timeout + _last_case() + "\n  It is still running: restart the kernel before you try again.")
        return False
    return bool(result and result[0])


def _last_case() -> str:
    return f"\n  inputs:   {running['inputs']}" if running["inputs"] else ""


def same(a: object, b: object) -> bool:
    """Equal values, numpy arrays compared element by element."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def learner_line(error: BaseException) -> str:
    """'line 3 in slot_mapping: `return x // 0`', the deepest frame outside pagedkv, or ''."""
    frames = [
        f
        for f in traceback.extract_tb(error.__traceback__)
        if not Path(f.filename).resolve().is_relative_to(PACKAGE_DIR)
    ]
    if not frames:
        return ""
    frame = frames[-1]
    code = f": `{frame.line.strip()}`" if frame.line else ""
    return f"line {frame.lineno} in {frame.name}{code}"


def describe_error(error: BaseException) -> str:
    """What the learner sees of an exception their code raised."""
    if isinstance(error, NotImplementedError):
        return "it is not written yet (it raises NotImplementedError): replace that line with your code"
    where = learner_line(error)
    text = f"it raised {type(error).__name__}: {error}"
    return text + (f"\n  at:       {where}" if where else "")


def call(name: str, fn: Callable[..., Any], inputs: dict[str, Any]) -> Any:
    """fn(**inputs) on copies of the inputs; Failure if it raises or changes them."""
    kept = copy.deepcopy(inputs)
    given = copy.deepcopy(inputs)
    running["inputs"] = show(inputs)
    try:
        result = fn(**given)
    except Exception as error:  # noqa: BLE001 - anything the learner's code raises is feedback
        raise Failure(f"✗ {name}: {describe_error(error)}\n  inputs:   {show(inputs)}") from None
    for key, value in kept.items():
        if not same(value, given[key]):
            raise Failure(
                f"✗ {name}: your function changed its input `{key}` (from {value!r} to "
                f"{given[key]!r}). The caller still needs it: work on a copy or leave it alone."
                f"\n  inputs:   {show(inputs)}"
            )
    return result


def show(inputs: dict[str, Any]) -> str:
    """'block_table=[3, 0], page_size=2', arrays by shape (their values fill screens)."""
    parts = []
    for key, value in inputs.items():
        if isinstance(value, np.ndarray):
            parts.append(f"{key}=<array {list(value.shape)} {value.dtype}>")
        elif callable(value):
            parts.append(f"{key}={getattr(value, '__name__', 'a function')}")
        else:
            parts.append(f"{key}={value!r}")
    return ", ".join(parts)


def wrong(
    name: str, inputs: dict[str, Any], expected: object, got: object, rule: str, hint: str = ""
) -> Failure:
    """The Failure for a wrong answer: the case, expected, got, the rule (and a hint)."""
    lines = [
        f"✗ {name}: wrong answer for the smallest failing case",
        f"  inputs:   {show(inputs)}",
        f"  expected: {expected!r}",
        f"  got:      {got!r}",
        f"  rule:     {rule}",
    ]
    if hint:
        lines.append(f"  hint:     {hint}")
    return Failure("\n".join(lines))
