"""Argument checks shared by every public call: one rule, one wording.

The rule (docs/design.md rule 9): a value of the wrong kind raises TypeError, a value of
the right kind outside what is allowed raises ValueError, and an id that names nothing
live raises `UnknownSequenceError`, a KeyError. Every message names the argument, the
value it got and what is allowed, and every check runs before anything is changed, so a
failed call leaves the pool exactly as it was.

vLLM validates the same things when it verifies `SamplingParams` and in its request
processor; keeping the checks in one module keeps the wording the same everywhere.

Leaves out: coercion. A float 3.0 is not an int here and a string is not a token list:
a silent conversion would hide the caller's mistake.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Hashable, Iterable, Mapping
from collections.abc import Sequence as SequenceLike
from typing import Any, TypeVar

import numpy as np

MAX_TOKEN_ID = 2**63 - 1  # token ids are hashed as int64
INT64 = np.dtype("<i8")  # numpy keeps one instance of each builtin dtype
INT_TYPECODES = "bBhHiIlLqQ"  # the array('...') typecodes of ints
V = TypeVar("V")


class UnknownSequenceError(KeyError):
    """No live sequence (or request, or reservation) has this id."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0])


def _kind(value: object) -> str:
    return f"{value!r} ({type(value).__name__})"


def check_instance(name: str, value: object, cls: type) -> Any:
    """`value` is an instance of `cls`, else TypeError.

    Example: check_instance("pool", {}, KVCachePool) raises "pool must be a KVCachePool, got dict"."""
    if not isinstance(value, cls):
        article = "an" if cls.__name__[0] in "AEIOU" else "a"
        raise TypeError(f"{name} must be {article} {cls.__name__}, got {type(value).__name__}")
    return value


def check_int(name: str, value: object, low: int, high: int | None = None) -> int:
    """An int (not a bool) in [low, high] (no upper bound when high is None).

    Example: check_int("n", 3, 0) -> 3; check_int("n", 3.0, 0) raises TypeError."""
    # `type(value) is int` first: the common case costs one check (a bool's type is bool)
    if type(value) is not int and (isinstance(value, bool) or not isinstance(value, (int, np.integer))):
        raise TypeError(f"{name} must be an int, got {_kind(value)}")
    if value < low or (high is not None and value > high):
        allowed = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be {allowed}, got {value}")
    return int(value)


def check_bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {_kind(value)}")
    return value


def check_choice(name: str, value: object, choices: SequenceLike[str]) -> str:
    """One of the strings `choices` (TypeError for a non-string, ValueError for another one)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be one of {tuple(choices)}, got {_kind(value)}")
    if value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")
    return value


def check_callable(name: str, value: object) -> Callable[..., Any]:
    if not callable(value):
        raise TypeError(f"{name} must be callable, got {type(value).__name__}")
    return value


def check_vocab(name: str, token_ids: SequenceLike[int], vocab_size: int) -> None:
    """Every id in [0, vocab_size)."""
    for i, t in enumerate(token_ids):
        if not 0 <= t < vocab_size:
            raise ValueError(f"{name}[{i}] = {t} is outside the vocabulary [0, {vocab_size - 1}]")


def check_seq_id(name: str, seq_id: object) -> Hashable:
    """A sequence id: a non-empty str or an int (not a bool)."""
    if isinstance(seq_id, bool) or not isinstance(seq_id, (str, int)):
        raise TypeError(f"{name} must be a str or int, got {_kind(seq_id)}")
    if isinstance(seq_id, str) and not seq_id:
        raise ValueError(f"{name} must be a non-empty string, got ''")
    return seq_id


def check_known(name: str, key: object, live: Mapping[Any, V], what: str = "a live sequence") -> V:
    """live[key], or UnknownSequenceError naming the key and a few live ones."""
    try:
        return live[key]
    except (KeyError, TypeError):  # TypeError: an unhashable key is not live either
        raise UnknownSequenceError(f"{name} {key!r} is not {what} (live: {list(live)[:8]})") from None


def check_new(name: str, key: Hashable, live: Mapping[Any, Any], what: str = "a live sequence") -> Hashable:
    """`key` is not yet in `live`, else ValueError (a duplicate id is a wrong value)."""
    if key in live:
        raise ValueError(f"{name} {key!r} is already {what}")
    return key


def check_token(name: str, token_id: object) -> int:
    if isinstance(token_id, bool) or not isinstance(token_id, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {_kind(token_id)}")
    if not 0 <= token_id <= MAX_TOKEN_ID:
        raise ValueError(f"{name} must be in [0, 2**63 - 1], got {token_id}")
    return int(token_id)


def check_token_list(name: str, token_ids: SequenceLike[object]) -> list[int]:
    """`check_token` of each id, as a list of ints: one pass in C when they are all plain
    ints in range (the usual case), else each one in turn, naming the first bad one."""
    ids = list(token_ids)
    if ids and set(map(type, ids)) == {int}:
        ints: list[int] = ids  # type: ignore[assignment]  # every one is an int, checked above
        if min(ints) >= 0 and max(ints) <= MAX_TOKEN_ID:
            return ints
    return [check_token(f"{name}[{i}]", t) for i, t in enumerate(ids)]


def check_tokens(name: str, token_ids: object) -> tuple[list[int], bytes]:
    """Validate a non-empty 1-D run of non-negative int token ids.

    Returns the ids as a list and as their hashing encoding (`token_bytes`)."""
    tokens, data = check_token_array(name, token_ids)
    return tokens.tolist(), data


def check_token_array(name: str, token_ids: object) -> tuple[array, bytes]:
    """`check_tokens`, returning the ids as an `array('q')` (what a sequence stores) and
    as their hashing encoding, little-endian int64 bytes."""
    if isinstance(token_ids, np.ndarray):
        if token_ids.dtype is INT64 and token_ids.ndim == 1 and token_ids.size:  # the usual case
            return _token_array(name, token_ids, token_ids.tobytes())
        if token_ids.ndim != 1 or token_ids.dtype.kind not in "iu":
            raise TypeError(f"{name} must be a 1-D int array, got {token_ids.dtype} {token_ids.shape}")
        values = token_ids
    elif isinstance(token_ids, array) and token_ids.typecode in INT_TYPECODES:
        values = np.array(token_ids, dtype=token_ids.typecode) if token_ids else np.zeros(0, np.int64)
    elif isinstance(token_ids, (list, tuple, range, array)):
        if not isinstance(token_ids, range) and not set(map(type, token_ids)) <= {int}:  # one pass in C
            _check_each(name, token_ids)
        try:
            values = np.asarray(token_ids, dtype=np.int64)
        except OverflowError:
            _check_each(name, token_ids)
            raise
    else:
        raise TypeError(
            f"{name} must be a list, tuple or 1-D int array of token ids, got "
            f"{type(token_ids).__name__} (encode text first, e.g. TinyLM.encode)"
        )
    if not values.size:
        raise ValueError(f"{name} must not be empty")
    encoding = "<i8" if values.dtype.kind == "i" else "<u8"
    return _token_array(name, values, values.astype(encoding, copy=False).tobytes())


def _token_array(name: str, values: np.ndarray, data: bytes) -> tuple[array, bytes]:
    """The ids as an array('q') and `data`, their 64-bit little-endian encoding, once
    every id is in [0, 2**63 - 1]."""
    # An id outside [0, 2**63 - 1] (negative, or an unsigned one too large) is exactly one
    # whose 64-bit little-endian encoding has the top bit of its last byte set.
    if not data[7::8].isascii():
        i = int(np.argmin(values) if values.dtype.kind == "i" else np.argmax(values))
        raise ValueError(f"{name} must hold ids in [0, 2**63 - 1], got {values[i]} at index {i}")
    tokens = array("q")
    tokens.frombytes(data)
    if sys.byteorder == "big":
        tokens.byteswap()
    return tokens, data


def _check_each(name: str, token_ids: Iterable[object]) -> None:
    for i, t in enumerate(token_ids):
        check_token(f"{name}[{i}]", t)


def check_array(
    name: str,
    value: object,
    shape: tuple[int, ...],
    dtype: str | None = None,
    finite: bool = False,
    contiguous: bool = False,
) -> np.ndarray:
    """A numpy array of exactly `shape` (and `dtype`, C-contiguous, finite when asked):
    TypeError for a non-array, ValueError for anything else that differs."""
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{name} must be a numpy array of shape {shape}, got {type(value).__name__}")
    if value.shape != shape or (dtype is not None and value.dtype != np.dtype(dtype)):
        want = f"shape {shape}" + (f" and dtype {np.dtype(dtype)}" if dtype is not None else "")
        raise ValueError(f"{name} must be an array of {want}, got {value.shape} {value.dtype}")
    if contiguous and not value.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous (views of it are reshaped), got a strided array")
    if finite and not np.isfinite(value).all():
        raise ValueError(f"{name} holds NaN or inf; refusing to cache it")
    return value


def check_number(name: str, value: object, low: float) -> float:
    """A finite real number (not a bool) >= low."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    if not low <= value < float("inf"):
        raise ValueError(f"{name} must be a finite number >= {low}, got {value!r}")
    return float(value)


def check_items(name: str, values: object, cls: type[V]) -> list[V]:
    """A non-empty list or tuple of `cls` instances: TypeError for another kind or a wrong
    item, ValueError when it is empty.

    Example: check_items("runs", [], Run) raises "runs must hold at least one Run"."""
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"{name} must be a list or tuple of {cls.__name__}, got {type(values).__name__}")
    for i, value in enumerate(values):
        check_instance(f"{name}[{i}]", value, cls)
    if not values:
        raise ValueError(f"{name} must hold at least one {cls.__name__}")
    return list(values)
