"""Running a learner's code safely: time limits, their exceptions, their mutations, delegation.

A checker never lets the learner's code crash it. Every call goes through `call` (or
`learner_code` around a method call), which turns an exception into a `Failure` naming the
case and the line of the learner's code that raised (never a traceback from inside pagedkv),
notices when the code changed its inputs, and refuses an answer that hands the work to
pagedkv's own implementation (the checkers' oracles) instead of doing it.

Two time limits: each call of the learner's code gets `CALL_LIMIT` seconds ("never returns":
an endless loop), the whole check `TOTAL_LIMIT` ("too slow": every call returned, but all of
them together took too long). In the main thread on Unix (where a Jupyter kernel runs a
cell) both are one `signal.setitimer` alarm set to the nearer deadline, which raises inside
the runaway loop and so really stops it. A thread with `join(timeout)` could only walk away
from the loop and leave it burning a core until a restart, so that is the fallback only where
no alarm exists (Windows, a check called from another thread), for the total limit only.

Leaves out: sandboxing. The code runs in the learner's own process, with their rights.
"""

from __future__ import annotations

import copy
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # frames in here are not the learner's
CALL_LIMIT = 3.0  # seconds one call of the learner's code may take: a right answer needs milliseconds
TOTAL_LIMIT = 25.0  # seconds for a whole check: room for slow but correct code, under nbgrader's cell timeout
running: dict[str, Any] = {"inputs": "", "calls": 0, "seconds": 0.0}  # what the learner's code was last given
deadlines: dict[str, float | None] = {"total": None, "call": None}  # time.monotonic() values


class Failure(Exception):
    """A check failed; the message is ready to show to the learner."""


class TimeLimitExceeded(BaseException):
    """Raised by the alarm (a BaseException, so the learner's `except Exception` cannot eat it)."""

    def __init__(self, which: str) -> None:
        super().__init__(which)
        self.which = which  # "call" (one call never returned) or "total" (the check took too long)


class Delegated(BaseException):
    """The learner's code called into pagedkv (a BaseException: their `except` cannot eat it)."""


def can_interrupt() -> bool:
    """True where the time limits can stop a runaway loop (main thread, SIGALRM available)."""
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def _arm() -> None:
    """Set the alarm to the nearer deadline (or switch it off)."""
    if not can_interrupt():
        return
    ends = [d for d in deadlines.values() if d is not None]
    signal.setitimer(signal.ITIMER_REAL, max(min(ends) - time.monotonic(), 1e-4) if ends else 0)


def _on_alarm(signum: int, frame: object) -> None:
    now, call_end = time.monotonic(), deadlines["call"]
    raise TimeLimitExceeded("call" if call_end is not None and now >= call_end - 1e-3 else "total")


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """The whole check's limit: raise TimeLimitExceeded("total") in the `with` block after `seconds`."""
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    deadlines["total"], deadlines["call"] = time.monotonic() + seconds, None
    _arm()
    try:
        yield
    finally:
        deadlines["total"] = deadlines["call"] = None
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL if previous is None else previous)


@contextmanager
def learner_code(allowed: tuple = ()) -> Iterator[None]:
    """Around one call of the learner's code: the per-call limit, timing, and no calls into
    pagedkv except through `allowed` (the functions the exercise hands over, e.g. hash_block)."""
    allowed_code = {getattr(f, "__code__", None) for f in allowed}
    previous_profile = sys.getprofile()

    def watch(frame: Any, event: str, arg: object) -> None:
        if event != "call" or frame.f_code in allowed_code or frame.f_code in OWN_CODE:
            return
        caller = frame.f_back
        if (
            _inside_package(frame.f_code.co_filename)
            and caller
            and not _inside_package(caller.f_code.co_filename)
        ):
            raise Delegated(frame.f_code.co_qualname)

    start = time.monotonic()
    deadlines["call"] = start + CALL_LIMIT
    _arm()
    sys.setprofile(watch)
    try:
        yield
    finally:
        sys.setprofile(previous_profile)
        deadlines["call"] = None
        _arm()
        running["calls"] += 1
        running["seconds"] += time.monotonic() - start


OWN_CODE = {
    _on_alarm.__code__,
    learner_code.__wrapped__.__code__,  # type: ignore[attr-defined]  # contextmanager keeps it
}  # the guard's own frames: the alarm, the context's exit


def _inside_package(filename: str) -> bool:
    return filename.startswith(str(PACKAGE_DIR))


def run_with_limit(job: Callable[[], bool], seconds: float, name: str) -> bool:
    """Run a whole check under the limits; print what stopped it and return False."""
    running.update(inputs="", calls=0, seconds=0.0)
    if can_interrupt():
        try:
            with time_limit(seconds):
                return job()
        except TimeLimitExceeded as stop:
            print(_timeout_message(name, stop.which, seconds))
            return False
    result: list[bool] = []
    worker = threading.Thread(target=lambda: result.append(job()), daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        print(
            _timeout_message(name, "total", seconds)
            + "\n  It is still running: restart the kernel before you try again."
        )
        return False
    return bool(result and result[0])


def _timeout_message(name: str, which: str, seconds: float) -> str:
    last = f"\n  inputs:   {running['inputs']}" if running["inputs"] else ""
    if which == "call":
        return (
            f"✗ {name}: one call of your code never returned (stopped after {CALL_LIMIT:g} s; a right "
            "answer takes milliseconds). An endless loop? Every loop must make progress towards its "
            f"end: look at the loop conditions.{last}"
        )
    calls, spent = running["calls"], running["seconds"]
    return (
        f"✗ {name}: too slow. Your code returned every time, but the check stopped after {seconds:g} s "
        f"with {calls} calls done ({1000 * spent / max(calls, 1):.0f} ms each on average; a right answer "
        "needs about a millisecond). Look for work repeated on every call or inside a loop "
        f"(copies of whole arrays, searching a list again and again).{last}"
    )


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
    where = learner_line(error)
    if isinstance(error, NotImplementedError):
        method = where.split(" in ", 1)[1].split(":")[0] if " in " in where else "your code"
        return (
            f"`{method}` is not written yet (it raises NotImplementedError): replace the "
            "`raise NotImplementedError()` line with your code"
        )
    text = f"it raised {type(error).__name__}: {error}"
    return text + (f"\n  at:       {where}" if where else "")


def refusal(name: str, what: str) -> Failure:
    """The Failure for an answer that hands the work to pagedkv's own implementation."""
    return Failure(
        f"✗ {name}: your code calls pagedkv's own `{what}`; an answer may not use pagedkv. "
        "The point is to write it yourself: use plain Python or numpy (and the functions the "
        "exercise hands you)."
    )


def call(name: str, fn: Callable[..., Any], inputs: dict[str, Any], allowed: tuple = ()) -> Any:
    """fn(*inputs.values()) on copies of the inputs; Failure if it raises, changes them or delegates.

    Positional, so the learner may name the parameters as they like (`def pages_needed(n, size)`).
    """
    kept = copy.deepcopy(inputs)
    given = copy.deepcopy(inputs)
    running["inputs"] = show(inputs)
    try:
        with learner_code(allowed):
            result = fn(*given.values())
    except Delegated as delegated:
        raise refusal(name, str(delegated)) from None
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
