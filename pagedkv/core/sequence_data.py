"""Sequence and AdmissionPlan: one sequence's tokens and block table, and an admission
worked out before it happens.

A `Sequence` is what vLLM v1's `Request` is to its `KVCacheManager`: token ids (prompt
then generated), the block table (logical block i -> page id), and how many tokens the
prefix cache served and the model has computed. Its token ids live in one `array('q')`
that is only ever appended to; the pages of its block table point into it (page.py), so
no page copies tokens. `SequenceManager` (sequence.py) creates and changes sequences.

Leaves out: sampling parameters and output streams (the Scheduler's `Request` has them).
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable
from typing import NamedTuple

import numpy as np

from pagedkv.core.plumbing.validation import check_int
from pagedkv.core.slot_mapping import slot_mapping


class Sequence:
    """One sequence's tokens and block table (every field is given by the manager).

    The token ids live in one `array('q')`, `tokens`, which the pages of the block table
    point into (page.py); `token_ids` is a list copy of it."""

    __slots__ = (
        "block_table",
        "extra_key",
        "num_cached_tokens",
        "num_computed_tokens",
        "num_prompt_tokens",
        "page_size",
        "parent",
        "seq_id",
        "tokens",
    )

    def __init__(
        self,
        seq_id: Hashable,
        tokens: array,
        block_table: list[int],
        num_prompt_tokens: int,
        num_cached_tokens: int,
        num_computed_tokens: int,
        extra_key: object,
        parent: Hashable | None,
        page_size: int,
    ) -> None:
        self.seq_id = seq_id
        self.tokens = tokens  # prompt then generated tokens; only ever appended to
        self.block_table = block_table  # logical block i -> page id
        self.num_prompt_tokens = num_prompt_tokens
        self.num_cached_tokens = num_cached_tokens  # prompt tokens served by prefix hits at admission
        self.num_computed_tokens = num_computed_tokens  # tokens whose K/V are in the cache
        self.extra_key = extra_key  # enters the first page's hash (None for none)
        self.parent = parent  # fork parent
        self.page_size = page_size  # the pool's page size

    @property
    def token_ids(self) -> list[int]:
        """Prompt then generated token ids (a new list)."""
        return self.tokens.tolist()

    @property
    def num_tokens(self) -> int:
        return len(self.tokens)

    def slot(self, position: int) -> int:
        """Flat slot (page_id * page_size + offset) of the token at `position`."""
        position = check_int("position", position, 0, len(self.tokens) - 1)
        return slot_mapping(self.block_table, self.page_size, position)

    def slot_mapping(self, start: int = 0, end: int | None = None) -> np.ndarray:
        """Slots of positions start..end-1 as an int64 array."""
        n = len(self.tokens)
        end = n if end is None else check_int("end", end, 0, n)
        start = check_int("start", start, 0, end)
        return slot_mapping(self.block_table, self.page_size, np.arange(start, end))

    def copy(self) -> Sequence:
        """An independent copy (its own token array and block table)."""
        return Sequence(
            self.seq_id,
            array("q", self.tokens),
            list(self.block_table),
            self.num_prompt_tokens,
            self.num_cached_tokens,
            self.num_computed_tokens,
            self.extra_key,
            self.parent,
            self.page_size,
        )

    def __repr__(self) -> str:
        return (
            f"Sequence(seq_id={self.seq_id!r}, token_ids={self.token_ids}, block_table={self.block_table}, "
            f"num_prompt_tokens={self.num_prompt_tokens}, num_cached_tokens={self.num_cached_tokens}, "
            f"num_computed_tokens={self.num_computed_tokens}, extra_key={self.extra_key!r}, "
            f"parent={self.parent!r})"
        )


class AdmissionPlan(NamedTuple):
    """What `add` will do for a prompt, worked out without changing anything."""

    seq_id: Hashable
    tokens: array  # the prompt's token ids
    extra_key: object
    hashes: list[bytes]  # chained digests of the prompt's full pages (none if caching is off)
    hits: list[int]  # pages reused from the prefix cache, block order
    revived: list[int]  # those of the hits that are CACHED now (they leave the evictable supply)
    num_new_pages: int  # pages to allocate for the rest of the prompt
    num_cached_tokens: int  # prompt tokens the hits cover

    @property
    def token_ids(self) -> list[int]:
        """The prompt's token ids as a list."""
        return self.tokens.tolist()
