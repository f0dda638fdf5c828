"""ContiguousKVCache: the baseline a paged KV cache replaces.

Before paging, serving systems (FasterTransformer, Orca) kept each request's K/V in one
contiguous range of slots, reserved when the request is admitted and sized for the longest
it could grow, because a contiguous tensor cannot be extended in place. This class is that
allocator over one arena of `num_slots` token slots:

- `add` reserves a range for a request, sized by a policy: `"max"` (the model's
  `max_seq_len`), `"pow2"` (a power of two, at most `max_seq_len`: of the final length, or,
  with `pow2_of="output"`, the prompt plus the next power of two of the output length, the
  paper's Orca (Pow2): "over-reserves the space by at most 2x") or `"oracle"` (exactly the
  final length, which no real system knows in advance). The range is placed first fit (the
  lowest-addressed hole that is large enough) or, with `allocator="buddy"`, by a buddy
  allocator (power-of-two blocks at aligned addresses, split and merged with their buddy), the
  allocator the paper assumes for its Orca baselines (Sec. 6.1);
- `append` fills one more reserved slot per generated token, `append_all` one for every
  request at once (an iteration of the batch); `free` returns the range.

`accounting()` sorts every slot into the categories of the vLLM paper (Kwon et al., SOSP
2023, Fig. 2): token states (slots holding K/V), reserved (slots the request will fill with
tokens it has not generated yet: up to its final length), internal fragmentation (reserved
slots beyond the final length: never used), external fragmentation (free slots in holes too small for the next
request) and free slots. They sum to `num_slots`.

Leaves out: K/V storage itself (this is bookkeeping only; the categories are the point),
compaction, and allocators other than first fit and buddy.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable
from dataclasses import dataclass

from pagedkv.core.plumbing.validation import check_choice, check_int, check_known, check_new, check_seq_id

POLICIES = ("max", "pow2", "oracle")
ALLOCATORS = ("first_fit", "buddy")
POW2_OF = ("sequence", "output")


def next_pow2(n: int) -> int:
    """The smallest power of two >= n (0 for 0). Example: 25 -> 32, 32 -> 32, 1 -> 1."""
    return 1 << (n - 1).bit_length() if n else 0


class BuddyAllocator:
    """Free power-of-two blocks of an arena of `num_slots` slots, each at an address that is a
    multiple of its size. The arena starts as its binary decomposition (15,728 = 8,192 + 4,096
    + ...); `alloc` splits the smallest free block that fits, `free` merges a block with its
    buddy (the other half of its parent) while the buddy is free."""

    def __init__(self, num_slots: int) -> None:
        self.free_blocks: dict[int, list[int]] = {}  # order -> sorted starts of free 2**order blocks
        start = 0
        for order in range(num_slots.bit_length() - 1, -1, -1):
            if num_slots >> order & 1:
                self.free_blocks[order] = [start]
                start += 1 << order

    def alloc(self, length: int) -> int | None:
        """Start of a block of next_pow2(length) slots, or None (changing nothing)."""
        want = (length - 1).bit_length()
        order = min((o for o, starts in self.free_blocks.items() if o >= want and starts), default=None)
        if order is None:
            return None
        start = self.free_blocks[order].pop(0)
        while order > want:  # split: keep the lower half, free the upper one
            order -= 1
            bisect.insort(self.free_blocks.setdefault(order, []), start + (1 << order))
        return start

    def free(self, start: int, length: int) -> None:
        order = (length - 1).bit_length()
        while True:
            starts = self.free_blocks.get(order, [])
            i = bisect.bisect_left(starts, buddy := start ^ (1 << order))
            if i == len(starts) or starts[i] != buddy:
                break
            starts.pop(i)  # the buddy is free: merge into the parent
            start, order = min(start, buddy), order + 1
        bisect.insort(self.free_blocks.setdefault(order, []), start)

    def blocks(self) -> list[tuple[int, int]]:
        """Free blocks as (start, length), by address."""
        return sorted((s, 1 << o) for o, starts in self.free_blocks.items() for s in starts)


class NoContiguousHoleError(MemoryError):
    """No free range of the arena is large enough for the reservation; nothing was changed."""


@dataclass(frozen=True)
class Reservation:
    """One request's contiguous range of slots."""

    req_id: Hashable
    start: int  # first slot of the range
    length: int  # slots reserved
    used: int  # slots holding token states (prompt + generated so far)
    final_len: int  # tokens the request will hold when it finishes
    asked: int  # slots the policy asked for (a buddy block rounds it up to `length`)


@dataclass(frozen=True)
class ContiguousAccounting:
    """Where the arena's slots are, in the vLLM paper's categories (they sum to num_slots)."""

    num_slots: int
    token_states: int  # slots holding K/V of a token
    reserved: int  # slots reserved for tokens still to be generated
    internal_fragmentation: int  # slots reserved beyond the final length: never filled
    external_fragmentation: int  # free slots in holes smaller than the next reservation
    free: int  # free slots in holes that could take the next reservation
    reservations: tuple[Reservation, ...]  # by start slot, for drawing the layout

    def as_dict(self) -> dict[str, int]:
        """The five categories and num_slots (without the layout)."""
        return {
            "num_slots": self.num_slots,
            "token_states": self.token_states,
            "reserved": self.reserved,
            "internal_fragmentation": self.internal_fragmentation,
            "external_fragmentation": self.external_fragmentation,
            "free": self.free,
        }


class ContiguousKVCache:
    """One arena of token slots; one contiguous reservation per request."""

    def __init__(
        self,
        num_slots: int,
        policy: str = "max",
        max_seq_len: int = 2048,
        *,
        allocator: str = "first_fit",
        pow2_of: str = "sequence",
    ) -> None:
        self.num_slots = check_int("num_slots", num_slots, 1, 1 << 40)
        self.max_seq_len = check_int("max_seq_len", max_seq_len, 1, num_slots)
        self.policy = check_choice("policy", policy, POLICIES)
        self.allocator = check_choice("allocator", allocator, ALLOCATORS)
        self.pow2_of = check_choice("pow2_of", pow2_of, POW2_OF)
        self._buddy = BuddyAllocator(num_slots) if allocator == "buddy" else None
        self._starts: list[int] = []  # sorted start slots of the reservations
        self._by_start: dict[int, Hashable] = {}  # start slot -> req id
        # req id -> [start, length, used - self._appended, final_len, asked]: `append_all` gives
        # every request a token by counting it once in `_appended`, not by visiting each one
        self._requests: dict[Hashable, list[int]] = {}
        self._appended = 0  # tokens `append_all` gave every request so far
        self._full_at: dict[int, int] = {}  # value of _appended -> requests holding final_len then
        self._totals = [0, 0, 0, 0]  # over the reservations: length, used, final_len, asked
        self._splits: dict[tuple, tuple[int, int]] = {}  # `_hole_split`'s, until the holes change

    # ---- queries -----------------------------------------------------------------------------

    def reservation_size(self, final_len: int, prompt_len: int = 0) -> int:
        """Slots the policy asks for a request of `prompt_len` prompt tokens that ends with
        `final_len` tokens (a buddy allocator then rounds it up to a power of two)."""
        check_int("final_len", final_len, 1, self.max_seq_len)
        check_int("prompt_len", prompt_len, 0, final_len)
        if self.policy == "max":
            return self.max_seq_len
        if self.policy == "pow2" and self.pow2_of == "output":
            return min(prompt_len + next_pow2(final_len - prompt_len), self.max_seq_len)
        if self.policy == "pow2":
            return min(next_pow2(final_len), self.max_seq_len)
        return final_len

    def __contains__(self, req_id: object) -> bool:
        try:
            return req_id in self._requests
        except TypeError:
            return False

    def __len__(self) -> int:
        return len(self._requests)

    def holes(self) -> list[tuple[int, int]]:
        """Free ranges as (start, length), by address."""
        out, cursor = [], 0
        for start in self._starts:
            if start > cursor:
                out.append((cursor, start - cursor))
            cursor = start + self._requests[self._by_start[start]][1]
        if cursor < self.num_slots:
            out.append((cursor, self.num_slots - cursor))
        return out

    def free_blocks(self) -> list[tuple[int, int]]:
        """Free ranges a reservation can take, as (start, length) by address: the buddy
        allocator's free blocks (neighbours that are not buddies stay apart), else `holes()`."""
        return self._buddy.blocks() if self._buddy is not None else self.holes()

    def accounting(self, next_final_len: int | None = None, next_prompt_len: int = 0) -> ContiguousAccounting:
        """Every slot in one category. A hole counts as external fragmentation when it cannot
        hold the reservation of a request with `next_final_len` tokens, `next_prompt_len` of
        them its prompt (default: the longest request, `max_seq_len`): the memory exists but
        cannot serve that request. Under a buddy allocator the holes are its free blocks."""
        final_len = self.max_seq_len if next_final_len is None else next_final_len
        need = self.reservation_size(final_len, min(next_prompt_len, final_len))
        reservations = tuple(self._reservation(self._by_start[s]) for s in self._starts)
        if self._buddy is None:
            holes = [length for _, length in self.holes()]
        else:
            holes, need = [length for _, length in self._buddy.blocks()], next_pow2(need)
        return ContiguousAccounting(
            num_slots=self.num_slots,
            token_states=sum(r.used for r in reservations),
            reserved=sum(r.final_len - r.used for r in reservations),
            internal_fragmentation=sum(r.asked - r.final_len for r in reservations),
            # NOTE: a buddy block's rounding (length - asked) is the allocator's waste, not the
            # policy's: counted with the unusable holes, as the paper's "external fragmentation
            # & others" (its Orca (Oracle) asks for exactly the final length).
            external_fragmentation=sum(h for h in holes if h < need)
            + sum(r.length - r.asked for r in reservations),
            free=sum(h for h in holes if h >= need),
            reservations=reservations,
        )

    def shares(self, next_final_len: int, next_prompt_len: int = 0) -> dict[str, int]:
        """`accounting(...).as_dict()` without the layout, from running totals (a serving run
        asks at every step; the same integers)."""
        too_small, large_enough = self._hole_split(next_final_len, next_prompt_len)
        length, used, final_len, asked = self._totals
        return {
            "num_slots": self.num_slots,
            "token_states": used,
            "reserved": final_len - used,
            "internal_fragmentation": asked - final_len,
            "external_fragmentation": too_small + length - asked,
            "free": large_enough,
        }

    def _hole_split(self, next_final_len: int, next_prompt_len: int) -> tuple[int, int]:
        """Free slots in holes too small for the next request's reservation, and in the others
        (under a buddy allocator the holes are its free blocks). Worked out, and the arguments
        checked, once per arguments (and their types: 3.0 is refused) until the holes change."""
        key = (next_final_len, next_prompt_len, type(next_final_len), type(next_prompt_len))
        if key not in self._splits:
            need = self.reservation_size(next_final_len, min(next_prompt_len, next_final_len))
            if self._buddy is None:
                holes = [length for _, length in self.holes()]
            else:
                need = next_pow2(need)
                holes = [1 << o for o, starts in self._buddy.free_blocks.items() for _ in starts]
            self._splits[key] = (sum(h for h in holes if h < need), sum(h for h in holes if h >= need))
        return self._splits[key]

    def _reservation(self, req_id: Hashable) -> Reservation:
        start, length, _, final_len, asked = entry = self._requests[req_id]
        return Reservation(req_id, start, length, self._used(entry), final_len, asked)

    def _used(self, entry: list[int]) -> int:
        return entry[2] + self._appended

    def _count(self, entry: list[int], sign: int) -> None:
        """Add a request to the running totals (sign 1) or take it out (sign -1)."""
        self._totals[0] += sign * entry[1]
        self._totals[1] += sign * self._used(entry)
        self._totals[2] += sign * entry[3]
        self._totals[3] += sign * entry[4]
        full_at = entry[3] - entry[2]  # the value of _appended at which it holds final_len
        self._full_at[full_at] = self._full_at.get(full_at, 0) + sign
        if not self._full_at[full_at]:
            del self._full_at[full_at]

    # ---- operations --------------------------------------------------------------------------

    def add(self, req_id: Hashable, prompt_len: int, final_len: int) -> int:
        """Reserve a range for a request holding `prompt_len` tokens that will grow to
        `final_len`; returns its start slot. Raises NoContiguousHoleError (changing nothing)
        when no hole fits the policy's reservation."""
        check_new("req_id", check_seq_id("req_id", req_id), self._requests, "holding a reservation")
        check_int("final_len", final_len, 1, self.max_seq_len)
        check_int("prompt_len", prompt_len, 1, final_len)
        length = asked = self.reservation_size(final_len, prompt_len)
        if self._buddy is None:
            start = next((s for s, h in self.holes() if h >= length), None)
        else:
            length = next_pow2(length)
            start = self._buddy.alloc(length)
        if start is None:
            largest = max((h for _, h in self.holes()), default=0)
            raise NoContiguousHoleError(
                f"req_id {req_id!r} needs {length} contiguous slots (policy {self.policy!r}); "
                f"{self.num_slots - self._reserved_slots()} slots free in all, "
                f"the largest hole has {largest}"
            )
        bisect.insort(self._starts, start)
        self._by_start[start] = req_id
        self._requests[req_id] = [start, length, prompt_len - self._appended, final_len, asked]
        self._count(self._requests[req_id], 1)
        self._splits.clear()
        return start

    def append(self, req_id: Hashable) -> int:
        """One generated token goes into the next reserved slot; returns that slot."""
        entry = self._get(req_id)
        start, used, final_len = entry[0], self._used(entry), entry[3]
        if used == final_len:
            raise ValueError(f"req_id {req_id!r} already holds its final_len = {final_len} tokens")
        self._count(entry, -1)
        entry[2] += 1
        self._count(entry, 1)
        return start + used

    def append_all(self) -> None:
        """One generated token for every request holding a reservation, `append` for each in
        one call (an iteration of the batch, as Orca runs it). Raises ValueError, changing
        nothing, if one of them already holds its final_len tokens."""
        if self._appended in self._full_at:
            req_id = next(r for r, e in self._requests.items() if self._used(e) == e[3])
            raise ValueError(
                f"req_id {req_id!r} already holds its final_len = {self._requests[req_id][3]} tokens"
            )
        self._appended += 1
        self._totals[1] += len(self._requests)

    def free(self, req_id: Hashable) -> None:
        """Return a request's whole range to the arena."""
        start, length = self._get(req_id)[:2]
        self._count(self._requests[req_id], -1)
        if self._buddy is not None:
            self._buddy.free(start, length)
        del self._requests[req_id]
        self._splits.clear()
        del self._by_start[start]
        self._starts.pop(bisect.bisect_left(self._starts, start))

    def _get(self, req_id: Hashable) -> list[int]:
        return check_known("req_id", req_id, self._requests, "a request holding a reservation")

    def _reserved_slots(self) -> int:
        return sum(entry[1] for entry in self._requests.values())

    def __repr__(self) -> str:
        return (
            f"ContiguousKVCache(num_slots={self.num_slots}, policy={self.policy!r}, "
            f"max_seq_len={self.max_seq_len}, "
            + (f"allocator={self.allocator!r}, " if self._buddy is not None else "")
            + f"requests={len(self._requests)}, "
            f"reserved={self._reserved_slots()})"
        )
