"""Pages a per-page policy strands: it evicts a page while the page after it stays cached.

A prompt is looked up page by page from its first page, so a cached page whose earlier page
is gone is found by no later request until that earlier page is cached again. LRU never
does this on the lab's streams (a request releases its pages tail first), nor does SGLang's
leaf-first LRU, which evicts only leaves of its radix tree. ARC, S3-FIFO and LFU order pages
one by one, so they can. `strand_count` replays a stream and counts such victims;
`strand_counts` does it per stream and policy, and `strand_text` prints that.

Leaves out: how long a stranded page stays cached, and whether its earlier page comes back.
"""

from __future__ import annotations

from collections.abc import Sequence

from pagedkv.core.hashing import block_hashes
from pagedkv.core.sequence import SequenceManager
from pagedkv.labs.hit_rate_lab import lab_pool, make_policy, serve_one_at_a_time
from pagedkv.labs.lab_workloads import LabRequest


def strand_count(
    requests: Sequence[LabRequest], cache_tokens: int, policy: str, page_size: int = 16
) -> tuple[int, int]:
    """Replay `requests` with `policy` (a lab name); return (victims, stranding victims): a
    victim strands when a page that extends it (the next page of a request that held both)
    is still cached when it is evicted: it was no leaf of the radix tree then. Example on
    the scan at 2,048 tokens: strand_count(scan, 2048, "lru") -> (n, 0)."""
    after: dict[bytes, set[bytes]] = {}  # block hash -> the block hashes of the pages extending it
    for r in requests:
        hashes = block_hashes([*r.prompt_token_ids, *r.output_token_ids], page_size)
        for one, two in zip(hashes, hashes[1:]):
            after.setdefault(one, set()).add(two)
    pool = lab_pool(requests, cache_tokens, make_policy(policy, requests, cache_tokens, page_size), page_size)
    counts = {"victims": 0, "stranding": 0}
    pop_victims = pool.eviction.pop_victims

    def counted(n: int) -> list[int]:  # runs before the pool drops the victims' content
        victims = pop_victims(n)
        gone: list[bytes | None] = []  # this call's victims so far, in eviction order
        for victim in victims:
            block_hash = pool.table.block_hash[victim]  # a full page: it has one
            kept = [h for h in after.get(block_hash or b"", ()) if h not in gone]
            counts["stranding"] += any(pool.get_cached_block(h) is not None for h in kept)
            gone.append(block_hash)
        counts["victims"] += n
        return victims

    pool.eviction.pop_victims = counted  # type: ignore[method-assign]
    serve_one_at_a_time(SequenceManager(pool), requests)
    return counts["victims"], counts["stranding"]


def strand_counts(
    streams: dict[str, Sequence[LabRequest]], cache_tokens: int, policies: Sequence[str]
) -> dict[str, dict[str, tuple[int, int]]]:
    """stream -> policy -> `strand_count`'s (victims, stranding victims)."""
    return {w: {p: strand_count(r, cache_tokens, p) for p in policies} for w, r in streams.items()}


def strand_text(counts: dict[str, dict[str, tuple[int, int]]], cache_tokens: int) -> str:
    """`strand_counts` as lines: per stream, each policy's stranding victims of all its victims."""
    lines = [f"victims that leave a later page cached, of all victims, at {cache_tokens:,} tokens:"]
    for w, by_policy in counts.items():
        lines.append(f"  {w:5s} " + "  ".join(f"{p} {s:2d} of {n:5,d}" for p, (n, s) in by_policy.items()))
    return "\n".join(lines)
