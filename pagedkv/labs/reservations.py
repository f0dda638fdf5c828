"""The slots a contiguous policy reserves for one request, and the buddy block that holds them.

Notebook 06 (section 1) works the paper's rules out per request: the oracle asks for the
final length, our `pow2` for the final length rounded up to a power of two, the paper's
`pow2` for the prompt plus the output rounded up; a buddy allocator then rounds the range up
once more, to a power-of-two block (`next_pow2`).
"""

from __future__ import annotations

from pagedkv.engine.request import Request
from pagedkv.labs.contiguous import ContiguousKVCache, next_pow2

__all__ = ["buddy_block", "reserved_slots"]


def reserved_slots(policy: str, request: Request, pow2_of: str = "sequence", max_seq_len: int = 2048) -> int:
    """Slots `policy` ("max", "pow2" or "oracle") reserves for `request` at admission, capped
    at `max_seq_len`; `pow2_of="output"` is the paper's `pow2` (prompt + output rounded up).
    Example: a request of 115 prompt and 190 output tokens -> oracle 305, pow2 512, and
    pow2 of the output 115 + 256 = 371."""
    arena = ContiguousKVCache(max_seq_len, policy, max_seq_len, pow2_of=pow2_of)
    return arena.reservation_size(request.final_len, request.prompt_len)


def buddy_block(slots: int) -> int:
    """The buddy allocator's block for a range of `slots` slots: the next power of two.
    Example: 305 -> 512, 600 -> 1024, 512 -> 512."""
    return next_pow2(slots)
