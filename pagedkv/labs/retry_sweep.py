"""Notebook 09's corner on a chat stream with retries: where the hash chain's extra hits appear.

A *retry* ("regenerate") sends a chat turn's prompt a second time; its second answer is the one
the conversation keeps. When that prompt ends on a page boundary, the retry recomputes its last
full page (the last-token rule): a copy. The pages it then writes are section 4a's corner:
the hash pool indexes them (their hashes follow the original), the radix pool leaves
them out, so the next turn of that conversation hits more pages in the hash pool.

`chat_with_retries` builds the stream (`multi_turn_chat`'s shape, seeded; every `aligned`
prompt is padded to a whole number of pages, the corner's condition), and `retry_sweep`
replays it one request at a time through both pools for each retry rate.

Leaves out: overlapping requests, and prompts of random length (about 1 in `page_size` of them
ends on a page boundary, so the effect there is that much smaller).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pagedkv.core.config import CacheConfig
from pagedkv.core.eviction import LRUEvictionPolicy
from pagedkv.core.hashing import block_hashes
from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.labs.hit_rate_lab import num_pages_for, serve_one_at_a_time
from pagedkv.labs.lab_workloads import VOCAB, LabRequest
from pagedkv.labs.radix_vs_hash import pool_replay


def chat_with_retries(
    retry_rate: float, num_conversations: int = 24, turns: int = 5, page_size: int = 16, seed: int = 0
) -> list[LabRequest]:
    """Chats of `turns` turns, interleaved at random; each turn is retried with probability
    `retry_rate` (the same prompt again, a new answer, which the conversation keeps). Every
    prompt ends on a page boundary. The conversations do not depend on the rate, and a turn
    retried at one rate is retried at every higher rate."""
    rng, retry_rng = np.random.default_rng([seed, 20]), np.random.default_rng([seed, 21])
    history = {c: rng.integers(0, VOCAB, 32).tolist() for c in range(num_conversations)}
    left = {c: turns for c in range(num_conversations)}
    out: list[LabRequest] = []
    while left:
        c = int(rng.choice(sorted(left)))
        prompt = history[c] + rng.integers(0, VOCAB, int(rng.integers(16, 48))).tolist()
        prompt += rng.integers(0, VOCAB, -len(prompt) % page_size).tolist()  # whole pages
        name = f"chat{c}-t{turns - left[c]}"
        if retry_rng.random() < retry_rate:  # a higher rate retries the same turns and more
            out.append(LabRequest(name + "-first", prompt, retry_rng.integers(0, VOCAB, 32).tolist()))
        else:
            retry_rng.integers(0, VOCAB, 32)  # the same draws at every rate: streams nest
        answer = rng.integers(0, VOCAB, int(rng.integers(16, 48))).tolist()
        out.append(LabRequest(name, prompt, answer))
        history[c] = prompt + answer
        left[c] -= 1
        if not left[c]:
            del left[c]
    return out


@dataclass(frozen=True)
class SweepPoint:
    retry_rate: float
    cache_tokens: int
    hash_hits: int  # prompt tokens served from the cache, hash pool
    radix_hits: int  # the same, radix pool
    hash_evictions: int
    radix_evictions: int
    orphan_evictions: int = 0  # of the hash pool's evictions, pages no lookup reached

    @property
    def extra_hits(self) -> int:
        """Hit tokens the hash chain serves beyond the tree (negative: fewer)."""
        return self.hash_hits - self.radix_hits

    @property
    def gain(self) -> float:
        """The extra hits as a share of the tree's hits (the figure's left panel)."""
        return self.extra_hits / self.radix_hits if self.radix_hits else 0.0

    @property
    def extra_evictions(self) -> int:
        """Pages the hash pool evicts beyond the radix pool (the figure's right panel)."""
        return self.hash_evictions - self.radix_evictions

    @property
    def extra_reachable_evictions(self) -> int:
        """Reachable pages the hash pool evicts beyond the radix pool (whose every victim is
        reachable): the extra evictions that are not orphans."""
        return self.extra_evictions - self.orphan_evictions


def retry_sweep(
    rates: Sequence[float], cache_sizes: Sequence[int], page_size: int = 16, seed: int = 0
) -> list[SweepPoint]:
    """Both pools on `chat_with_retries(rate)` for every rate and cache size (tokens)."""
    points = []
    for cache_tokens in cache_sizes:
        for rate in rates:
            stream = chat_with_retries(rate, page_size=page_size, seed=seed)
            h, r = (pool_replay(stream, cache_tokens, name, page_size) for name in ("hash", "radix"))
            hits, evictions = (h.hit_tokens, r.hit_tokens), (h.evictions, r.evictions)
            orphans = orphan_evictions(stream, cache_tokens, page_size)
            points.append(SweepPoint(rate, cache_tokens, *hits, *evictions, orphans))
    return points


def orphan_evictions(requests: Sequence[LabRequest], cache_tokens: int, page_size: int = 16) -> int:
    """How many of the hash pool's victims were orphans when evicted: indexed pages no lookup
    reaches, because a page before them in their hash chain had left the index. The stream
    runs as in `pool_replay`; each victim is checked just before it leaves the index."""
    orphans: list[int] = []

    class CountingLRU(LRUEvictionPolicy):
        """LRU (the hash pool's policy) that notes each victim no lookup reaches."""

        def pop_victims(self, n: int) -> list[int]:
            victims = super().pop_victims(n)  # still indexed: the pool removes them next
            orphans.extend(v for v in victims if is_orphan(v))
            return victims

    num_pages = num_pages_for(requests, cache_tokens, page_size)
    config = CacheConfig.bookkeeping(num_pages, page_size, prefix_index="hash", eviction_policy=CountingLRU)
    pool = KVCachePool(config)
    parent: dict[bytes, bytes | None] = {}  # a block hash -> the hash of the block before it
    for r in requests:
        chain = block_hashes(
            r.prompt_token_ids + r.output_token_ids, page_size, algo=config.prefix_caching_hash_algo
        )
        parent.update(zip(chain, [None, *chain[:-1]], strict=True))

    def is_orphan(page: int) -> bool:
        before = parent[pool.table.block_hash[page]]  # type: ignore[index]
        while before is not None:
            if pool.prefix_index.get(before) is None:
                return True
            before = parent[before]
        return False

    serve_one_at_a_time(SequenceManager(pool), requests)
    return len(orphans)


def curve_drops(
    points: Sequence[SweepPoint], cache_tokens: int, value: str
) -> list[tuple[float, float, float]]:
    """Each fall of one curve of the figure: (the retry rate after which it falls, the value
    there, the value at the next rate). `value` is "gain" (left panel) or "extra_evictions"
    (right panel), for the cache of `cache_tokens`."""
    if value not in ("gain", "extra_evictions"):
        raise ValueError(f"value must be 'gain' or 'extra_evictions', got {value!r}")
    curve = sorted((p for p in points if p.cache_tokens == cache_tokens), key=lambda p: p.retry_rate)
    ys = [getattr(p, value) for p in curve]
    return [(p.retry_rate, y, y_next) for p, y, y_next in zip(curve, ys, ys[1:]) if y_next < y]


def curve_falls(points: Sequence[SweepPoint], cache_tokens: int, value: str) -> list[float]:
    """The retry rates after which one curve of the figure falls at the next rate: `value` is
    "gain" (left panel) or "extra_evictions" (right panel), for the cache of `cache_tokens`."""
    return [rate for rate, _, _ in curve_drops(points, cache_tokens, value)]


def sweep_table(points: Sequence[SweepPoint]) -> str:
    """One seed's sweep as text: a row per retry rate, and per cache size the hash pool's extra
    hits in % of the radix pool's (`+hits %`, the figure's left curves), its extra evictions
    (`+evict`, the right curves) and, of those, orphans."""
    sizes = sorted({p.cache_tokens for p in points})
    rates = sorted({p.retry_rate for p in points})
    at = {(p.cache_tokens, p.retry_rate): p for p in points}
    head = "retried |" + "|".join(f"{f'{size // 16:,} pages':^24}" for size in sizes)
    sub = "        |" + "|".join(" +hits % +evict orphans " for _ in sizes)
    lines = [head, sub]
    for rate in rates:
        cells = (at[size, rate] for size in sizes)
        lines.append(
            f"{round(100 * rate):6}% |"
            + "|".join(f"{100 * p.gain:8.2f} {p.extra_evictions:6} {p.orphan_evictions:7} " for p in cells)
        )
    return "\n".join(lines)
