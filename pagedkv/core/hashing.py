"""Chained block hashes: the names prefix caching looks pages up by.

The hash of logical block i is H(hash of block i-1 || token ids of block i || extra key),
so equal hashes mean equal *prefixes*, not merely equal pages. vLLM v1 does the same
(`hash_block_tokens`) and offers a choice of H, its `prefix_caching_hash_algo`; so does
`CacheConfig.prefix_caching_hash_algo`:

- "sha256" (the default, as in vLLM): cryptographic, ~0.5 us a block here.
- "xxhash": xxHash's 128-bit XXH3 (the `xxhash` package), ~5x faster, not cryptographic.

Digests are over a fixed byte encoding (little-endian int64 token ids), so they are the
same in every process and on every run — Python's salted `hash()` is not. Only *full*
blocks are hashed: a partial block's content is still changing.

Whichever H is chosen, the pool checks a hit's token ids against the prompt (the collision
guard), so a collision could never serve the wrong K/V. Leaves out: vLLM's CBOR encodings
of the hashed tuple.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Sequence
from hashlib import sha256

import numpy as np
from xxhash import xxh3_128_digest

ROOT_HASH = b"pagedkv-root"  # parent of the first block (vLLM: NONE_HASH)
HASH_ALGOS = ("sha256", "xxhash")  # CacheConfig.prefix_caching_hash_algo
TOKEN_BYTES = 8  # a token id is encoded as a little-endian int64
LITTLE_ENDIAN = sys.byteorder == "little"  # then an array('q') is already the encoding


def _sha256(data: bytes) -> bytes:
    return sha256(data).digest()


DIGESTS: dict[str, Callable[[bytes], bytes]] = {"sha256": _sha256, "xxhash": xxh3_128_digest}


def encode_extra_key(extra_key: object) -> bytes:
    """Bytes an extra key (cache salt, adapter name) contributes to the first block's hash."""
    if extra_key is None:
        return b""
    if isinstance(extra_key, bytes):
        return b"\x01" + extra_key
    if isinstance(extra_key, str):
        return b"\x02" + extra_key.encode("utf-8")
    if isinstance(extra_key, int) and not isinstance(extra_key, bool):
        return b"\x03" + str(extra_key).encode("ascii")
    raise TypeError(f"extra_key must be None, str, bytes or int, got {type(extra_key).__name__}")


def token_bytes(token_ids: Sequence[int] | np.ndarray) -> bytes:
    """The fixed encoding hashed for a run of token ids: little-endian int64."""
    if type(token_ids) is array and token_ids.typecode == "q" and LITTLE_ENDIAN:  # a sequence's tokens
        return token_ids.tobytes()
    return np.asarray(token_ids, dtype="<i8").tobytes()


def token_ids_of(data: bytes) -> list[int]:
    """The token ids a `token_bytes` encoding holds. Example: token_bytes([5, 7]) -> [5, 7]."""
    return np.frombuffer(data, dtype="<i8").tolist()


def hash_block_tokens(
    parent_hash: bytes | None,
    token_ids: Sequence[int] | np.ndarray,
    extra_key: object = None,
    algo: str = "sha256",
) -> bytes:
    """Digest of one full block, given its parent's digest (None for the first block)."""
    parent = ROOT_HASH + encode_extra_key(extra_key) if parent_hash is None else parent_hash
    return DIGESTS[algo](parent + token_bytes(token_ids))


def chain_hashes(data: bytes, page_size: int, extra_key: object = None, algo: str = "sha256") -> list[bytes]:
    """Chained digests of every full block of `data`, the `token_bytes` of a token run."""
    width = TOKEN_BYTES * page_size  # bytes per block
    parent = ROOT_HASH + encode_extra_key(extra_key)
    hashes = []
    if algo == "sha256":  # hashlib's object, inline: a Python call per block costs as much as the hash
        for start in range(0, len(data) - width + 1, width):
            parent = sha256(parent + data[start : start + width]).digest()
            hashes.append(parent)
    else:
        digest = DIGESTS[algo]
        for start in range(0, len(data) - width + 1, width):
            parent = digest(parent + data[start : start + width])
            hashes.append(parent)
    return hashes


def block_hashes(
    token_ids: Sequence[int] | np.ndarray, page_size: int, extra_key: object = None, algo: str = "sha256"
) -> list[bytes]:
    """Chained digests of every *full* block of `token_ids` (a trailing partial block has none)."""
    return chain_hashes(token_bytes(token_ids), page_size, extra_key, algo)
