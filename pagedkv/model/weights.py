"""TinyLM's shipped weights: a float16 .npz with a JSON card that records its sha256.

`tools/train_model.py` writes `pagedkv/data/tinylm.npz` (one array per parameter, named
as by `TinyLM.state_dict`) and `tinylm.json` (the model card: shape, corpus, training run,
and the file's size and sha256). `read_weights` checks the file against the card before
numpy reads a byte of it, so a missing, truncated or altered file is one `WeightsFileError`
naming the file and what is wrong, never a zipfile or numpy traceback. Hugging Face's
safetensors plays the same role (a header with shapes, raw arrays, hashes kept by the hub);
the .npz is the numpy-only equivalent. This module reads and writes arrays and cards only;
`TinyLM.load` / `TinyLM.pretrained` build the model from them.

The archive is written with fixed timestamps, so the same weights give the same bytes and
a rebuild that changes nothing leaves `git status` clean. Leaves out: sharding, memory
mapping (the file is ~1.6 MB), signatures.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import numpy as np

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
WEIGHTS_FILE = "tinylm.npz"
STORED_DTYPE = "float16"  # halves the file; the model computes in float32 (or float64)


class WeightsFileError(ValueError):
    """A weights file or its card is missing, truncated, altered or does not fit TinyLM."""


def check_state(state: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    """ValueError unless `state` has exactly the names and shapes of `expected`."""
    if set(state) != set(expected):
        missing, extra = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
        raise ValueError(
            f"weights must be exactly {len(expected)} arrays; missing {missing}, unexpected {extra}"
        )
    for name, array in state.items():
        if array.shape != expected[name].shape:
            raise ValueError(
                f"weight {name!r} has shape {array.shape}, the model needs {expected[name].shape}"
            )


def _card_path(path: Path) -> Path:
    return path.with_suffix(".json")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def save_weights(state: dict[str, np.ndarray], card: dict, path: Path | None = None) -> Path:
    """Write weights by name (`TinyLM.state_dict()`, as float16) and `card` plus the file's
    size and sha256."""
    path = DATA_DIR / WEIGHTS_FILE if path is None else Path(path)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, array in sorted(state.items()):
            member = io.BytesIO()
            np.lib.format.write_array(member, array.astype(STORED_DTYPE), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, member.getvalue())
    data = buffer.getvalue()
    path.write_bytes(data)
    card = {
        **card,
        "stored_dtype": STORED_DTYPE,
        "file": path.name,
        "bytes": len(data),
        "sha256": _sha256(data),
    }
    _card_path(path).write_text(json.dumps(card, indent=1) + "\n")
    return path


def load_card(path: Path | None = None) -> dict:
    """The model card stored next to a weights file (default: the shipped one)."""
    card_path = _card_path(DATA_DIR / WEIGHTS_FILE if path is None else Path(path))
    try:
        card = json.loads(card_path.read_text())
    except FileNotFoundError:
        raise WeightsFileError(
            f"model card {card_path} is missing (rebuild with `make train-model`)"
        ) from None
    except (OSError, ValueError) as err:
        raise WeightsFileError(f"model card {card_path} is unreadable: {err}") from None
    missing = [k for k in ("shape", "bytes", "sha256") if k not in card]
    if missing:
        raise WeightsFileError(f"model card {card_path} lacks {missing}")
    return card


def _checked_bytes(path: Path, card: dict) -> bytes:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise WeightsFileError(f"weights file {path} is missing (rebuild with `make train-model`)") from None
    except OSError as err:
        raise WeightsFileError(f"weights file {path} cannot be read: {err.strerror}") from None
    if len(data) < card["bytes"]:
        raise WeightsFileError(
            f"weights file {path} is truncated: {len(data):,} bytes, its card records {card['bytes']:,}"
        )
    if len(data) > card["bytes"] or _sha256(data) != card["sha256"]:
        raise WeightsFileError(
            f"weights file {path} was altered: its sha256 is {_sha256(data)[:16]}..., "
            f"its card records {card['sha256'][:16]}... (rebuild with `make train-model`)"
        )
    return data


def read_weights(path: Path | str | None = None) -> tuple[dict, dict[str, np.ndarray]]:
    """(card, weights by name) of `path` (default: the shipped file), checked against its card."""
    path = DATA_DIR / WEIGHTS_FILE if path is None else Path(path)
    card = load_card(path)
    data = _checked_bytes(path, card)
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        return card, {name: archive[name] for name in archive.files}
