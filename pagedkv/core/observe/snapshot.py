"""What the pool shows the outside world: counters and plain-data snapshots.

Plots, notebooks, metrics and the HTTP API read the pool only through these and the
events (events.py): a `PoolSnapshot` is a copy (numpy arrays per page, tuples per
sequence), `PoolStats` counts what happened since the pool was created. vLLM
exposes the same facts as `KVCacheBlock` fields and `PrefixCacheStats`. `take_snapshot`
takes the pool and its sequence manager as two arguments (block tables belong to the
manager) and reads only their public fields.

Leaves out: per-request latency statistics (they belong to a scheduler or server).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from pagedkv.core.page import PageState

if TYPE_CHECKING:
    from pagedkv.core.pool import KVCachePool
    from pagedkv.core.slot_mapping import Sequence

ACTIVE = PageState.ACTIVE


@dataclass(frozen=True, eq=False)
class PoolSnapshot:
    """Plain data describing the pool at one moment: what plots and services read."""

    clock: int
    num_pages: int
    page_size: int
    state: np.ndarray  # [num_pages] int8 PageState codes
    fill: np.ndarray  # [num_pages] tokens held
    ref_count: np.ndarray  # [num_pages]
    owner: np.ndarray  # [num_pages] index into seq_ids of the oldest holder, -1 for none
    lru_rank: np.ndarray  # [num_pages] 0 = next victim, -1 = not evictable
    hashed: np.ndarray  # [num_pages] bool: the page is in the prefix index
    last_access: np.ndarray  # [num_pages] logical clock
    seq_ids: tuple[Hashable, ...]  # live sequences, oldest first
    block_tables: dict[Hashable, tuple[int, ...]]  # seq id -> page ids
    num_cached_tokens: dict[Hashable, int]  # seq id -> prompt tokens served by prefix hits
    cow_log: tuple[tuple[int, int], ...]  # (src, dst) page pairs, oldest first
    stats: dict[str, int] = field(default_factory=dict)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PoolSnapshot):
            return NotImplemented
        arrays = ("state", "fill", "ref_count", "owner", "lru_rank", "hashed", "last_access")
        return all(np.array_equal(getattr(self, a), getattr(other, a)) for a in arrays) and (
            (self.clock, self.num_pages, self.page_size, self.seq_ids, self.block_tables)
            == (other.clock, other.num_pages, other.page_size, other.seq_ids, other.block_tables)
            and (self.num_cached_tokens, self.cow_log, self.stats)
            == (other.num_cached_tokens, other.cow_log, other.stats)
        )

    @property
    def usage(self) -> float:
        """ACTIVE pages / num_pages."""
        return float(np.count_nonzero(self.state == ACTIVE)) / self.num_pages

    @property
    def token_usage(self) -> float:
        """Slots holding tokens in ACTIVE pages / all slots."""
        return float(self.fill[self.state == ACTIVE].sum()) / (self.num_pages * self.page_size)


def take_snapshot(
    pool: KVCachePool,
    sequences: Mapping[Hashable, Sequence] | None = None,
    cow_log: tuple[tuple[int, int], ...] | list[tuple[int, int]] = (),
) -> PoolSnapshot:
    """Copy out the pool's pages and the block tables of `sequences` (seq id -> Sequence,
    oldest first; none by default) as plain numpy arrays and tuples, for plots and APIs."""
    n, table = pool.num_pages, pool.table
    sequences = sequences if sequences is not None else {}
    owner = np.full(n, -1, dtype=np.int32)
    for k, seq in reversed(list(enumerate(sequences.values()))):
        owner[seq.block_table] = k  # oldest holder wins: it is written last
    lru_rank = np.full(n, -1, dtype=np.int32)
    order = pool.eviction.order()
    lru_rank[order] = np.arange(len(order), dtype=np.int32)
    return PoolSnapshot(
        clock=pool.clock,
        num_pages=n,
        page_size=pool.page_size,
        state=table.states(),
        fill=np.fromiter(map(table.num_tokens, range(n)), dtype=np.int32, count=n),
        ref_count=np.array(table.ref_count, dtype=np.int32),
        owner=owner,
        lru_rank=lru_rank,
        hashed=np.fromiter((pool.prefix_index.holds_page(p) for p in range(n)), dtype=bool, count=n),
        last_access=np.array(table.last_access, dtype=np.int64),
        seq_ids=tuple(sequences),
        block_tables={s: tuple(q.block_table) for s, q in sequences.items()},
        num_cached_tokens={s: q.num_cached_tokens for s, q in sequences.items()},
        cow_log=tuple(cow_log),
        stats=pool.stats.as_dict(),
    )
