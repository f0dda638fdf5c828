"""HostTier: a second memory tier under the pool; evicted pages are offloaded, not dropped.

When the pool evicts a CACHED page, its prefix is lost: the next prompt that starts the same
way recomputes it. A host-memory tier keeps those pages instead. `HostTier` listens to the
pool's page events (no change to the pool is needed):

- "cache": a page turned CACHED; its block hash and token ids are remembered (the pool
  clears them when it evicts, and the K/V are complete by then: the SequenceManager's contract);
- "evict": the page's K/V are copied into the tier (`write_back`, offload bytes counted)
  under its block hash, unless the tier already holds that hash. The tier has its own
  capacity and its own eviction policy (`lru` or `mru` over its pages); when full it drops
  its own victim, and that prefix is gone for good;
- "cow": a copy-on-write that landed in a page evicted by the same operation has overwritten
  the K/V before the event was delivered, so that page's copy is discarded (never served
  wrong; that prefix is lost). `write_policy="write_through"` avoids the loss: it copies a
  page to the tier the moment it turns CACHED, at the price of copying pages that are never
  evicted.

`load_prefix(prompt)` is called before admitting a prompt: past the pool's own prefix hit
it walks the prompt's block hashes through the tier and copies the pages it finds back into
fresh pool pages (reload bytes counted), indexed and CACHED, so the admission that follows
(`seqs.add`, `TinyLM.generate`, the Scheduler) hits them like any cached prefix. Hits are
counted per tier in prompt tokens.

SGLang's hierarchical cache (HiRadixCache) and LMCache do the same between GPU and CPU
memory. SGLang's `--hicache-write-policy` has three values: `write_through` (its default) backs
a radix node up to host memory once it has been hit a threshold number of times (1),
`write_through_selective` raises that threshold (3), and `write_back` copies only on eviction,
as this tier's default does. This tier's `write_through` copies on turning CACHED, not on
hits. Leaves out: asynchronous copies overlapping compute (they would make an offload free and
a reload partly hidden), a third tier (disk, remote), and prefetching ahead of the scheduler.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pagedkv.core.eviction import make_eviction_policy
from pagedkv.core.hashing import block_hashes
from pagedkv.core.page import PageState
from pagedkv.core.plumbing.events import Event
from pagedkv.core.plumbing.validation import check_instance, check_int
from pagedkv.core.pool import KVCachePool

WRITE_POLICIES = ("write_back", "write_through")  # offload on eviction, or as soon as CACHED


@dataclass
class TierStats:
    """Counters since the tier was attached (tokens and bytes)."""

    queried_tokens: int = 0  # prompt tokens looked up by load_prefix
    gpu_hit_tokens: int = 0  # of those, served by the pool's own prefix cache
    host_hit_tokens: int = 0  # of those, copied back from the host tier
    offload_bytes: int = 0  # pool -> host (evicted pages)
    reload_bytes: int = 0  # host -> pool (second-tier prefix hits)
    offloaded_pages: int = 0
    dropped_pages: int = 0  # host pages evicted by the tier's own policy
    kept_pages: int = 0  # evicted pool pages the tier still held: not copied out again

    @property
    def gpu_hit_rate(self) -> float:
        return self.gpu_hit_tokens / self.queried_tokens if self.queried_tokens else 0.0

    @property
    def host_hit_rate(self) -> float:
        return self.host_hit_tokens / self.queried_tokens if self.queried_tokens else 0.0


class HostTier:
    """`capacity_bytes` of host memory in whole pages of `pool`'s shape, with an eviction policy."""

    def __init__(
        self, pool: KVCachePool, capacity_bytes: int, policy: str = "lru", write_policy: str = "write_back"
    ) -> None:
        check_instance("pool", pool, KVCachePool)
        cfg = pool.config
        self.page_bytes = cfg.kv_bytes // cfg.num_pages  # one page, every layer, K and V
        check_int("capacity_bytes", capacity_bytes, 0)
        if capacity_bytes < self.page_bytes:
            raise ValueError(
                f"capacity_bytes must hold at least one page ({self.page_bytes} bytes), got {capacity_bytes}"
            )
        self.pool, self.page_size = pool, pool.page_size
        self.num_pages = capacity_bytes // self.page_bytes
        self.policy = make_eviction_policy(policy)  # ValueError naming the choices
        if write_policy not in WRITE_POLICIES:
            raise ValueError(f"write_policy must be one of {WRITE_POLICIES}, got {write_policy!r}")
        self.write_policy = write_policy
        page_shape = pool.kv_cache[:, :, 0].shape  # [layers, 2, page_size, kv_heads, head_dim]
        self.kv = np.zeros((self.num_pages, *page_shape), dtype=pool.kv_cache.dtype)
        self.index: dict[bytes, int] = {}  # block hash -> host page
        self.entries: dict[int, tuple[bytes, list[int]]] = {}  # host page -> (hash, token ids)
        self._free = list(range(self.num_pages - 1, -1, -1))  # stack: lowest page first
        self._cached: dict[int, tuple[bytes, list[int]]] = {}  # pool page -> (hash, tokens)
        self._offloaded_now: dict[int, bytes] = {}  # pool page -> hash, this operation only
        self._now = -1  # the clock of the operation whose events are being delivered
        self.stats = TierStats()
        pool.add_listener(self._on_event)

    def __len__(self) -> int:
        """Pages the tier holds."""
        return len(self.index)

    def detach(self) -> None:
        """Stop listening to the pool."""
        self.pool.remove_listener(self._on_event)

    # ---- offload: the pool's events ----------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        if event.clock != self._now:
            self._now, self._offloaded_now = event.clock, {}
        if event.kind == "cache":
            page = self.pool.page(event.page_id)
            assert page.block_hash is not None  # CACHED: full and indexed (docs/design.md rule 6)
            entry = (page.block_hash, list(page.token_ids))
            if self.write_policy == "write_through":
                self._offload(event.page_id, *entry)
            else:
                self._cached[event.page_id] = entry
        elif event.kind == "evict":
            evicted = self._cached.pop(event.page_id, None)
            if evicted is not None:
                self._offload(event.page_id, *evicted)
        elif event.kind in ("free", "reset"):
            self._cached.pop(event.page_id, None)
        elif event.kind == "cow" and event.page_id in self._offloaded_now:
            block_hash = self._offloaded_now.pop(event.page_id)
            if block_hash in self.index:
                self._discard(block_hash)

    def _offload(self, page_id: int, block_hash: bytes, token_ids: list[int]) -> None:
        if block_hash in self.index:  # already here (it was reloaded earlier): refresh only
            slot = self.index[block_hash]
            self.policy.remove(slot)
            self.policy.add(slot)
            self.stats.kept_pages += 1
            return
        if not self._free:
            self._discard(self.entries[self.policy.pop_victim()][0], count=True)
        slot = self._free.pop()
        self.kv[slot] = self.pool.kv_cache[:, :, page_id]
        self.index[block_hash], self.entries[slot] = slot, (block_hash, token_ids)
        self.policy.add(slot)
        self._offloaded_now[page_id] = block_hash
        self.stats.offload_bytes += self.page_bytes
        self.stats.offloaded_pages += 1

    def _discard(self, block_hash: bytes, count: bool = False) -> None:
        slot = self.index.pop(block_hash)
        del self.entries[slot]
        if slot in self.policy:
            self.policy.remove(slot)
        self._free.append(slot)
        self.stats.dropped_pages += count

    # ---- reload: before an admission ----------------------------------------------------------

    def load_prefix(self, prompt_token_ids: Sequence[int], extra_key: object = None) -> dict[str, int]:
        """Copy the prompt's pages that only the tier holds back into the pool, so the next
        admission of this prompt hits them. Returns the tokens served by each tier and the
        bytes reloaded. Copies only as many pages as FREE + evictable CACHED pages allow."""
        pool, size = self.pool, self.page_size
        tokens = list(prompt_token_ids)
        algo = pool.config.prefix_caching_hash_algo  # the names the pool's index uses
        # docs/design.md rule 5: never the page holding the last prompt token
        hashes = block_hashes(tokens, size, extra_key, algo)[: (len(tokens) - 1) // size]
        gpu = pool.find_longest_cache_hit(hashes, tokens)
        found = []  # host pages of blocks len(gpu), len(gpu) + 1, ...
        for block in range(len(gpu), len(hashes)):
            slot = self.index.get(hashes[block])
            if slot is None or self.entries[slot][1] != tokens[block * size : (block + 1) * size]:
                break
            found.append(slot)
        revived = sum(pool.page(p).state is PageState.CACHED for p in gpu)
        found = found[: max(0, pool.num_available_pages - revived)]
        if found:
            self._reload(gpu, found, hashes, tokens)
        st = self.stats
        st.queried_tokens += len(tokens)
        st.gpu_hit_tokens += len(gpu) * size
        st.host_hit_tokens += len(found) * size
        st.reload_bytes += len(found) * self.page_bytes
        return {
            "gpu_hit_tokens": len(gpu) * size,
            "host_hit_tokens": len(found) * size,
            "reload_bytes": len(found) * self.page_bytes,
        }

    def _reload(self, gpu: list[int], found: list[int], hashes: list[bytes], tokens: list[int]) -> None:
        """One pool operation: hold the pool's own hits (so they are not the victims), take
        fresh pages, write the host K/V into them, index them, release everything CACHED."""
        pool, first = self.pool, len(gpu)
        staged = self.kv[found]  # a copy: offloading the victims below may reuse these slots
        for slot in found:  # a hit: the most recently used host pages now
            self.policy.remove(slot)
            self.policy.add(slot)
        pool.tick()
        pool.touch(gpu, None, "prefix_hit")
        _, victims = pool.peek_allocation(len(found))
        for page_id in victims:  # offload now: their K/V are about to be overwritten
            entry = self._cached.pop(page_id, None)
            if entry is not None:
                self._offload(page_id, *entry)
        pages = pool.get_new_blocks(len(found), None)
        pool.kv_cache[:, :, pages] = np.moveaxis(staged, 0, 2)  # [layers, 2, n, page_size, ...]
        pool.fill_blocks(pages, tokens, first)
        pool.cache_full_blocks(pages, hashes[first : first + len(found)])
        pool.free_blocks(list(reversed(gpu + pages)), None)  # tail first, as a sequence frees
        pool.publish()
