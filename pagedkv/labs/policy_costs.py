"""What an eviction policy's bookkeeping costs, counted, for the eviction lab's section 5.

`bookkeeping` replays a stream with one policy and counts two things, both exact counts
that do not depend on the machine:

- **hashes held**: block hashes the policy keeps besides its pages, at most at once over
  the run: ARC's ghosts (B1 and B2), S3-FIFO's ghosts (G), lru+pin's pin list;
- **list writes**: every insert, delete or move in the policy's ordered lists (the
  release order every policy keeps, ARC's T1 and T2, S3-FIFO's S and M, the ghost lists);
- **pages skipped**: pinned pages lru+pin looks past at the head of its order before it
  finds an unpinned victim (0 for the others).

Leaves out: time. A list write is one dictionary operation; how long it takes depends on
the machine, so it is not measured.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from pagedkv.core.sequence import SequenceManager
from pagedkv.labs.eviction_policies import PinnedLRUEvictionPolicy
from pagedkv.labs.hit_rate_lab import lab_pool, make_policy, serve_one_at_a_time
from pagedkv.labs.lab_workloads import LabRequest


class _CountingDict(OrderedDict):
    """An OrderedDict that adds 1 to `tally[0]` at each insert, delete or move."""

    def __init__(self, items: Any, tally: list[int]) -> None:
        super().__init__(items)
        self.tally = tally

    def __setitem__(self, key: Any, value: Any) -> None:
        self.tally[0] += 1
        super().__setitem__(key, value)

    def __delitem__(self, key: Any) -> None:
        self.tally[0] += 1
        super().__delitem__(key)

    def pop(self, key: Any, *default: Any) -> Any:
        self.tally[0] += key in self
        return super().pop(key, *default)

    def popitem(self, last: bool = True) -> tuple[Any, Any]:
        self.tally[0] += 1
        return super().popitem(last)

    def move_to_end(self, key: Any, last: bool = True) -> None:
        self.tally[0] += 1
        super().move_to_end(key, last)


def _count_writes(policy: Any, tally: list[int]) -> None:
    """Swap each ordered list of `policy` (and of its ghost lists) for a counting copy."""
    for owner in (policy, *(g for g in vars(policy).values() if hasattr(g, "keys") and hasattr(g, "take"))):
        for name, value in list(vars(owner).items()):
            if isinstance(value, OrderedDict):
                setattr(owner, name, _CountingDict(value, tally))


def hashes_held(policy: Any) -> int:
    """Block hashes `policy` keeps besides its pages: ghosts, or pins."""
    if isinstance(policy, PinnedLRUEvictionPolicy):
        return len(policy.pinned)
    queues = policy.queues() if hasattr(policy, "queues") else {}
    return sum(len(queues.get(q, ())) for q in ("B1", "B2", "G"))


def bookkeeping(
    requests: Sequence[LabRequest], cache_tokens: int, name: str, page_size: int = 16
) -> dict[str, int]:
    """Replay `requests` with the lab policy `name` ("lru", "arc", "s3fifo", "lru+pin", ...)
    and count its bookkeeping: {"requests", "victims", "hashes held" (most at once),
    "list writes", "pages skipped"} (see the module's docstring)."""
    pool = lab_pool(requests, cache_tokens, make_policy(name, requests, cache_tokens, page_size), page_size)
    policy = pool.eviction
    writes, skipped = [0], [0]
    _count_writes(policy, writes)
    pop = policy.pop_victim

    def counted_pop() -> int:
        if isinstance(policy, PinnedLRUEvictionPolicy):
            for page_id in policy.release_order():  # what its loop looks at before a victim
                if pool.page(page_id).block_hash not in policy.pinned:
                    break
                skipped[0] += 1
        return pop()

    policy.pop_victim = counted_pop  # type: ignore[method-assign]
    seqs, held = SequenceManager(pool), hashes_held(policy)
    for request in requests:
        serve_one_at_a_time(seqs, [request])
        held = max(held, hashes_held(policy))
    return {
        "requests": len(requests),
        "victims": pool.stats.evictions,
        "hashes held": held,
        "list writes": writes[0],
        "pages skipped": skipped[0],
    }
