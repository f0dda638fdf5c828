"""Radix tree against hash chain on one request stream: hit tokens, index size, evictions.

Three caches replay the same `pagedkv.labs.lab_workloads` stream, one request at a time:

- **hash**: `KVCachePool` with chained block hashes as vLLM computes them, one page per
  hash, and LRU (`prefix_index="hash"`);
- **radix**: the same pool with a radix tree as its index and leaf-first LRU
  (`prefix_index="radix"`); pages enter the index when they fill, and leaves give up one
  page at a time, because the pool asks for exactly the pages it needs;
- **sglang**: `RadixCache` driven the way SGLang's scheduler drives it
  (`sglang_replay`): match the prompt minus its last token, lock the matched node, take
  the missing pages from a free list, evicting *whole* unlocked leaves when it runs dry,
  and insert pages as SGLang does: the prompt's full pages after prefill (the request then
  holds the tree's pages, its copies go back to the free list), the rest when it finishes
  (with its partial last page freed). `after_prefill=False` inserts once, at finish: one
  request at a time that gives the same hits with page-by-page eviction, but with whole
  leaves it changes which leaves exist (notebook 09b, section 4). SGLang splits a chunked
  prefill into several inserts; this model inserts the whole prompt at once.

The hit rule is the same in all three: at least the last prompt token runs, and only whole
pages hit, so at most floor((prompt_len - 1) / page_size) pages. (SGLang caps the match at
prompt_len - 1 *tokens* and then matches whole pages: the same formula. What differs is
its default page size, 1, where the cap costs one token, against vLLM's 16.)

`generate_one_at_a_time` runs a few prompts through the real model in each pool and reads
the counts after every request, `orphan_pages` names the indexed pages no lookup can
reach (notebook 09, section 5), and `corner_pages` counts the pages a stream writes right
after a recomputed copy (section 4's corner).

The hash pool is pagedkv's: one page per hash, so a recomputed copy is not indexed and
the pages after it can become orphans. vLLM v1 maps a hash to every block holding it, so
there the copy is indexed too and the chain stays whole (docs/vllm_map.md, `PrefixIndex`).

Leaves out: overlapping requests (where SGLang's inserts after prefill and at finish and
the pool's insert-at-fill part ways), and SGLang's host tier.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

from pagedkv.core.config import CacheConfig
from pagedkv.core.hashing import block_hashes
from pagedkv.core.plumbing.events import Event
from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.labs.hit_rate_lab import num_pages_for, serve_one_at_a_time
from pagedkv.labs.lab_workloads import LabRequest
from pagedkv.model.tinylm import TinyLM
from pagedkv.radix.radix_cache import RadixCache
from pagedkv.radix.radix_index import RadixPrefixIndex

INDEXES = ("hash", "radix", "sglang")


@dataclass(frozen=True)
class IndexResult:
    index: str  # "hash", "radix" or "sglang"
    hit_tokens: int  # prompt tokens served from the cache
    query_tokens: int  # prompt tokens looked up
    evictions: int  # pages reclaimed from the cache
    entries: int  # index size at the end: block hashes (hash) or tree nodes (radix, sglang)
    cached_pages: int  # pages the index holds at the end

    @property
    def hit_rate(self) -> float:
        return self.hit_tokens / self.query_tokens if self.query_tokens else 0.0


def replayed_pool(
    requests: Sequence[LabRequest], cache_tokens: int, index: str, page_size: int = 16
) -> KVCachePool:
    """The `KVCachePool` (prefix index "hash" or "radix") after the stream, one request at a
    time: with "radix", `pool.prefix_index.tree` is the tree the stream left behind."""
    num_pages = num_pages_for(requests, cache_tokens, page_size)
    pool = KVCachePool(CacheConfig.bookkeeping(num_pages, page_size, prefix_index=index))
    serve_one_at_a_time(SequenceManager(pool), requests)
    return pool


def pool_replay(
    requests: Sequence[LabRequest], cache_tokens: int, index: str, page_size: int = 16
) -> IndexResult:
    """The stream through a `KVCachePool` whose prefix index is "hash" or "radix"."""
    pool = replayed_pool(requests, cache_tokens, index, page_size)
    stats = pool.stats
    tree_index = pool.prefix_index
    entries = tree_index.tree.num_nodes if isinstance(tree_index, RadixPrefixIndex) else len(tree_index)
    return IndexResult(
        index, stats.prefix_hits, stats.prefix_queries, stats.evictions, entries, len(pool.prefix_index)
    )


def sglang_replay(
    requests: Sequence[LabRequest],
    cache_tokens: int,
    page_size: int = 16,
    whole_leaves: bool = True,
    node_changes: list[tuple[str, int]] | None = None,
    after_prefill: bool = True,
) -> IndexResult:
    """The stream through a `RadixCache` managed as SGLang's scheduler manages it.

    With `whole_leaves=False` eviction gives up one page at a time (`evict_pages`), as the
    pool's tree does, so only the insert timing differs from the pool. By default a request's
    full prompt pages go in after prefill, as SGLang's `cache_unfinished_req` does (a page the
    tree already had replaces the request's copy, which goes back to the free list), and the
    rest at finish (`cache_finished_req`); `after_prefill=False` inserts once, at finish.
    `node_changes`, when given, receives ("lookup" | "evict" | "insert", change in the
    tree's node count) for each of those steps, in order."""
    num_pages = num_pages_for(requests, cache_tokens, page_size)
    tree, free = RadixCache(page_size), list(range(num_pages))
    hits = queries = evictions = 0
    for r in requests:
        prompt, tokens = r.prompt_token_ids, r.prompt_token_ids + r.output_token_ids
        nodes = tree.num_nodes
        match = tree.match_prefix(prompt[: len(prompt) - 1])  # the last prompt token runs
        changes = [("lookup", tree.num_nodes - nodes)]
        tree.inc_lock_ref(match.last_node)
        need = -(-len(tokens) // page_size) - match.num_pages
        if need > len(free):
            short = need - len(free)  # whole leaves may free more than asked
            nodes = tree.num_nodes
            freed = tree.evict(short) if whole_leaves else evict_pages(tree, short)
            changes.append(("evict", tree.num_nodes - nodes))
            evictions += len(freed)
            free += freed
        pages, free = match.page_ids + free[:need], free[need:]
        hits, queries = hits + match.num_pages * page_size, queries + len(prompt)
        locked = match
        if after_prefill:  # the prompt's full pages go in; the request moves onto the tree's
            nodes, filled = tree.num_nodes, len(prompt) // page_size * page_size
            known = tree.insert(prompt[:filled], pages[: filled // page_size]) // page_size
            changes.append(("insert", tree.num_nodes - nodes))
            free += pages[match.num_pages : known]
            locked = tree.match_prefix(prompt[:filled])
            pages = locked.page_ids + pages[locked.num_pages :]
            tree.inc_lock_ref(locked.last_node)
            tree.dec_lock_ref(match.last_node)
        # The request finishes: its whole pages go into the tree; its copies of pages the
        # tree had already, and its partial last page, go back to the free list.
        nodes = tree.num_nodes
        known = tree.insert(tokens, pages) // page_size
        changes.append(("insert", tree.num_nodes - nodes))
        if node_changes is not None:
            node_changes += changes
        full = len(tokens) // page_size
        free += pages[locked.num_pages : known] + pages[full:]
        tree.dec_lock_ref(locked.last_node)
    return IndexResult("sglang", hits, queries, evictions, tree.num_nodes, tree.total_size())


def evict_pages(tree: RadixCache, num_pages: int) -> list[int]:
    """Free exactly `num_pages` pages (fewer if nothing more is evictable), one at a time: the
    last page of the least recently accessed unlocked leaf; an emptied leaf goes, and its
    parent may become a leaf. Returns the freed page ids in eviction order."""
    freed: list[int] = []
    while len(freed) < num_pages:
        leaves = [n for n in tree.nodes() if n.is_leaf and n.value and not n.lock_ref]
        if not leaves:
            break
        leaf = min(leaves, key=lambda n: (n.last_access, n.node_id))
        freed.append(leaf.value[-1])
        tree.remove_leaf_page(leaf.value[-1])
    return freed


def compare_indexes(
    requests: Sequence[LabRequest], cache_tokens: int, page_size: int = 16
) -> list[IndexResult]:
    """hash, radix and sglang on the same stream and cache size."""
    return [
        pool_replay(requests, cache_tokens, "hash", page_size),
        pool_replay(requests, cache_tokens, "radix", page_size),
        sglang_replay(requests, cache_tokens, page_size, after_prefill=True),
    ]


class RequestRow(TypedDict):
    """One row of `generate_one_at_a_time`, read once the request finished."""

    hits: int  # its prefix-hit tokens
    evictions: int  # pages evicted so far
    indexed: int  # pages the prefix index holds
    free: int  # FREE pages
    pages: list[int]  # its block table, block order
    evicted: list[int]  # pages evicted while it ran, in eviction order
    new_pages: list[int]  # its pages that were not prefix hits, block order
    new_indexed: list[int]  # those of its new pages the index holds once it finished
    released_free: list[int]  # its pages that went FREE when it finished, block order
    orphans: list[int]  # the pool's orphan pages once it finished (`orphan_pages`)


def generate_one_at_a_time(
    model: TinyLM,
    prompts: Sequence[str],
    index: str,
    num_pages: int = 12,
    page_size: int = 4,
    max_new_tokens: int = 10,
) -> tuple[SequenceManager, list[list[int]], list[RequestRow]]:
    """Notebook 09's section 5: each prompt generates `max_new_tokens` tokens and finishes
    before the next starts, in a pool whose prefix index is "hash" or "radix".

    Returns the `SequenceManager`, each request's generated token ids, and one `RequestRow`
    per request."""
    config = model.cache_config(num_pages=num_pages, page_size=page_size, prefix_index=index)
    seqs = SequenceManager(KVCachePool(config))
    pool = seqs.pool
    outputs: list[list[int]] = []
    rows: list[RequestRow] = []
    evicted: list[int] = []

    def on_event(event: Event) -> None:
        if event.kind == "evict":
            evicted.append(event.page_id)

    pool.add_listener(on_event)
    for i, prompt in enumerate(prompts):
        hits_before, seq_id = pool.stats.prefix_hits, f"r{i}"
        evicted.clear()
        outputs.append(model.generate(seqs, [prompt], max_new_tokens, seq_ids=[seq_id], free=False)[seq_id])
        pages = seqs.block_table(seq_id)
        seqs.free(seq_id)
        hits, free = pool.stats.prefix_hits - hits_before, pool.num_free_pages
        new_pages = pages[hits // page_size :]
        row = RequestRow(
            hits=hits, evictions=pool.stats.evictions, indexed=len(pool.prefix_index), free=free,
            pages=pages, evicted=list(evicted), new_pages=new_pages,
            new_indexed=[p for p in new_pages if pool.prefix_index.holds_page(p)],
            released_free=[p for p in pages if pool.page(p).state.name == "FREE"],
            orphans=orphan_pages(pool),
        )  # fmt: skip
        rows.append(row)
    pool.remove_listener(on_event)
    return seqs, outputs, rows


def _ids(pages: list[int]) -> str:
    return f" {pages}" if pages else ""


def account_lines(rows: Sequence[RequestRow], i: int, page_size: int = 4, num_pages: int = 12) -> list[str]:
    """Request `i` (from 0) of `generate_one_at_a_time` in one pool, one count a line: hits,
    where the new pages came from (FREE ones taken, then evicted ones), then evictions so
    far, pages indexed and FREE pages, each as `total = count before - out + in` from the
    row before (notebook 09b, section 3).

    The totals are the pool's own counts; the terms come from the request's pages, so a
    caller can check that each sum holds (see `account_sums_hold`)."""
    row = rows[i]
    before = rows[i - 1] if i else RequestRow(
        hits=0, evictions=0, indexed=0, free=num_pages, pages=[], evicted=[], new_pages=[],
        new_indexed=[], released_free=[], orphans=[],
    )  # fmt: skip
    new, evicted = row["new_pages"], row["evicted"]
    taken = len(new) - len(evicted)
    return [
        f"hit: {row['hits']} tokens ({row['hits'] // page_size} pages)",
        f"new pages{_ids(new)}: {taken} FREE, {len(evicted)} evicted",
        f"evictions so far: {row['evictions']} = {before['evictions']} + {len(evicted)}",
        f"indexed: {row['indexed']} = {before['indexed']} - {len(evicted)} evicted"
        f" + {len(row['new_indexed'])} new{_ids(row['new_indexed'])}",
        f"FREE: {row['free']} = {before['free']} - {taken} taken"
        f" + {len(row['released_free'])} released{_ids(row['released_free'])}",
    ]


def request_account(
    rows_by_index: dict[str, list[RequestRow]], i: int, page_size: int = 4, num_pages: int = 12
) -> str:
    """`account_lines` of request `i` for each pool ("hash", "radix"), line by line: a line
    every pool counts the same is printed once, labelled "both"; a line that differs is
    printed once per pool, labelled with the pool's name."""
    accounts = {name: account_lines(rows, i, page_size, num_pages) for name, rows in rows_by_index.items()}
    width = max(map(len, [*accounts, "both"])) + 2
    out = [f"request {i + 1}:"]
    for lines in zip(*accounts.values(), strict=True):
        labelled = [("both", lines[0])] if len(set(lines)) == 1 else list(zip(accounts, lines))
        out += [f"  {name + ':':{width}}{line}" for name, line in labelled]
    return "\n".join(out)


def account_sums_hold(rows: Sequence[RequestRow], num_pages: int = 12) -> bool:
    """Whether every sum `account_lines` prints holds: the pool's counts after each request
    equal the counts before it, less what it evicted or took, plus what it added."""
    evictions, indexed, free = 0, 0, num_pages
    for row in rows:
        taken = len(row["new_pages"]) - len(row["evicted"])
        evictions += len(row["evicted"])
        indexed += len(row["new_indexed"]) - len(row["evicted"])
        free += len(row["released_free"]) - taken
        if (evictions, indexed, free) != (row["evictions"], row["indexed"], row["free"]):
            return False
    return True


def corner_pages(requests: Sequence[LabRequest], cache_tokens: int, index: str, page_size: int = 16) -> int:
    """Full pages written right after a page the prefix index does not hold (a recomputed
    copy): notebook 09, section 4's corner, counted while the stream runs one request at a
    time through the pool with prefix index "hash" or "radix" (as `replayed_pool`).

    A page is indexed when it fills; the count is of pages that filled while the page before
    them was not the one indexed under its hash. 0 means the two indexes never part."""
    num_pages = num_pages_for(requests, cache_tokens, page_size)
    pool = KVCachePool(CacheConfig.bookkeeping(num_pages, page_size, prefix_index=index))
    prefix_index, insert_all = pool.prefix_index, pool.prefix_index.insert_all
    count = 0

    def counting(page_ids: Sequence[int], block_hashes: Sequence[bytes], parent: int | None = None) -> None:
        nonlocal count
        if parent is not None and not prefix_index.holds_page(parent):
            count += len(page_ids)
        insert_all(page_ids, block_hashes, parent)

    setattr(prefix_index, "insert_all", counting)  # noqa: B010  # count, then index as before
    serve_one_at_a_time(SequenceManager(pool), requests)
    return count


def orphan_pages(pool: KVCachePool) -> list[int]:
    """Pages the prefix index holds that no prompt's lookup can reach, lowest id first.

    A lookup walks a prompt's pages from the first and stops at the first miss, so an indexed
    page is reachable only through indexed pages holding every block before it. This tries,
    with the pool's own lookup, every indexed page after every prefix found reachable so far
    (prompts without an extra key). A tree never holds an orphan; a hash chain does once the
    page before an indexed page is evicted (notebook 09, sections 4 and 5)."""
    algo, size = pool.config.prefix_caching_hash_algo, pool.page_size
    indexed = [page for _, page in pool.prefix_index.items()]
    reached: set[int] = set()
    prefixes: list[list[int]] = [[]]  # token runs whose pages are all reachable
    while prefixes:
        prefix = prefixes.pop()
        for page in indexed:
            tokens = prefix + pool.table.token_ids(page)
            if page in reached or len(tokens) % size:
                continue
            found = pool.find_longest_cache_hit(block_hashes(tokens, size, algo=algo), tokens)
            if len(found) == len(tokens) // size and found[-1] == page:
                reached.add(page)
                prefixes.append(tokens)
    return sorted(set(indexed) - reached)
