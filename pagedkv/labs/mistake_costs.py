"""What two of notebook 08's mistakes cost, measured on pagedkv's own code.

- `bookkeeping_counts`: the per-token bookkeeping of a pool with 1-token pages against one
  with larger pages, on the same requests (block-table entries, page allocations, block-hash
  lookups in the prefix index).
- `block_table_reads`: the block-table bytes one decode step reads, next to the K/V bytes it
  reads, for a real model's batch (counts, no clock).
- `repeated_context`: the naive "attention" (a sum of k * v) against dense softmax attention
  when the same context is repeated: the first grows with the context, the second does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from pagedkv.labs.costs import bytes_per_token
from pagedkv.labs.naive import naive_attention, pagedkv_cache
from pagedkv.labs.specs import model_spec
from pagedkv.model.attention import dense_attention


class _CountingDict(dict):
    """A block-hash -> page dict that counts its lookups (`get` and `setdefault` calls) and,
    of them, the `get` calls that miss."""

    lookups = 0
    misses = 0

    def get(self, key: Any, default: Any = None) -> Any:
        self.lookups += 1
        self.misses += key not in self
        return super().get(key, default)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        self.lookups += 1
        return super().setdefault(key, default)


def bookkeeping_counts(prompts: Iterable[Sequence[int]], page_size: int, num_tokens: int) -> dict[str, int]:
    """Serve `prompts` one at a time (admit, then free) on a pagedkv pool of `num_tokens`
    slots in pages of `page_size`, and count its bookkeeping: `tokens` (prompt tokens),
    `table_entries` (block-table entries written at admission, one per page a prompt holds),
    `allocations` (pages handed out, from the pool's counter), `hash_lookups` (lookups of a
    block hash in the prefix index: at admission, when a full page is indexed, and at release),
    `missed_lookups` (those of them that found nothing), `hit_tokens` (prompt tokens served
    by prefix hits) and `full_pages` (full pages the prompts hold, each with a block hash)."""
    seqs = pagedkv_cache(num_tokens // page_size, page_size)
    index = _CountingDict()
    seqs.pool.prefix_index.hash_to_page = index  # empty so far: nothing is lost
    tokens = entries = full = 0
    for i, prompt in enumerate(prompts):
        seqs.add(f"r{i}", list(prompt))
        tokens += len(prompt)
        full += len(prompt) // page_size
        entries += len(seqs.block_table(f"r{i}"))
        seqs.free(f"r{i}")
    return {
        "tokens": tokens,
        "table_entries": entries,
        "allocations": seqs.pool.stats.allocations,
        "hash_lookups": index.lookups,
        "missed_lookups": index.misses,
        "hit_tokens": seqs.pool.stats.prefix_hits,  # the pool counts them itself
        "full_pages": full,
    }


def longest_earlier_prefix(prompts: Sequence[Sequence[int]]) -> list[int]:
    """For each prompt, the most tokens it shares from its start with any prompt before it
    (0 for the first), at most its length - 1: the last token is always computed. With pages
    of 1 token these are the prompt's prefix-hit tokens when nothing is evicted."""
    out = []
    for i, prompt in enumerate(prompts):
        best = 0
        for earlier in prompts[:i]:
            n = 0
            while n < min(len(prompt), len(earlier)) and prompt[n] == earlier[n]:
                n += 1
            best = max(best, n)
        out.append(min(best, len(prompt) - 1))
    return out


def block_table_reads(
    batch: int, context: int, model: str, page_sizes: Sequence[int] = (1, 16), entry_bytes: int = 4
) -> dict[Any, Any]:
    """What one decode step of `batch` requests of `context` tokens reads on `model`: `layers`,
    `kv_bytes` (K and V of every token in every layer) and, per page size in `page_sizes`,
    `entries` (block-table entries per layer: one per page), `table_bytes` (those entries
    read by one layer's attention, `entry_bytes` each: int32 in vLLM), `step_table_bytes`
    (every layer reads them again), `share` (step_table_bytes / kv_bytes) and `kv_per_entry`
    (bytes of one layer's K/V that one entry points to). Example: Qwen2.5-7B, 256 x 2,048,
    pages of 1 -> 2 MiB of block table per layer, 28 GiB of K/V per step."""
    layers = model_spec(model).num_layers
    kv_bytes = batch * context * bytes_per_token(model)
    out: dict[Any, Any] = {"layers": layers, "kv_bytes": kv_bytes}
    for size in page_sizes:
        entries = batch * -(-context // size)
        table = entries * entry_bytes
        out[size] = {
            "entries": entries,
            "table_bytes": table,
            "step_table_bytes": layers * table,
            "share": layers * table / kv_bytes,
            "kv_per_entry": size * bytes_per_token(model) // layers,
        }
    return out


def repeated_context(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, repeats: Sequence[int]
) -> list[dict[str, Any]]:
    """For each n in `repeats`: the context (k, v) repeated n times, attended by `q` (one query,
    [1, H, D]) with the naive sum of k * v and with dense softmax attention. Per n: `length`
    (positions), `naive` and `dense` (the outputs, [H, D], float64) and `max_error`
    (max |naive - dense|). Repeating the context leaves softmax attention's weighted mean
    unchanged, while the sum grows n times."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    rows = []
    for n in repeats:
        kn, vn = np.tile(k, (n, 1, 1)), np.tile(v, (n, 1, 1))
        naive = naive_attention(q, kn, vn)[0]
        dense = dense_attention(q, kn, vn, causal=True)[0]
        rows.append(
            {
                "length": len(kn),
                "naive": naive,
                "dense": dense,
                "max_error": float(np.abs(naive - dense).max()),
            }
        )
    return rows


def system_prompt_requests(count: int = 40, own: int = 8, seed: int = 0) -> tuple[list[int], list[list[int]]]:
    """Notebook 08's requests: a shared 32-token system prompt, then `own` random lowercase
    letters each (seeded). Returns (system prompt, requests)."""
    rng = np.random.default_rng(seed)
    system = list(b"System: answer in one sentence. ")
    return system, [system + rng.integers(97, 123, own).tolist() for _ in range(count)]
