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
from pagedkv.scenarios.text import page_runs, slot_words, token_ids_of


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scenario",
        default="walkthrough",
        choices=list(SCENARIOS),
        help="which scenario to print (default: the walkthrough)",
    )


def _pool_line(pool: KVCachePool) -> str:
    return (
        f"pool: {pool.num_active_pages} ACTIVE, {pool.num_cached_pages} CACHED, "
        f"{pool.num_free_pages} FREE pages (usage {pool.usage:.1%}, token usage {pool.token_usage:.1%})"
    )


def _print_step(run: ScenarioRun, record: ActionRecord) -> None:
    """A step in the dashboard log's words: "step 2: request_A appends its token 19, id 32
    (a space), in slot 18 (page 4, place 2)". Tokens count from 1 over the whole sequence
    (prompt included), slots and places from 0. The pool's page counts follow a step that
    took, released or shared pages, and every step that is not a decode; the LRU order
    follows every step that is neither a decode nor a scheduler step."""
    head = f"  step {record.step:2d}: "
    for i, (_, text) in enumerate(record.entries(grouped=True)):
        print(f"{head if i == 0 else ' ' * len(head)}{slot_words(text, run.page_size)}")
    if record.action.op == "add" and record.cached_tokens:
        reused = [e.page_id for e in record.events if e.kind == "prefix_hit"]
        print(f"{' ' * len(head)}prefix hit: {record.cached_tokens} tokens from pages {reused}")
    if record.events or record.action.op != "decode":
        if record.action.op not in ("decode", "schedule"):
            print(f"{' ' * len(head)}LRU order (next victim first): {run.pool.eviction.order()}")
        print(f"{' ' * len(head)}{_pool_line(run.pool)}")


def run(args: argparse.Namespace | None = None) -> int:
    name = getattr(args, "scenario", "walkthrough")
    scenario = ScenarioRun(name)
    cfg = scenario.config
    print(
        f"{scenario.scenario.title}\npool: {cfg.num_pages} pages x {cfg.page_size} token slots, "
        f"{cfg.num_layers} layers, {cfg.kv_bytes:,} bytes of K/V preallocated\n"
        "Steps are numbered as on the dashboard. Tokens count from 1 in each sequence, prompt\n"
        "included. A slot is a token's place in the whole pool, page x page size + its place\n"
        "in the page; slots and places count from 0."
    )
    previous = None
    while not scenario.done:
        record = scenario.step()
        action = record.action
        if action.caption != previous:
            quoted = f": {action.text!r}" if action.text and action.op not in ("decode", "schedule") else ""
            print(f"\n{action.caption}{quoted}")
        _print_step(scenario, record)
        previous = action.caption
    print()
    snapshot = scenario.seqs.snapshot()
    runs = page_runs(snapshot, token_ids_of(scenario.seqs))
    for seq_id, table in snapshot.block_tables.items():
        text = scenario.model.decode(scenario.seqs.get(seq_id).token_ids)
        print(f"{seq_id} reads {text!r}\n  block table {list(table)}")
        print("  tokens by page: " + " ".join(f"{page}[{chars}]" for page, chars in runs[seq_id]))
    s = scenario.pool.stats
    print(
        f"counters: allocations {s.allocations}, evictions {s.evictions}, prefix hits "
        f"{s.prefix_hits}/{s.prefix_queries} tokens, copy-on-write {s.cow_copies}"
    )
    scenario.seqs.check_invariants()
    return 0
