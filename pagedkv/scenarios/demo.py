"""`python -m pagedkv demo`: a scenario from `pagedkv.scenarios`, printed step by step.

The default is the walkthrough: in a 16-page pool of 4-token pages TinyLM generates
request_A's tokens through the cache (a page is taken only when the last one is full),
request_A finishes (its full pages stay CACHED, tail first in the LRU order), and request_B,
which starts with request_A's prompt, reuses those pages as prefix hits and grows until the
pool has to evict. The model is `TinyLM.pretrained()`, so the text reads as words; at the
end each live sequence's text is printed page by page. `--scenario NAME` prints any other
scenario the same way; the dashboard and the notebooks step through exactly these runs.
"""

from __future__ import annotations

import argparse

from pagedkv.core.pool import KVCachePool
from pagedkv.scenarios import SCENARIOS, ActionRecord, ScenarioRun
from pagedkv.scenarios.text import page_runs, token_ids_of


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scenario",
        default="walkthrough",
        choices=list(SCENARIOS),
        help="which scenario to print (default: the walkthrough)",
    )


def _pool_line(pool: KVCachePool) -> str:
    return (
        f"usage {pool.usage:5.1%} (active {pool.num_active_pages:2d}, cached "
        f"{pool.num_cached_pages:2d}, free {pool.num_free_pages:2d}), "
        f"token usage {pool.token_usage:5.1%}"
    )


def _print_decode(run: ScenarioRun, record: ActionRecord, counts: dict) -> None:
    """One line per token: where it went, pool usage, pages allocated or evicted for it."""
    for seq_id, token in record.tokens.items():
        counts[seq_id] = counts.get(seq_id, 0) + 1
        news = "".join(
            f", {e.kind} page {e.page_id}"
            for e in record.events
            if e.kind in ("allocate", "evict", "cow") and e.seq_id == seq_id
        )
        where = ""
        if seq_id in record.slots:
            page, offset = divmod(record.slots[seq_id], run.page_size)
            where = f"-> page {page:2d} slot {offset}  "
        print(
            f"  {seq_id} token {counts[seq_id]:2d}: {token:3d} {chr(token)!r:6} {where}"
            f"{_pool_line(run.pool)}{news}"
        )
    if record.note and not record.tokens:  # a refused step: nothing was generated
        print(f"  {record.note}")


def run(args: argparse.Namespace | None = None) -> int:
    name = getattr(args, "scenario", "walkthrough")
    scenario = ScenarioRun(name)
    pool, cfg = scenario.pool, scenario.config
    print(
        f"{scenario.scenario.title}\npool: {cfg.num_pages} pages x {cfg.page_size} token slots, "
        f"{cfg.num_layers} layers, {cfg.kv_bytes:,} bytes of K/V preallocated"
    )
    counts: dict = {}  # seq id -> tokens generated so far
    previous = None
    while not scenario.done:
        record = scenario.step()
        action = record.action
        if action.op == "decode":
            if action.caption != previous:
                print(f"\n{action.caption}:")
            _print_decode(scenario, record, counts)
        elif action.op == "schedule":
            if action.caption != previous:
                print(f"\n{action.caption}:")
            pages = "; ".join(record.event_lines())
            print(f"  {record.note}  [{_pool_line(pool)}]" + (f"\n    {pages}" if pages else ""))
        else:
            print(f"\n{action.caption}" + (f": {action.text!r}" if action.text else ""))
            for line in record.lines():
                print(f"  {line}")
            if record.cached_tokens:
                reused = [e.page_id for e in record.events if e.kind == "prefix_hit"]
                print(f"  prefix hit: {record.cached_tokens} tokens from pages {reused}")
            print(f"  LRU order (next victim first): {pool.eviction.order()}  {_pool_line(pool)}")
        previous = action.caption
    print()
    snapshot = scenario.seqs.snapshot()
    runs = page_runs(snapshot, token_ids_of(scenario.seqs))
    for seq_id, table in snapshot.block_tables.items():
        text = scenario.model.decode(scenario.seqs.get(seq_id).token_ids)
        print(f"{seq_id} reads {text!r}\n  block table {list(table)}")
        print("  tokens by page: " + " ".join(f"{page}[{chars}]" for page, chars in runs[seq_id]))
    s = pool.stats
    print(
        f"counters: allocations {s.allocations}, evictions {s.evictions}, prefix hits "
        f"{s.prefix_hits}/{s.prefix_queries} tokens, copy-on-write {s.cow_copies}"
    )
    scenario.seqs.check_invariants()
    return 0
