"""Slot mapping: a sequence's block table, and where each of its tokens' K/V live.

A sequence's token at position p sits in logical block p // page_size, at offset
p % page_size inside it. The block table maps the logical block to a physical page, and
the K/V store, viewed as one flat run of `num_pages * page_size` slots, holds the token at

    slot = block_table[p // page_size] * page_size + p % page_size

This module is the only place that formula is written: a `Sequence` (`slot`,
`slot_mapping`), the attention engine (gathering a context) and the swap space (host
pages) all call `slot_mapping`. vLLM computes the same array on every step
(`BlockTable.compute_slot_mapping` in its GPU model runner) and hands it to the
`reshape_and_cache` kernel that writes K/V; nano-vllm builds it in `prepare_prefill`.
`num_blocks` is the other half of the arithmetic: how many pages n tokens occupy.

`Sequence`, the data of one sequence (tokens, block table, counts), lives here with the
arithmetic of its block table, as vLLM keeps its `BlockTable` and `compute_slot_mapping`
together in one module. It is plain data below everything that reads it: the snapshot
and invariant checks (core/observe) read sequences, and the `SequenceManager`
(sequence.py), which creates and changes them, sits above those checks.

Leaves out: padding slots (vLLM marks padded batch entries with slot -1), sliding-window
block tables whose early entries are recycled, and a sequence's sampling parameters and
output stream (the Scheduler's `Request` has them).
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable
from collections.abc import Sequence as SequenceLike
from dataclasses import dataclass, replace
from typing import Any, overload

import numpy as np

from pagedkv.core.plumbing.validation import check_int


@overload
def slot_mapping(block_table: SequenceLike[int] | np.ndarray, page_size: int, positions: int) -> int: ...


@overload
def slot_mapping(
    block_table: SequenceLike[int] | np.ndarray, page_size: int, positions: np.ndarray
) -> np.ndarray: ...


def slot_mapping(
    block_table: SequenceLike[int] | np.ndarray, page_size: int, positions: int | np.ndarray
) -> int | np.ndarray:
    """The slot of each position: block_table[p // page_size] * page_size + p % page_size.

    One int position gives one int (no numpy: `append_slot` calls this per token); an array
    of positions gives an int64 array. The caller checks the positions are in range.

    Example: block_table [7, 2], page_size 4: position 5 -> 2 * 4 + 1 = 9;
    positions [0, 3, 4] -> [28, 31, 8].
    """
    table: Any = block_table
    if isinstance(positions, np.ndarray):
        table = np.asarray(block_table, dtype=np.int64)
    else:
        positions = int(positions)
    return table[positions // page_size] * page_size + positions % page_size


def num_blocks(num_tokens: int, page_size: int) -> int:
    """Pages `num_tokens` tokens occupy: ceil(num_tokens / page_size) (vLLM's `cdiv`).

    Example: num_blocks(9, 4) -> 3; num_blocks(8, 4) -> 2; num_blocks(0, 4) -> 0."""
    return -(-num_tokens // page_size)


@dataclass(eq=False, repr=False, slots=True)
class Sequence:
    """One sequence's tokens and block table (the `SequenceManager` builds and changes it)."""

    seq_id: Hashable
    tokens: array  # array('q'): prompt then generated token ids, only ever appended to
    block_table: list[int]  # logical block i -> page id
    page_size: int  # the pool's
    num_prompt_tokens: int
    num_cached_tokens: int = 0  # prompt tokens served by prefix hits at admission
    num_computed_tokens: int = 0  # tokens whose K/V are in the cache
    extra_key: object = None  # enters the first page's hash (None for none)
    parent: Hashable | None = None  # the sequence it was forked from

    @property
    def token_ids(self) -> list[int]:
        """Prompt then generated token ids (a new list)."""
        return self.tokens.tolist()

    @property
    def num_tokens(self) -> int:
        return len(self.tokens)

    def slot(self, position: int) -> int:
        """Flat slot (`slot_mapping`) of the token at `position`."""
        position = check_int("position", position, 0, len(self.tokens) - 1)
        return slot_mapping(self.block_table, self.page_size, position)

    def slot_mapping(self, start: int = 0, end: int | None = None) -> np.ndarray:
        """Slots of positions start..end-1 as an int64 array."""
        n = len(self.tokens)
        end = n if end is None else check_int("end", end, 0, n)
        start = check_int("start", start, 0, end)
        return slot_mapping(self.block_table, self.page_size, np.arange(start, end))

    def copy(self, **changes: Any) -> Sequence:
        """An independent copy (its own token array and block table), with `changes` to
        other fields. Example: a fork is parent.copy(seq_id=child_id, parent=parent_id)."""
        return replace(self, tokens=array("q", self.tokens), block_table=list(self.block_table), **changes)

    def __repr__(self) -> str:
        return (
            f"Sequence(seq_id={self.seq_id!r}, token_ids={self.token_ids}, block_table={self.block_table}, "
            f"num_prompt_tokens={self.num_prompt_tokens}, num_cached_tokens={self.num_cached_tokens}, "
            f"num_computed_tokens={self.num_computed_tokens}, extra_key={self.extra_key!r}, "
            f"parent={self.parent!r})"
        )
