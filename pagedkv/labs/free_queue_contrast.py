"""Which page a new request gets: pagedkv's pool next to a model of vLLM v1's free queue.

vLLM v1 keeps FREE blocks and CACHED ones (ref count 0, hash kept) in one queue,
`FreeKVCacheBlockQueue` (vllm/v1/core/kv_cache_utils.py). `BlockPool.get_new_blocks` pops
its head and, if that block still has a hash, evicts it there (`_maybe_evict_cached_block`,
vllm/v1/core/block_pool.py). A finished request's blocks come back tail first; since vLLM PR #42656
`BlockPool.free_blocks` puts those without a hash at the head (`prepend_n`) and the cached
ones at the tail (`append_n`). Before it, vLLM appended every freed block at the tail.

pagedkv keeps two structures instead: FREE pages (core/free_queue.py) and CACHED pages in
LRU order (core/eviction.py), and takes FREE pages first.

The run: 4 pages of 4 slots. A (8 tokens: pages 0, 1, both full) and B (6 tokens: pages 2,
3; page 3 half full, no hash) finish, A first; then C, a new 4-token prompt, needs one page.
Leaves out: vLLM's null block, prefix hits, several KV-cache groups.
"""

from __future__ import annotations

from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager

PAGE_SIZE = 4
PROMPTS = {"A": [1] * 8, "B": [2] * 6}  # finished in this order
NEW_PROMPT = [3] * 4  # C: one page


def vllm_queue_run(prepend_fresh: bool) -> dict[str, object]:
    """The run on a model of vLLM's one queue. prepend_fresh=True: current vLLM (blocks
    without a hash go to the head); False: older vLLM (every freed block to the tail).
    Returns the queue, head first, before C arrives, C's page and the page C evicted."""
    queue: list[int] = list(range(4))
    hashed: set[int] = set()
    tables: dict[str, list[int]] = {}
    for name, prompt in PROMPTS.items():
        n = -(-len(prompt) // PAGE_SIZE)
        tables[name], queue = queue[:n], queue[n:]
        hashed |= set(tables[name][: len(prompt) // PAGE_SIZE])  # full pages get a hash
    for name in PROMPTS:
        freed = tables[name][::-1]  # tail first: a chain's last page is evicted first
        if prepend_fresh:
            fresh = [p for p in freed if p not in hashed]
            queue = fresh + queue + [p for p in freed if p in hashed]
        else:
            queue = queue + freed
    before = list(queue)
    page = queue.pop(0)
    return {"queue": before, "page": page, "evicted": page if page in hashed else None}


def pagedkv_run(pool: KVCachePool) -> dict[str, object]:
    """The same run on a real pagedkv pool (4 pages of 4, prefix caching on)."""
    seqs = SequenceManager(pool)
    for name, prompt in PROMPTS.items():
        seqs.add(name, prompt)
    for name in PROMPTS:
        seqs.free(name)
    cached_before = pool.num_cached_pages
    free_before = pool.num_free_pages
    seqs.add("C", NEW_PROMPT)
    page = seqs.block_table("C")[0]
    evicted = cached_before - pool.num_cached_pages
    return {"free": free_before, "cached": cached_before, "page": page, "evicted": evicted}


def contrast_text(pool: KVCachePool) -> str:
    """The three runs side by side, one line each."""
    ours = pagedkv_run(pool)
    lines = [
        "A (pages 0 and 1, both CACHED) and B (page 2 CACHED, page 3 FREE) finished; C needs 1 page",
        f"pagedkv:            {ours['free']} FREE + {ours['cached']} CACHED pages;"
        f" C gets page {ours['page']}, CACHED pages evicted: {ours['evicted']}",
    ]
    for label, prepend in (("vLLM, current:", True), ("vLLM, older:", False)):
        run = vllm_queue_run(prepend)
        evicted = "none" if run["evicted"] is None else f"page {run['evicted']} (A's)"
        queue = f"queue head first {run['queue']}"
        lines.append(f"{label:19} {queue}; C gets page {run['page']}, evicted: {evicted}")
    return "\n".join(lines)
