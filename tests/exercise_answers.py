"""Answers to pagedkv.exercises: the reference solution of each, and the mistakes people make.

The solutions say what the solution regions of notebooks/exercises/ say (those are run by
nbval and graded by nbgrader in tests/test_nbgrader.py). Each WRONG entry is (answer, a phrase
the feedback must contain).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from pagedkv import LRUEvictionPolicy

# ---- reference solutions ---------------------------------------------------------------------


def slot_mapping(block_table, positions, page_size):
    return [block_table[p // page_size] * page_size + p % page_size for p in positions]


def pages_needed(num_tokens, page_size):
    return -(-num_tokens // page_size)


def block_hashes(token_ids, page_size, hash_block):
    hashes, parent = [], None
    for start in range(0, len(token_ids) - page_size + 1, page_size):
        parent = hash_block(parent, token_ids[start : start + page_size])
        hashes.append(parent)
    return hashes


class LRU:
    def __init__(self):
        self.pages = OrderedDict()  # page id -> None, least recently released first

    def add(self, page_id):
        self.pages[page_id] = None

    def add_all(self, page_ids):
        for page_id in page_ids:
            self.add(page_id)

    def remove(self, page_id):
        del self.pages[page_id]

    def pop_victim(self):
        return self.pages.popitem(last=False)[0]

    def pop_victims(self, n):
        return [self.pop_victim() for _ in range(n)]

    def order(self):
        return list(self.pages)

    def release_order(self):
        return list(self.pages)

    def clear(self):
        self.pages.clear()

    def __contains__(self, page_id):
        return page_id in self.pages

    def __len__(self):
        return len(self.pages)


def copy_on_write(block_table, num_tokens, page_size, ref_counts):
    if num_tokens % page_size == 0:
        return ("new_page", None)
    last = block_table[-1]
    if ref_counts[last] > 1:
        return ("copy", last)
    return ("write", last)


def paged_attention(q, k_cache, v_cache, block_table, context_len):
    page_size, num_kv_heads, head_dim = k_cache.shape[1:]
    positions = np.arange(context_len)
    pages = np.asarray(block_table)[positions // page_size]
    k = k_cache[pages, positions % page_size]  # [context_len, num_kv_heads, head_dim]
    v = v_cache[pages, positions % page_size]
    kv_head = np.arange(len(q)) // (len(q) // num_kv_heads)
    scores = np.einsum("hd,lhd->hl", q, k[:, kv_head]) / np.sqrt(head_dim)
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)
    return np.einsum("hl,lhd->hd", weights, v[:, kv_head])


def preemption(running, page_size, num_free_pages):
    running, free, victims, cost, i = list(running), num_free_pages, [], 0, 0
    while i < len(running):
        req_id, num_tokens = running[i]
        if num_tokens % page_size:  # room in the last page
            i += 1
        elif free:
            free -= 1
            i += 1
        else:
            victim, victim_tokens = running.pop()
            victims.append(victim)
            cost += victim_tokens
            free += -(-victim_tokens // page_size)
    return victims, cost


SOLUTIONS = {
    "slot_mapping": slot_mapping,
    "pages_needed": pages_needed,
    "block_hashes": block_hashes,
    "eviction_policy": LRU,
    "copy_on_write": copy_on_write,
    "paged_attention": paged_attention,
    "preemption": preemption,
}

# ---- plausible mistakes ----------------------------------------------------------------------


class MRU(LRU):
    def pop_victim(self):
        return self.pages.popitem(last=True)[0]

    def order(self):
        return list(reversed(self.pages))


class DelegatesLRU(LRUEvictionPolicy):  # full marks before: the reference does the work
    pass


class WrapsLRU(LRU):
    def __init__(self):
        super().__init__()
        self.inner = LRUEvictionPolicy()

    def add(self, page_id):
        self.inner.add(page_id)
        super().add(page_id)

    def pop_victim(self):
        self.inner.pop_victim()
        return super().pop_victim()


class ForgetsRevival(LRU):
    def remove(self, page_id):
        pass  # a prefix hit does not take the page off the list


class ByPageId(LRU):
    def pop_victim(self):
        victim = min(self.pages)
        del self.pages[victim]
        return victim

    def order(self):
        return sorted(self.pages)


class PeeksInsteadOfPops(LRU):
    def pop_victim(self):
        return next(iter(self.pages))


def _hash_partial_too(token_ids, page_size, hash_block):
    hashes, parent = [], None
    for start in range(0, len(token_ids), page_size):
        parent = hash_block(parent, token_ids[start : start + page_size])
        hashes.append(parent)
    return hashes


def _no_parent(token_ids, page_size, hash_block):
    full = len(token_ids) // page_size
    return [hash_block(None, token_ids[i * page_size : (i + 1) * page_size]) for i in range(full)]


def _first_hash_as_parent(token_ids, page_size, hash_block):
    hashes = []
    for start in range(0, len(token_ids) - page_size + 1, page_size):
        hashes.append(hash_block(hashes[0] if hashes else None, token_ids[start : start + page_size]))
    return hashes


def _no_scaling(q, k_cache, v_cache, block_table, context_len):
    return paged_attention(q * np.sqrt(q.shape[1]), k_cache, v_cache, block_table, context_len)


def _whole_pages(q, k_cache, v_cache, block_table, context_len):
    return paged_attention(q, k_cache, v_cache, block_table, len(block_table) * k_cache.shape[1])


def _pages_in_id_order(q, k_cache, v_cache, block_table, context_len):
    return paged_attention(q, k_cache, v_cache, sorted(range(len(block_table))), context_len)


def _float32(q, k_cache, v_cache, block_table, context_len):
    return paged_attention(q, k_cache, v_cache, block_table, context_len).astype(np.float32)


def _preempt_oldest(running, page_size, num_free_pages):
    running, free, victims, cost, i = list(running), num_free_pages, [], 0, 0
    while i < len(running):
        req_id, num_tokens = running[i]
        if num_tokens % page_size or free:
            free -= not num_tokens % page_size
            i += 1
        else:
            victim, victim_tokens = running.pop(0)
            victims.append(victim)
            cost += victim_tokens
            free += -(-victim_tokens // page_size)
            i = max(i - 1, 0)
    return victims, cost


def _preempt_the_asker(running, page_size, num_free_pages):
    running, free, victims, cost, i = list(running), num_free_pages, [], 0, 0
    while i < len(running):
        req_id, num_tokens = running[i]
        if num_tokens % page_size or free:
            free -= not num_tokens % page_size
            i += 1
        else:
            running.pop(i)
            victims.append(req_id)
            cost += num_tokens
            free += -(-num_tokens // page_size)
    return victims, cost


def _cost_in_pages(running, page_size, num_free_pages):
    victims, _ = preemption(running, page_size, num_free_pages)
    lengths = dict(running)
    return victims, sum(-(-lengths[v] // page_size) for v in victims)


# ---- a student's own wrong answers (the classroom trial: caught now, each with its own hint) --


def _pages_in_sorted_order(q, k_cache, v_cache, block_table, context_len):
    return paged_attention(q, k_cache, v_cache, sorted(block_table), context_len)


def _softmax_without_max(q, k_cache, v_cache, block_table, context_len):
    page_size, num_kv_heads, head_dim = k_cache.shape[1:]
    positions = np.arange(context_len)
    pages = np.asarray(block_table)[positions // page_size]
    k, v = k_cache[pages, positions % page_size], v_cache[pages, positions % page_size]
    kv_head = np.arange(len(q)) // (len(q) // num_kv_heads)
    with np.errstate(over="ignore", invalid="ignore"):
        weights = np.exp(np.einsum("hd,lhd->hl", q, k[:, kv_head]) / np.sqrt(head_dim))
        return np.einsum("hl,lhd->hd", weights / weights.sum(axis=1, keepdims=True), v[:, kv_head])


def _float32_inside(q, k_cache, v_cache, block_table, context_len):
    out = paged_attention(q.astype(np.float32), k_cache.astype(np.float32), v_cache, block_table, context_len)
    return out.astype(np.float64)


def _kv_head_modulo(q, k_cache, v_cache, block_table, context_len):
    page_size, num_kv_heads, head_dim = k_cache.shape[1:]
    positions = np.arange(context_len)
    pages = np.asarray(block_table)[positions // page_size]
    k, v = k_cache[pages, positions % page_size], v_cache[pages, positions % page_size]
    kv_head = np.arange(len(q)) % num_kv_heads
    scores = np.einsum("hd,lhd->hl", q, k[:, kv_head]) / np.sqrt(head_dim)
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    return np.einsum("hl,lhd->hd", weights / weights.sum(axis=1, keepdims=True), v[:, kv_head])


class OrderReversed(LRU):  # pop_victim right, order() last victim first
    def order(self):
        return list(reversed(self.pages))


class PopsOneTooFew(LRU):
    def pop_victims(self, n):
        return [self.pop_victim() for _ in range(n - 1)]


def _copy_returns_new_id(block_table, num_tokens, page_size, ref_counts):
    if num_tokens % page_size == 0:
        return ("new_page", None)
    last = block_table[-1]
    return ("copy", max(block_table) + 1) if ref_counts[last] > 1 else ("write", last)


def _delegates_hashes(token_ids, page_size, hash_block):
    import pagedkv

    return pagedkv.block_hashes(token_ids, page_size)


def _delegates_slots(block_table, positions, page_size):
    from pagedkv.core.plumbing import validation  # any pagedkv code will do: it is refused

    validation.check_int("page_size", page_size, 1, 1 << 20)
    return slot_mapping(block_table, positions, page_size)


WRONG = {
    "slot_mapping": [
        (lambda block_table, positions, page_size: list(positions), "the positions themselves"),
        (
            lambda block_table, positions, page_size: [
                block_table[p // page_size] + p % page_size for p in positions
            ],
            "a page id counts pages",
        ),
        (
            lambda block_table, positions, page_size: [block_table[0] * page_size + p for p in positions],
            "not contiguous",
        ),
        (_delegates_slots, "write it yourself"),
    ],
    "pages_needed": [
        (lambda num_tokens, page_size: num_tokens, "one page per token"),
        (lambda num_tokens, page_size: num_tokens // page_size, "partly filled last page"),
        (lambda num_tokens, page_size: num_tokens // page_size + 1, "exactly full"),
        (lambda num_tokens, page_size: -(-num_tokens / page_size), "is an int"),
    ],
    "block_hashes": [
        (_hash_partial_too, "partial block got a hash"),
        (_no_parent, "depend on its parent"),
        (_first_hash_as_parent, "the parent you pass on"),
        (_delegates_hashes, "calls pagedkv's own `block_hashes`"),
    ],
    "eviction_policy": [
        (MRU, "your pop_victim evicts the most recently released page first (MRU)"),
        (ForgetsRevival, "after remove the page is still in your set"),
        (ByPageId, "your pop_victim takes the lowest page id"),
        (PeeksInsteadOfPops, "after pop_victim the page is still in your set"),
        (OrderReversed, "pop_victim is right but order() lists the pages last victim first"),
        (PopsOneTooFew, "returned 1 page(s): it removes and returns exactly n"),
        (DelegatesLRU, "calls pagedkv's own `LRUEvictionPolicy`"),
        (WrapsLRU, "calls pagedkv's own `LRUEvictionPolicy.pop_victim`"),
    ],
    "copy_on_write": [
        (
            lambda block_table, num_tokens, page_size, ref_counts: (
                ("new_page", None) if num_tokens % page_size == 0 else ("write", block_table[-1])
            ),
            "every other block table",
        ),
        (
            lambda block_table, num_tokens, page_size, ref_counts: (
                ("new_page", None)
                if num_tokens % page_size == 0
                else (
                    ("copy", block_table[0])
                    if ref_counts[block_table[-1]] > 1
                    else ("write", block_table[-1])
                )
            ),
            "only the page being written",
        ),
        (
            lambda block_table, num_tokens, page_size, ref_counts: (
                ("copy", block_table[-1])
                if ref_counts[block_table[-1]] > 1
                else (("new_page", None) if num_tokens % page_size == 0 else ("write", block_table[-1]))
            ),
            "the last page is full",
        ),
        (
            lambda block_table, num_tokens, page_size, ref_counts: (
                ("new_page", None) if num_tokens % page_size == 0 else ("copy", block_table[-1])
            ),
            "the last holder may write in place",
        ),
        (_copy_returns_new_id, "not the id of the copy"),
    ],
    "paged_attention": [
        (_no_scaling, "sqrt(head_dim)"),
        (_whole_pages, "after context_len"),
        (_pages_in_id_order, "pages were read 0, 1, 2"),
        (_float32, "your result is float32: compute in float64"),
        (_pages_in_sorted_order, "pages were read in sorted page-id order"),
        (_softmax_without_max, "Subtract each head's largest score"),
        (_float32_inside, "about float32's precision"),
        (_kv_head_modulo, "read kv heads [0, 1, 0, 1]; they should read [0, 0, 1, 1]"),
    ],
    "preemption": [
        (_preempt_oldest, "your code preempts the oldest running request"),
        (_preempt_the_asker, "your code preempts the request that asks for the page"),
        (_cost_in_pages, "in tokens, not pages"),
    ],
}
