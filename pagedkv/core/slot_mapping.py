"""Slot mapping: where a token's K/V live, given its sequence's block table.

A sequence's token at position p sits in logical block p // page_size, at offset
p % page_size inside it. The block table maps the logical block to a physical page, and
the K/V store, viewed as one flat run of `num_pages * page_size` slots, holds the token at

    slot = block_table[p // page_size] * page_size + p % page_size

This module is the only place that formula is written: the sequence manager
(`Sequence.slot`, `slot_mapping`), the attention engine (gathering a context) and the
swap space (host pages) all call `slot_mapping`. vLLM computes the same array on every
step (`BlockTable.compute_slot_mapping` in its GPU model runner) and hands it to the
`reshape_and_cache` kernel that writes K/V; nano-vllm builds it in `prepare_prefill`.

`num_blocks` is the other half of the arithmetic: how many pages n tokens occupy.

Leaves out: padding slots (vLLM marks padded batch entries with slot -1) and sliding-window
block tables whose early entries are recycled.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

import numpy as np


@overload
def slot_mapping(block_table: Sequence[int] | np.ndarray, page_size: int, positions: int) -> int: ...


@overload
def slot_mapping(
    block_table: Sequence[int] | np.ndarray, page_size: int, positions: np.ndarray
) -> np.ndarray: ...


def slot_mapping(
    block_table: Sequence[int] | np.ndarray, page_size: int, positions: int | np.ndarray
) -> int | np.ndarray:
    """The slot of each position: block_table[p // page_size] * page_size + p % page_size.

    One int position gives one int (no numpy: `append_slot` calls this per token); an array
    of positions gives an int64 array. The caller checks the positions are in range.

    Example: block_table [7, 2], page_size 4: position 5 -> 2 * 4 + 1 = 9;
    positions [0, 3, 4] -> [28, 31, 8].
    """
    table: Any = block_table
    if type(positions) is int:  # the decode path: one token, plain ints
        return table[positions // page_size] * page_size + positions % page_size
    if isinstance(positions, np.integer):
        positions = int(positions)
    elif not isinstance(block_table, np.ndarray):
        table = np.asarray(block_table, dtype=np.int64)
    return table[positions // page_size] * page_size + positions % page_size


def num_blocks(num_tokens: int, page_size: int) -> int:
    """Pages `num_tokens` tokens occupy: ceil(num_tokens / page_size) (vLLM's `cdiv`).

    Example: num_blocks(9, 4) -> 3; num_blocks(8, 4) -> 2; num_blocks(0, 4) -> 0."""
    return -(-num_tokens // page_size)
