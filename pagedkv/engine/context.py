"""The prepared context a model computes from: tokens, positions, slot mapping, block tables.

A model does not walk sequences. Before each forward the runner turns the sequences of the
step into flat arrays, and the model only computes from them: nano-vllm's
prepare_prefill / prepare_decode (in its model runner) fill its `Context` (`slot_mapping`,
`context_lens`, `block_tables`, `cu_seqlens_q`), vLLM v1's `GPUModelRunner._prepare_inputs`
fills `input_ids`, `positions`, `slot_mapping`, `query_start_loc` and `seq_lens`.
`prepare` does both cases in one function, because a step may mix prompt chunks and
decodes (as in vLLM v1): each sequence contributes the tokens it has not computed yet.

Example: two sequences, page_size 4. "a" holds 6 tokens in pages [3, 5] with 4 computed;
"b" holds 3 tokens in page [0], none computed. Then token_ids = a[4:6] + b[0:3],
positions = [4, 5, 0, 1, 2], slot_mapping = [20, 21, 0, 1, 2], query_start_loc = [0, 2, 5],
context_lens = [6, 3].

Leaves out: padding for CUDA graphs, the key-side `cu_seqlens_k` of prefill kernels
(`context_lens` says the same), and multimodal or speculative-decoding inputs.
"""

from __future__ import annotations

from collections.abc import Hashable
from collections.abc import Sequence as SequenceLike
from dataclasses import dataclass

import numpy as np

from pagedkv.core.sequence import SequenceManager
from pagedkv.core.slot_mapping import slot_mapping


@dataclass(frozen=True)
class ForwardContext:
    """What one forward computes: every not-yet-computed token of B sequences (N tokens)."""

    token_ids: np.ndarray  # [N] the tokens to compute, sequence after sequence
    positions: np.ndarray  # [N] each token's position in its sequence
    slot_mapping: np.ndarray  # [N] where each token's K/V is written
    query_start_loc: np.ndarray  # [B + 1] sequence b's tokens are rows [b]:[b + 1]
    context_lens: np.ndarray  # [B] tokens each sequence attends to (all it holds)
    block_tables: list[list[int]]  # [B] each sequence's page ids

    @property
    def is_decode(self) -> bool:
        """Every sequence computes one token (the batched decode kernel applies)."""
        return len(self.token_ids) == len(self.context_lens)

    @property
    def last_rows(self) -> np.ndarray:
        """[B] the row of each sequence's last token: where its logits are read."""
        return self.query_start_loc[1:] - 1


def prepare(manager: SequenceManager, seq_ids: SequenceLike[Hashable]) -> ForwardContext:
    """The context of a forward over the tokens of `seq_ids` whose K/V are not computed yet.

    Raises ValueError if seq_ids is empty or repeats an id, or a sequence has nothing left
    to compute; KeyError (UnknownSequenceError) for an unknown id."""
    if not seq_ids:
        raise ValueError("seq_ids must name at least one sequence")
    if len(set(seq_ids)) != len(seq_ids):
        raise ValueError(f"seq_ids must be distinct, got {list(seq_ids)}")
    batch = [manager.get(s) for s in seq_ids]
    for seq in batch:
        if seq.num_computed_tokens >= seq.num_tokens:
            raise ValueError(f"sequence {seq.seq_id!r} has no token left to compute")
    page_size = manager.pool.page_size
    spans = [(s.num_computed_tokens, s.num_tokens) for s in batch]
    positions = [np.arange(a, b) for a, b in spans]
    lengths = [b - a for a, b in spans]
    return ForwardContext(
        token_ids=np.array([t for s, (a, b) in zip(batch, spans) for t in s.tokens[a:b]]),
        positions=np.concatenate(positions),
        slot_mapping=np.concatenate(
            [slot_mapping(s.block_table, page_size, p) for s, p in zip(batch, positions)]
        ),
        query_start_loc=np.concatenate([[0], np.cumsum(lengths)]),
        context_lens=np.array([s.num_tokens for s in batch]),
        block_tables=[s.block_table for s in batch],
    )
