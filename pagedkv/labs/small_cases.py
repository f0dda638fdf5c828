"""The deep dive's small worked cases, slot by slot: a host tier under an 8-page pool, and a
buddy arena of 2,048 slots that refuses a fourth request.

Notebook 11b prints each case from here, so its cells stay a few lines long. `host_tier_case`
runs TinyLM through a pool of 8 pages of 4 tokens with a 32-page `HostTier`: prompt A, then
three other prompts that push A's pages out. `buddy_case` places three `oracle` requests in a
`ContiguousKVCache` with the buddy allocator, frees one and asks for a fourth. Which engine
does the same: vLLM's CPU offloading and SGLang's HiCache keep evicted pages in host memory; no
engine uses a buddy allocator for K/V (the vLLM paper's Orca baselines stand for one).
Leaves out: anything beyond these two fixed cases.
"""

from __future__ import annotations

from pagedkv.core.hashing import block_hashes
from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.labs.contiguous import ContiguousKVCache, NoContiguousHoleError
from pagedkv.labs.tiers import HostTier
from pagedkv.model.tinylm import TinyLM

PROMPT_A = "The cat sat on the mat, again."
FLOODS = ("Dogs bark at night, loudly.", "Rain falls on the roof now.", "Birds sing in trees early.")
TOKENS, PAGE, POOL_PAGES, HOST_PAGES, OUTPUTS = 21, 4, 8, 32, 3


def host_tier_case() -> dict:
    """Prompt A (21 tokens, 3 outputs), then three other prompts of 21 tokens, through a pool of
    8 pages of 4 with a 32-page host tier. Returns the objects (model, pool, seqs, tier, A) and
    where A's full pages are: `in_pool`, `in_tier` (of `full`, 5), `cached` (full pages the 4
    prompts cached, 20) and the tier's offloads."""
    model = TinyLM()
    pool = KVCachePool(model.cache_config(num_pages=POOL_PAGES, page_size=PAGE))
    seqs = SequenceManager(pool)
    tier = HostTier(pool, capacity_bytes=HOST_PAGES * pool.config.kv_bytes // POOL_PAGES)
    a = model.encode(PROMPT_A)[:TOKENS]
    model.generate(seqs, [a], OUTPUTS, seq_ids=["A"])
    for i, text in enumerate(FLOODS):
        model.generate(seqs, [model.encode(text)[:TOKENS]], OUTPUTS, seq_ids=[f"flood{i}"])
    full = (TOKENS + OUTPUTS - 1) // PAGE  # the last output is never fed back: 23 tokens have K/V
    hashes = block_hashes(a, PAGE)[:full]
    return {
        "model": model, "pool": pool, "seqs": seqs, "tier": tier, "A": a, "full": full,
        "in_pool": sum(pool.get_cached_block(h) is not None for h in hashes),
        "in_tier": sum(h in tier.index for h in hashes),
        "cached": (1 + len(FLOODS)) * full,
        "still_cached": pool.num_cached_pages,
        "offloaded_pages": tier.stats.offloaded_pages,
        "offload_bytes": tier.stats.offload_bytes,
        "evicted": pool.stats.evictions,
    }  # fmt: skip


def host_tier_text(case: dict) -> str:
    """Where A's pages are, as the notebook prints it."""
    full = case["full"]
    return "\n".join([
        f"A's pages in the pool:      {case['in_pool']} of {full}",
        f"A's pages in the host tier: {case['in_tier']} of {full}",
        f"full pages cached by the 4 prompts: {case['cached']}; still in the pool: {case['still_cached']}",
        f"evicted, so offloaded so far: {case['offloaded_pages']} pages = {case['offload_bytes']:,} bytes",
    ])  # fmt: skip


LABELS = {
    "token_states": "token states (A, C)",
    "reserved": "reserved for their outputs",
    "internal_fragmentation": "internal fragmentation",
    "external_fragmentation": "external fragmentation",
    "free": "free and usable for D",
}


def buddy_case(slots: int = 2048) -> dict:
    """A, B and C (600, 300 and 100 slots, half of each in the prompt) placed by the buddy
    allocator under `oracle`; B finishes; D (700) is refused. Returns `before` and `after`
    (reservations, free blocks) for the picture, the slots rounded away at each moment, the
    free blocks' sizes (`holes`), the buckets as the serving run counts them (`slots`)."""
    arena = ContiguousKVCache(slots, "oracle", allocator="buddy")
    for req, final_len in (("A", 600), ("B", 300), ("C", 100)):
        arena.add(req, prompt_len=final_len // 2, final_len=final_len)
    placed = arena.accounting().reservations
    before = (placed, arena.free_blocks())
    arena.free("B")
    after_res = arena.accounting().reservations
    refused = False
    buckets = arena.accounting(next_final_len=700, next_prompt_len=350).as_dict()
    try:
        arena.add("D", prompt_len=350, final_len=700)
    except NoContiguousHoleError:
        refused = True
    return {
        "placed": placed, "before": before, "after": (after_res, arena.free_blocks()),
        "rounded_placed": sum(r.length - r.asked for r in placed),
        "b_rounded": next(r.length - r.asked for r in placed if r.req_id == "B"),
        "rounded": sum(r.length - r.asked for r in after_res),
        "holes": [length for _, length in arena.free_blocks()],
        "slots": buckets, "refused": refused,
    }  # fmt: skip


def buddy_text(case: dict) -> str:
    """The buddy case as the notebook prints it: each placement, B's exit, D's refusal and the
    2,048 slots in the serving run's buckets."""
    placed, holes, slots = case["placed"], case["holes"], case["slots"]
    lines = [
        f"{r.req_id} asks {r.asked:3} slots: block of {r.length:5,} at slot {r.start:5,}"
        f" ({r.length - r.asked} rounded away)"
        for r in placed
    ]
    lines.append(
        f"  rounded away: {case['rounded_placed']} of the {sum(r.length for r in placed):,} slots"
        " in the three blocks"
    )
    lines.append(f"B finishes; free blocks (start, slots): {case['after'][1]}")
    lines.append(
        f"  B's block leaves with its {case['b_rounded']} rounded-away slots: "
        f"{case['rounded_placed']} - {case['b_rounded']} = {case['rounded']} still rounded away"
    )
    if case["refused"]:
        lines.append("D asks 700 slots, so a block of 1,024: refused")
    lines.append(
        f"  largest free block: {max(holes)} slots; free slots in all blocks: {sum(holes)};"
        f" usable for D: {slots['free']}"
    )
    lines.append("the 2,048 slots now, as the serving run counts them:")
    lines += [f"  {label:28} {slots[key]:5,}" for key, label in LABELS.items()]
    lines.append(
        f"  (external fragmentation = {case['rounded']} rounded away + {sum(holes)} free slots"
        " in blocks too small for D)"
    )
    return "\n".join(lines)
