"""The radix tree as the pool's prefix index (CacheConfig(prefix_index="radix")).

Held to the plain reference model (pagedkv/exercises/reference_pool.py) with the two rules where a
tree differs from a hash chain spelled out in `TreeReferencePool`: a block is indexed only
if its parent's content is, and the victim is the least recently used *leaf*, where using a
page uses its whole prefix. Everything else (hits, block tables, states, counters) must be
what the reference pool does. Generation through the radix pool equals recomputation."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import invariant

from pagedkv import CacheConfig, KVCachePool, SequenceManager, TinyLM
from pagedkv.core.config import ConfigError
from pagedkv.exercises.reference_pool import ReferencePool
from pagedkv.labs.hit_rate_lab import replay
from pagedkv.labs.lab_workloads import lab_workload
from pagedkv.service.restore import restore_pool

from .hypothesis_profiles import examples
from .pool_machine import PoolRules
from .pools import make


class TreeReferencePool(ReferencePool):
    """ReferencePool with a tree's two rules (module docstring); prefixes are token tuples."""

    def __init__(self, num_pages: int, page_size: int):
        super().__init__(num_pages, page_size)
        self.time: dict[tuple, int] = {}  # indexed prefix -> last use of it or a longer one
        self.now = 0
        self.appending = None  # the sequence whose page is being sealed by append

    def _seal(self, pid, extra, prefix):
        if len(prefix) > self.page_size and not self._parent_indexed(extra, prefix):
            self.key[pid] = (extra, tuple(prefix))  # full and hashed, but not indexed
            return
        super()._seal(pid, extra, prefix)

    def _parent_indexed(self, extra, prefix):
        if self.appending is None:  # admission: a recomputed copy can only be the last page
            return (extra, tuple(prefix[: -self.page_size])) in self.index
        parent = self.tables[self.appending][-2]  # the page this sequence holds before it
        return self.index.get(self.key[parent]) == parent

    def append(self, seq, token):
        self.appending = seq
        try:
            super().append(seq, token)
        finally:
            self.appending = None

    def _use(self, key):
        self.now += 1
        extra, prefix = key
        for end in range(self.page_size, len(prefix) + 1, self.page_size):
            if (extra, prefix[:end]) in self.index:
                self.time[extra, prefix[:end]] = self.now

    def _is_leaf(self, key, index):
        extra, prefix = key
        return not any(
            k[0] == extra and len(k[1]) == len(prefix) + self.page_size and k[1][: len(prefix)] == prefix
            for k in index
        )

    def _victims(self):
        index, left, out = dict(self.index), list(self.evictable), []
        while left:
            leaves = [p for p in left if self._is_leaf(self.key[p], index)]
            victim = min(leaves, key=lambda p: self.time[self.key[p]])
            out.append(victim)
            left.remove(victim)
            del index[self.key[victim]]
        return out

    def eviction_order(self):
        return self._victims()

    def _take_page(self):
        if self.free:
            return super()._take_page()
        victim = self._victims()[0]
        self.evictable.remove(victim)
        self.evictable.insert(0, victim)
        saved, self.policy = self.policy, "lru"
        try:
            return super()._take_page()  # takes evictable[0] as the victim
        finally:
            self.policy = saved

    def add(self, seq, tokens, extra=None):
        before = set(self.evictable)
        hits = super().add(seq, tokens, extra)
        for pid in self.tables[seq][: hits // self.page_size]:
            if pid in before:
                self._use(self.key[pid])
        return hits

    def free_seq(self, seq):
        before = set(self.evictable)
        super().free_seq(seq)
        self.now += 1
        for pid in [p for p in self.evictable if p not in before]:
            self._use(self.key[pid])


def make_pool(num_pages, page_size):
    return make(num_pages, page_size, prefix_index="radix")


def make_machine(num_pages: int, page_size: int):
    class RadixMachine(PoolRules):
        def __init__(self):
            super().__init__()
            self.pool, self.mgr = make_pool(num_pages, page_size)
            self.ref = TreeReferencePool(num_pages, page_size)

        @invariant()
        def agrees_with_reference(self):
            self.agrees_on_pages()
            self.pool.prefix_index.check()

    RadixMachine.TestCase.settings = settings(
        max_examples=examples(60),
        stateful_step_count=40,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    return RadixMachine


TestRadixTight = make_machine(num_pages=5, page_size=2).TestCase
TestRadixRoomy = make_machine(num_pages=12, page_size=3).TestCase
TestRadixPageSizeOne = make_machine(num_pages=8, page_size=1).TestCase


@pytest.mark.parametrize("workload", ["chat", "zipf", "rag", "scan"])
def test_radix_and_hash_serve_the_same_hit_tokens_on_the_lab_streams(workload):
    requests = lab_workload(workload)
    for cache_tokens in (1024, 4096):
        hashed = replay(requests, cache_tokens, "lru", prefix_index="hash")
        radix = replay(requests, cache_tokens, "lru", prefix_index="radix")
        assert (radix.hit_tokens, radix.evictions) == (hashed.hit_tokens, hashed.evictions)


@pytest.mark.parametrize("page_size", [1, 4])
def test_generation_through_the_radix_pool_equals_recomputation(page_size):
    model = TinyLM(seed=0)
    num_pages = 64 if page_size == 1 else 40  # room for one request, not for all of them
    pool = KVCachePool(model.cache_config(num_pages=num_pages, page_size=page_size, prefix_index="radix"))
    seqs = SequenceManager(pool)
    rng = random.Random(page_size)
    system = "You are a terse assistant. "
    prompts = [system + q for q in ("Hi!", "What is a page?", "Hi!", "Why radix trees?")]
    prompts += ["".join(rng.choice("abc ") for _ in range(30)) for _ in range(4)]
    for i, prompt in enumerate(prompts):  # one at a time: later prompts hit earlier pages
        out = model.generate(seqs, [prompt], 12, seq_ids=[f"r{i}"])
        assert out[f"r{i}"] == model.generate_reference(prompt, 12), (i, prompt)
        seqs.check_invariants()
        pool.prefix_index.check()
    assert pool.stats.prefix_hits > 0 and pool.stats.evictions > 0


def test_bad_config():
    with pytest.raises(ConfigError, match=r"prefix_index must be one of \('hash', 'radix'\), got 'trie'"):
        CacheConfig(num_pages=4, prefix_index="trie")
    with pytest.raises(ConfigError, match="eviction_policy must be 'lru' with it, got 'arc'"):
        CacheConfig(num_pages=4, prefix_index="radix", eviction_policy="arc")


@pytest.mark.parametrize("preemption_mode", ["recompute", "swap"])
def test_the_scheduler_runs_on_the_radix_pool_and_matches_recomputation(preemption_mode):
    """Overlapping requests, prefix hits between running sequences, preemption: the
    scheduler does not know which index the pool uses, and the tokens stay exact."""
    from pagedkv import Scheduler
    from pagedkv.labs.workloads import Request

    model = TinyLM(seed=1)
    system = "Answer in one word. "
    questions = ["Sky?", "Sea?", "Sky?", "Fire, water or air?", "Sea?", "Night?"]
    requests = [Request(f"q{i}", model.encode(system + q), 8) for i, q in enumerate(questions)]
    outputs = {}
    for prefix_index in ("hash", "radix"):
        pool = KVCachePool(model.cache_config(num_pages=12, page_size=4, prefix_index=prefix_index))
        sched = Scheduler(
            SequenceManager(pool),
            model,
            max_num_seqs=4,
            max_num_batched_tokens=64,
            preemption_mode=preemption_mode,
            swap_space_pages=16,
        )
        sched.add_requests(requests)
        outputs[prefix_index] = sched.run()
        assert sched.stats.preemptions > 0  # the pool is tight: sequences are preempted
        sched.manager.check_invariants()
        assert pool.stats.prefix_hits > 0
    for r in requests:
        want = model.generate_reference(r.prompt_token_ids, r.max_new_tokens)
        assert outputs["radix"][r.req_id] == outputs["hash"][r.req_id] == want, r.req_id


def test_restore_refuses_a_radix_pool():
    pool, _ = make_pool(4, 2)
    with pytest.raises(ValueError, match="prefix_index='hash'"):
        restore_pool(pool, [], [], {}, 0)


def test_generate_one_at_a_time_rows_match_fresh_runs() -> None:
    """Each row of `generate_one_at_a_time` equals the counts of a fresh pool that ran only
    the prompts up to that request, by hand; the tokens equal recomputation."""
    from pagedkv.labs.radix_vs_hash import generate_one_at_a_time

    model = TinyLM(seed=0)
    prompts = ["You are terse. Hi.", "You are terse. Yo.", "You are terse. Hi.", "Other text, long."]
    for index in ("hash", "radix"):
        _, outputs, rows = generate_one_at_a_time(model, prompts, index, num_pages=10, max_new_tokens=6)
        assert outputs == [model.generate_reference(p, 6) for p in prompts]
        hits_so_far = 0
        for k, row in enumerate(rows):
            seqs = SequenceManager(KVCachePool(model.cache_config(10, 4, prefix_index=index)))
            for i, p in enumerate(prompts[: k + 1]):
                model.generate(seqs, [p], 6, seq_ids=[i], free=i < k)
            assert row["pages"] == seqs.block_table(k)
            seqs.free(k)
            stats = seqs.pool.stats
            assert len(row["evicted"]) == stats.evictions - (rows[k - 1]["evictions"] if k else 0)
            assert row["hits"] == stats.prefix_hits - hits_so_far
            hits_so_far = stats.prefix_hits
            assert (row["evictions"], row["free"]) == (stats.evictions, seqs.pool.num_free_pages)
            assert row["indexed"] == len(seqs.pool.prefix_index)


def test_orphan_pages_of_a_fresh_pool() -> None:
    """Notebook 09, section 5's corner, then its original page evicted: the hash chain keeps
    an indexed page that no prompt's lookup reaches (by hand: page 2) until a request writes
    the original again; the tree never indexes it. Checked against lookups through `plan_add`."""
    from pagedkv.labs.radix_vs_hash import orphan_pages

    for index in ("hash", "radix"):
        seqs = SequenceManager(KVCachePool(CacheConfig.bookkeeping(4, 2, prefix_index=index)))
        seqs.add("first", [1, 2])
        seqs.free("first")  # page 0 = [1, 2], CACHED
        seqs.add("second", [1, 2])  # the last-token rule: a copy in page 1
        seqs.append_slot("second", 3)
        seqs.append_slot("second", 4)  # page 2 = [3, 4]: the hash chain indexes it
        assert orphan_pages(seqs.pool) == []
        assert seqs.pool.prefix_index.holds_page(2) == (index == "hash")
        seqs.add("other", [7, 8, 9])  # FREE page 3 and page 0, evicted
        assert seqs.pool.stats.evictions == 1 and seqs.block_table("other") == [3, 0]
        assert seqs.plan_add("probe", [1, 2, 3, 4, 5]).num_cached_tokens == 0  # no lookup reaches 2
        assert orphan_pages(seqs.pool) == ([2] if index == "hash" else [])
        seqs.free("other")  # page 3 = [7, 8] CACHED, page 0 FREE
        seqs.add("again", [1, 2, 5])  # writes [1, 2] again, into page 0: indexed now
        assert seqs.plan_add("probe", [1, 2, 3, 4, 5]).num_cached_tokens == (4 if index == "hash" else 2)
        assert orphan_pages(seqs.pool) == []


def test_request_account_sums_hold_and_match_a_hand_count() -> None:
    """Every sum `account_lines` prints evaluates to the pool's own count; request 1 of a
    fresh 10-page pool is counted by hand (18 + 6 - 1 = 23 tokens: 5 full pages and a
    partial one); a row whose counts are changed fails `account_sums_hold`."""
    import re

    from pagedkv.labs.radix_vs_hash import (
        account_lines,
        account_sums_hold,
        generate_one_at_a_time,
        request_account,
    )

    model = TinyLM(seed=0)
    prompts = ["You are terse. Hi.", "You are terse. Yo.", "You are terse. Hi.", "Other text, long."]
    rows = {}
    for index in ("hash", "radix"):
        rows[index] = generate_one_at_a_time(model, prompts, index, num_pages=10, max_new_tokens=6)[2]
        first = rows[index][0]
        assert first["new_pages"] == list(range(6)) and first["new_indexed"] == list(range(5))
        assert first["released_free"] == [5] and first["free"] == 10 - 6 + 1
        assert account_sums_hold(rows[index], num_pages=10)
        for i, row in enumerate(rows[index]):
            lines = account_lines(rows[index], i, num_pages=10)
            for line, key in zip(lines[2:], ("evictions", "indexed", "free"), strict=True):
                sum_text = re.sub(r"\[[^]]*\]|[a-zA-Z]+", "", line.rsplit(":", 1)[1])
                total, terms = sum_text.split("=")
                assert eval(terms) == int(total) == row[key], (index, i, line)  # noqa: S307
        broken = [dict(row) for row in rows[index]]
        broken[1]["free"] += 1
        assert not account_sums_hold(broken, num_pages=10)  # type: ignore[arg-type]
    text = request_account(rows, 0, num_pages=10)
    assert all(line.lstrip().startswith("both:") for line in text.splitlines()[1:])  # request 1
    for i in range(len(prompts)):  # a line differs between the pools <=> it is printed per pool
        text = request_account(rows, i, num_pages=10)
        lines = {name: account_lines(rows[name], i, num_pages=10) for name in rows}
        for hash_line, radix_line in zip(lines["hash"], lines["radix"], strict=True):
            if hash_line == radix_line:
                assert f"both:  {hash_line}" in text and f"hash:  {hash_line}" not in text
            else:
                assert f"hash:  {hash_line}" in text and f"radix: {radix_line}" in text


def test_corner_pages_by_hand() -> None:
    """Pages of 2 tokens, no eviction. B repeats A's prompt [1, 2, 3, 4]: it hits [1, 2] only
    (last-token rule), recomputes [3, 4] into a copy, then writes [5, 6] and [7, 8]. By hand:
    the hash chain counts [5, 6] (its page before is the copy) but not [7, 8] (its page before,
    [5, 6], is indexed); the tree leaves [5, 6] out, so it counts [7, 8] too. A stream whose
    prompts end in new tokens never makes a copy: 0 in both."""
    from pagedkv.labs.lab_workloads import LabRequest
    from pagedkv.labs.radix_vs_hash import corner_pages

    a = LabRequest("a", [1, 2, 3, 4], [9])
    corner = [a, LabRequest("b", [1, 2, 3, 4], [5, 6, 7, 8])]
    fresh = [a, LabRequest("b", [1, 2, 3, 4, 10], [11, 12])]
    assert [corner_pages(corner, 40, index, page_size=2) for index in ("hash", "radix")] == [1, 2]
    assert [corner_pages(fresh, 40, index, page_size=2) for index in ("hash", "radix")] == [0, 0]


def test_evict_pages_frees_exactly_the_pages_asked_leaf_first() -> None:
    from pagedkv.labs.radix_vs_hash import evict_pages
    from pagedkv.radix.radix_cache import RadixCache

    cache = RadixCache(page_size=1)
    cache.insert([1, 2], [10, 20])
    cache.insert([3, 4], [30, 40])
    cache.insert([1, 2, 5], [10, 20, 50])  # [5] is a leaf under [1, 2]
    cache.match_prefix([3, 4])  # [3, 4] is the most recently used now
    assert evict_pages(cache, 2) == [50, 20]  # by hand: leaf [5], then its parent's tail
    assert cache.total_size() == 3 and evict_pages(cache, 9) == [10, 40, 30]
    cache.check()


def test_block_rows_of_notebook_09_request_3_by_hand() -> None:
    from pagedkv.labs.radix_roles import block_rows, block_table_text

    def row(pages, hits, evicted, released_free, orphans):
        return {"pages": pages, "hits": hits, "evicted": evicted, "released_free": released_free,
                "orphans": orphans}  # fmt: skip

    r1 = row(list(range(10)), 0, [], [9], [])
    r2 = row([0, 1, 2, 3, 4, 9, 10, 11, 8], 20, [8], [], [])
    r3 = [0, 1, 2, 3, 4, 5, 7, 6, 8, 11]
    rows = {
        "hash": [r1, r2, row(r3, 24, [7, 6, 8, 11], [7, 11], [6, 8])],
        "radix": [r1, r2, row(r3, 24, [7, 6, 8, 11], [7, 6, 8, 11], [])],
    }
    a = list(range(100, 137))  # 28 prompt tokens, 9 answer tokens
    b = a[:20] + list(range(200, 216))  # differs from block 5 on
    tokens, prompt_lens = [a, b, a], [28, 27, 28]
    assert block_rows(rows["hash"], 2, tokens, prompt_lens) == [  # type: ignore[arg-type]
        *[(k, k, "prefix hit", "", "indexed") for k in range(6)],
        (6, 7, "was request 1's block 7", "copy of block 6", "FREE"),
        (7, 6, "was request 1's block 6", "", "orphan"),
        (8, 8, "was request 2's block 8", "", "orphan"),
        (9, 11, "was request 2's block 7", "partial: not full", "FREE"),
    ]
    assert [r[4] for r in block_rows(rows["radix"], 2, tokens, prompt_lens)][6:] == ["FREE"] * 4  # type: ignore[arg-type]
    # request 2 shares blocks 0-4 only: its block 5 is no copy
    assert block_rows(rows["hash"], 1, tokens, prompt_lens)[5] == (5, 9, "FREE", "", "indexed")  # type: ignore[arg-type]
    text = block_table_text(rows, 2, tokens, prompt_lens).splitlines()  # type: ignore[arg-type]
    assert text[0] == "request 3: block table [0, 1, 2, 3, 4, 5, 7, 6, 8, 11]"
    assert text[1] == "hash, radix: each pool's page state after release"
    assert [line.split(" | ")[:2] for line in text[3:]] == [
        ["0-5  ", "0-5 "],
        ["6    ", "7   "],
        ["7    ", "6   "],
        ["8    ", "8   "],
        ["9    ", "11  "],
    ]
    assert [c.strip() for c in text[2].split(" | ")] == ["block", "page", "came from", "hash", "radix"]
    assert [c.strip() for c in text[4].split(" | ")][-2:] == ["FREE", "FREE"]  # block 6, the copy
    assert [c.strip() for c in text[5].split(" | ")][-2:] == ["orphan", "FREE"]  # block 7, page 6
    assert [c.strip() for c in text[6].split(" | ")][-2:] == ["orphan", "FREE"]  # block 8, page 8
    assert max(map(len, text)) <= 90  # one line per block on a 1280 px screen, no wrap


def test_sglang_replay_node_changes_by_hand() -> None:
    """Pages of 2 tokens, no eviction, inserting only at finish. A stores [1, 2, 3, 4, 5]: its
    lookup of [1, 2, 3] finds nothing (no change), its insert adds one node of 2 pages. B's
    prompt [1, 2, 9, 9] looks up [1, 2, 9]: the match, 1 page, ends inside A's node and splits
    it (+1); B's insert hangs its own pages under the shared one as a new leaf (+1). 3 nodes at
    the end. By default each prompt also goes in after prefill: A's prompt is its 2 full pages
    (+1, its finish adds no full page), B's adds [9, 9] (+1, its finish nothing)."""
    from pagedkv.labs.lab_workloads import LabRequest
    from pagedkv.labs.radix_vs_hash import sglang_replay

    stream = [LabRequest("a", [1, 2, 3, 4], [5]), LabRequest("b", [1, 2, 9, 9], [7])]
    changes: list[tuple[str, int]] = []
    result = sglang_replay(stream, 40, page_size=2, node_changes=changes, after_prefill=False)
    assert changes == [("lookup", 0), ("insert", 1), ("lookup", 1), ("insert", 1)]
    assert result.entries == 3 == sum(change for _, change in changes)
    assert result == sglang_replay(stream, 40, page_size=2, after_prefill=False)  # recording changes nothing
    changes.clear()
    result = sglang_replay(stream, 40, page_size=2, node_changes=changes)
    steps = [("lookup", 0), ("insert", 1), ("insert", 0)]  # a: after prefill, at finish
    assert changes == steps + [("lookup", 1), ("insert", 1), ("insert", 0)]  # b
    assert result.entries == 3 == sum(change for _, change in changes)


def test_sglang_row_inserts_prompt_pages_after_prefill() -> None:
    """Pages of 2 tokens, a cache of 4 pages, whole-leaf eviction. A ([1, 2, 3, 4, 5], answer
    [6, 7, 8]) fills all 4 pages. SGLang inserts its prompt's 2 full pages after prefill and the
    answer's at finish: two nodes. B ([9, 9, 9]) needs 2 pages, so evict takes the answer's
    leaf alone (2 pages), and C ([1, 2, 3, 4, 0]) still hits A's prompt: 4 tokens. Inserting
    only at finish makes A one node of 4 pages; B's eviction takes all 4 and C hits nothing.
    The bench's sglang row is SGLang's timing."""
    from pagedkv.labs.lab_workloads import LabRequest
    from pagedkv.labs.radix_vs_hash import compare_indexes, sglang_replay

    stream = [LabRequest("a", [1, 2, 3, 4, 5], [6, 7, 8]), LabRequest("b", [9, 9, 9], [])]
    stream.append(LabRequest("c", [1, 2, 3, 4, 0], []))
    row = compare_indexes(stream, 8, page_size=2)[2]
    assert (row.index, row.hit_tokens, row.evictions) == ("sglang", 4, 2)
    assert row == sglang_replay(stream, 8, page_size=2)  # the default is SGLang's timing
    at_finish = sglang_replay(stream, 8, page_size=2, after_prefill=False)
    assert (at_finish.hit_tokens, at_finish.evictions) == (0, 4)


def test_sglang_replay_after_prefill_by_hand() -> None:
    """Section 4a's corner, pages of 2 tokens, SGLang's insert after prefill. `second` repeats
    [1, 2] (recomputed in a new page) and writes [3, 4]. Its insert after prefill finds [1, 2]
    in the tree (no node), frees the copy and moves `second` onto page 0; its insert at finish
    hangs [3, 4] under it (+1). `third` hits [1, 2, 3, 4]: 4 tokens, 2 pages in 2 nodes."""
    from pagedkv.labs.lab_workloads import LabRequest
    from pagedkv.labs.radix_vs_hash import sglang_replay

    stream = [LabRequest("first", [1, 2], []), LabRequest("second", [1, 2], [3, 4])]
    stream.append(LabRequest("third", [1, 2, 3, 4, 5], []))
    changes: list[tuple[str, int]] = []
    result = sglang_replay(stream, 16, page_size=2, node_changes=changes)  # the default
    steps = [("lookup", 0), ("insert", 1), ("insert", 0)]  # first
    steps += [("lookup", 0), ("insert", 0), ("insert", 1)]  # second
    steps += [("lookup", 0), ("insert", 0), ("insert", 0)]  # third
    assert changes == steps
    assert (result.hit_tokens, result.entries, result.cached_pages) == (4, 2, 2)


def test_sglang_replay_after_prefill_page_by_page_matches_the_pool() -> None:
    """One request at a time with page-by-page eviction, inserting prompt pages after prefill
    as well as at finish changes no hit and no eviction: the pool with the tree (an
    independent implementation) gets the same counts. A copy the insert after prefill failed
    to free would cost evictions."""
    from pagedkv.labs.radix_vs_hash import pool_replay, sglang_replay

    chat = lab_workload("chat", seed=0)
    pool = pool_replay(chat, 2048, "radix")
    for after_prefill in (False, True):
        model = sglang_replay(chat, 2048, whole_leaves=False, after_prefill=after_prefill)
        assert (model.hit_tokens, model.evictions) == (pool.hit_tokens, pool.evictions)
        assert model.cached_pages == pool.cached_pages


def test_block_table_text_merges_pages_running_down() -> None:
    """Request 2 evicts request 1's pages 5, 4, 3, 2, 1 for its blocks 0-4, then takes the FREE
    page 6: by hand, the five evicted pages run down by one and share a line; page 6 has its
    own (another source)."""
    from pagedkv.labs.radix_roles import block_table_text

    def row(pages, evicted, released_free):
        return {"pages": pages, "hits": 0, "evicted": evicted, "released_free": released_free,
                "orphans": []}  # fmt: skip

    r1 = row([0, 1, 2, 3, 4, 5], [], [])
    r2 = row([5, 4, 3, 2, 1, 6], [5, 4, 3, 2, 1], [])
    tokens = [list(range(100, 124)), list(range(200, 224))]  # no shared prefix
    text = block_table_text({"hash": [r1, r2]}, 1, tokens, [24, 24]).splitlines()
    assert [[c.strip() for c in line.split(" | ")] for line in text[2:]] == [
        ["0-4", "5, 4, 3, 2, 1", "was request 1's blocks 5, 4, 3, 2, 1", "indexed"],
        ["5", "6", "FREE", "indexed"],
    ]


def test_request_table_by_hand() -> None:
    """Hand-made rows: a line per request where the pools agree, a line per pool where they
    differ; each line lists the request's pages in block order (block 0's page first)."""
    from pagedkv.labs.radix_roles import request_table

    def row(hits, pages, evicted):
        return {"hits": hits, "pages": pages, "evicted": evicted, "new_indexed": [], "orphans": []}

    shared = [row(0, [0, 1, 2], []), row(8, [0, 1, 4, 3], [4, 3])]
    rows = {
        "hash": [*shared, row(0, [9, 8, 7, 2], [2])],
        "radix": [*shared, row(0, [5, 6, 7, 2], [2])],
    }
    rows["radix"][1] = {**rows["radix"][1], "new_indexed": [3]}  # not shown: still one line
    lines = [[c.strip() for c in line.split(" | ")] for line in request_table(rows).splitlines()]  # type: ignore[arg-type]
    assert lines == [
        ["request", "hit blocks", "pages, in block order", "pages evicted"],
        ["1", "none", "0, 1, 2", "none"],
        ["2", "0-1", "0, 1, 4, 3", "4, 3"],
        ["3 hash", "none", "9, 8, 7, 2", "2"],
        ["3 radix", "none", "5, 6, 7, 2", "2"],
    ]
