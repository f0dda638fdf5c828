"""`python -m pagedkv demo`: the seed walkthrough, corrected.

The seed guide's runner had request_A grow token by token in a 16-page pool and then
request_B reuse the pages. Here the same story runs on real pages of 4 tokens: TinyLM
generates request_A's 20 tokens through the cache (a page is taken only when the last one
is full), request_A finishes (its full pages stay CACHED, tail first in the LRU order),
and request_B, which starts with request_A's prompt, reuses those pages as prefix hits and
then grows until the pool has to evict.
"""

from __future__ import annotations

import argparse

from .config import CacheConfig
from .model import TinyLM
from .pool import Event, KVCachePool
from .sequence import SequenceManager

PROMPT_A = "The KV cache holds"  # 18 bytes: 4 full pages and half a page
PROMPT_B = PROMPT_A + " pages."


def _pool_line(pool: KVCachePool) -> str:
    return (
        f"usage {pool.usage:5.1%} (active {pool.num_active_pages:2d}, cached "
        f"{pool.num_cached_pages:2d}, free {pool.num_free_pages:2d}), token usage {pool.token_usage:5.1%}"
    )


def _grow(model: TinyLM, seqs: SequenceManager, seq_id: str, steps: int, log: list[Event]) -> None:
    logits = model.forward(seqs, [seq_id])
    for step in range(1, steps + 1):
        token = model.sample(logits, 0.0, None)[0]
        log.clear()
        slot = seqs.append_slot(seq_id, token)
        logits = model.forward(seqs, [seq_id])
        page, offset = divmod(slot, seqs.page_size)
        news = "".join(f", {e.kind} page {e.page_id}" for e in log if e.kind in ("allocate", "evict"))
        print(f"  step {step:2d}: token {token:3d} {chr(token)!r:5} -> page {page:2d} slot {offset}  "
              f"{_pool_line(seqs.pool)}{news}")


def run(args: argparse.Namespace | None = None) -> int:
    model = TinyLM(seed=0)
    pool = KVCachePool(model.cache_config(num_pages=16, page_size=4))
    seqs = SequenceManager(pool)
    log: list[Event] = []
    pool.add_listener(log.append)
    cfg: CacheConfig = pool.config
    print(f"pool: {cfg.num_pages} pages x {cfg.page_size} token slots, {cfg.num_layers} layers, "
          f"{cfg.kv_bytes:,} bytes of K/V preallocated")

    print(f"\nrequest_A arrives with a {len(PROMPT_A)}-token prompt {PROMPT_A!r}")
    seqs.add("request_A", model.encode(PROMPT_A))
    print(f"  block table {seqs.block_table('request_A')}  {_pool_line(pool)}")
    print("request_A generates 20 tokens:")
    _grow(model, seqs, "request_A", 20, log)
    text = model.decode(seqs.get("request_A").token_ids)
    print(f"  request_A now reads {text!r}")
    print(f"  block table {seqs.block_table('request_A')}")

    seqs.free("request_A")
    print("\nrequest_A finishes: full pages stay CACHED for reuse, the partial one is FREE")
    print(f"  LRU order (next victim first): {pool.eviction.order()}  {_pool_line(pool)}")

    print(f"\nrequest_B arrives with {PROMPT_B!r}")
    log.clear()
    hit = seqs.add("request_B", model.encode(PROMPT_B))
    reused = [e.page_id for e in log if e.kind == "prefix_hit"]
    print(f"  prefix hit: {hit} tokens from pages {reused}; block table {seqs.block_table('request_B')}")
    print(f"  LRU order (next victim first): {pool.eviction.order()}  {_pool_line(pool)}")
    print("request_B generates 36 tokens, until the pool has to evict:")
    log.clear()
    _grow(model, seqs, "request_B", 36, log)
    print(f"\n  block table {seqs.block_table('request_B')}")
    s = pool.stats
    print(f"counters: allocations {s.allocations}, evictions {s.evictions}, prefix hits "
          f"{s.prefix_hits}/{s.prefix_queries} tokens, copy-on-write {s.cow_copies}")
    pool.check_invariants()
    return 0
