"""Argument checks shared by every public call: clear errors that name the argument.

Each check raises TypeError (wrong kind of value) or ValueError (right kind, outside the
allowed range) with a message naming the argument, the value and what is allowed, before
anything is changed. vLLM validates the same things in its `SamplingParams` and request
processing; here one module keeps the wording the same everywhere.
"""

from __future__ import annotations

from collections.abc import Hashable
from collections.abc import Sequence as SequenceLike

import numpy as np

MAX_TOKEN_ID = 2**63 - 1  # token ids are hashed as int64


def check_int(name: str, value: object, low: int, high: int | None = None) -> int:
    """An int (not a bool) in [low, high] (no upper bound when high is None)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    if value < low or (high is not None and value > high):
        allowed = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be {allowed}, got {value}")
    return int(value)


def check_vocab(name: str, token_ids: SequenceLike[int], vocab_size: int) -> None:
    """Every id in [0, vocab_size)."""
    for i, t in enumerate(token_ids):
        if not 0 <= t < vocab_size:
            raise ValueError(f"{name}[{i}] = {t} is outside the vocabulary [0, {vocab_size - 1}]")


def check_seq_id(name: str, seq_id: object) -> Hashable:
    if isinstance(seq_id, bool) or not isinstance(seq_id, (str, int)):
        raise TypeError(f"{name} must be a str or int, got {seq_id!r} ({type(seq_id).__name__})")
    if isinstance(seq_id, str) and not seq_id:
        raise ValueError(f"{name} must be a non-empty string")
    return seq_id


def check_token(name: str, token_id: object) -> int:
    if isinstance(token_id, bool) or not isinstance(token_id, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {token_id!r} ({type(token_id).__name__})")
    if not 0 <= token_id <= MAX_TOKEN_ID:
        raise ValueError(f"{name} must be in [0, 2**63 - 1], got {token_id}")
    return int(token_id)


def check_tokens(name: str, token_ids: object) -> tuple[list[int], bytes]:
    """Validate a non-empty 1-D run of non-negative int token ids.

    Returns the ids as a list and as their hashing encoding (`token_bytes`)."""
    if isinstance(token_ids, np.ndarray):
        if token_ids.ndim != 1 or token_ids.dtype.kind not in "iu":
            raise TypeError(f"{name} must be a 1-D int array, got {token_ids.dtype} {token_ids.shape}")
        array = token_ids
    elif isinstance(token_ids, (list, tuple, range)):
        if any(type(t) is not int for t in token_ids):
            for i, t in enumerate(token_ids):
                check_token(f"{name}[{i}]", t)
        try:
            array = np.asarray(token_ids, dtype=np.int64)
        except OverflowError:
            for i, t in enumerate(token_ids):
                check_token(f"{name}[{i}]", t)
            raise
    else:
        raise TypeError(
            f"{name} must be a list, tuple or 1-D int array of token ids, got "
            f"{type(token_ids).__name__} (encode text first, e.g. TinyLM.encode)"
        )
    if not array.size:
        raise ValueError(f"{name} must not be empty")
    if array.dtype.kind == "i" and array.min() < 0 or array.dtype.kind == "u" and array.max() > MAX_TOKEN_ID:
        i = int(np.argmin(array) if array.dtype.kind == "i" else np.argmax(array))
        raise ValueError(f"{name} must hold ids in [0, 2**63 - 1], got {array[i]} at index {i}")
    return array.tolist(), array.astype("<i8", copy=False).tobytes()


def check_number(name: str, value: object, low: float) -> float:
    """A finite real number (not a bool) >= low."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    if not low <= value < float("inf"):
        raise ValueError(f"{name} must be a finite number >= {low}, got {value!r}")
    return float(value)


def check_choice(name: str, value: object, choices: SequenceLike[str]) -> str:
    """One of a few strings."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, one of {tuple(choices)}, got {value!r}")
    if value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")
    return value


def check_bool(name: str, value: object) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")
    return bool(value)
