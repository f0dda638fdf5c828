"""Checker for the `block_hashes` exercise: the chained hashes of a prompt's full blocks.

The learner gets the one-block hash function (`hash_block_tokens`, vLLM's function of the
same name) and chains it; the oracle is the package's `block_hashes`, which the pool's
prefix index is keyed by. Cases run shortest prompt first.

Leaves out: the extra key (cache salt) that enters the first block's hash.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pagedkv.core.hashing import block_hashes, hash_block_tokens
from pagedkv.exercises.guard import Failure, call, wrong

RULE = (
    "only full blocks are hashed (a partial block is still "
    "changing), and each block's hash covers its parent's hash, so equal hashes mean equal "
    "prefixes; the first block's parent is None"
)


class ShortHash(bytes):
    """A digest that prints as its first 8 hex digits (feedback stays one line)."""

    def __repr__(self) -> str:
        return self.hex()[:8] + "…"


def _short(hashes: object) -> object:
    if isinstance(hashes, list) and all(isinstance(h, bytes) for h in hashes):
        return [ShortHash(h) for h in hashes]
    return hashes


def _cases() -> list[dict]:
    rng = np.random.default_rng(0)
    cases = []
    for page_size in (1, 2, 3, 4):
        for length in range(0, 3 * page_size + 2):
            tokens = rng.integers(0, 50, length).tolist()
            cases.append(dict(token_ids=tokens, page_size=page_size, hash_block=hash_block_tokens))
    cases.sort(key=lambda c: (len(c["token_ids"]), c["page_size"]))
    return cases


def _hint(case: dict, expected: list[bytes], got: list) -> str:
    tokens, size = case["token_ids"], case["page_size"]
    blocks = [tokens[i : i + size] for i in range(0, len(tokens), size)]
    if len(got) == len(expected) + 1 and len(tokens) % size:
        return "the trailing partial block got a hash: only full blocks have one"
    if len(got) == len(expected) - 1:
        return "the last full block has no hash in your answer"
    if len(got) == len(expected) and len(got) > 1:
        if got == [hash_block_tokens(None, b) for b in blocks[: len(got)]]:
            return "every block was hashed on its own: a block's hash must depend on its parent's"
        right = next(i for i, (g, e) in enumerate(zip(got, expected)) if g != e)
        if right:
            return f"the first {right} hash(es) are right, the next is not: look at the parent you pass on"
    return ""


def check_block_hashes(fn: Callable) -> str:
    """fn(token_ids, page_size, hash_block) -> the chained hash of every full block."""
    name, cases = "block_hashes", _cases()
    for case in cases:
        expected = block_hashes(case["token_ids"], case["page_size"])
        got = call(name, fn, case, allowed=(hash_block_tokens,))
        if not isinstance(got, (list, tuple)) or not all(isinstance(h, bytes) for h in got):
            raise Failure(
                f"✗ {name}: return a list of the bytes hash_block returns, one per full block; "
                f"got {got!r}\n  inputs:   token_ids={case['token_ids']}, page_size={case['page_size']}"
            )
        got = list(got)
        if got != expected:
            raise wrong(name, case, _short(expected), _short(got), RULE, _hint(case, expected, got))
    given = (hash_block_tokens,)
    before = call(
        name, fn, dict(token_ids=[7, 1, 2, 3, 4, 5], page_size=2, hash_block=hash_block_tokens), given
    )
    after = call(
        name, fn, dict(token_ids=[8, 1, 2, 3, 4, 5], page_size=2, hash_block=hash_block_tokens), given
    )
    changed = sum(a != b for a, b in zip(before, after))
    return (
        f"✓ {name}: all {len(cases)} cases right, each hash equal to the pool's prefix-index key. "
        f"Changing the first token of [7, 1, 2, 3, 4, 5] changes {changed} of its 3 block hashes: "
        "a prefix hit really means the same prefix."
    )
