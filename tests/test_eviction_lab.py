"""The eviction lab: FIFO, LFU, ARC and S3-FIFO behave as their papers say, keep every pool
rule through the real pool, LRU's hit tokens equal the reference model's, and a policy that
breaks the interface is refused before it reaches a pool."""

from __future__ import annotations

import random

import pytest

from pagedkv import CacheConfig, EvictionPolicy, KVCachePool, LRUEvictionPolicy, SequenceManager
from pagedkv.core.config import ConfigError
from pagedkv.core.eviction import NotEvictableError, make_eviction_policy
from pagedkv.core.hashing import block_hashes
from pagedkv.exercises.reference_pool import ReferencePool
from pagedkv.labs.eviction_policies import (
    ARCEvictionPolicy,
    FIFOEvictionPolicy,
    LFUEvictionPolicy,
    S3FIFOEvictionPolicy,
)
from pagedkv.labs.hit_rate_lab import (
    PolicyRejected,
    check_policy,
    install_policy,
    lru_verdict,
    replay,
    reuse_probe,
    serve_one_at_a_time,
)
from pagedkv.labs.lab_workloads import LabRequest, lab_workload, mixed_traffic, multi_turn_chat, scan_mix

POLICIES = ["lru", "mru", "fifo", "lfu", "arc", "s3fifo"]


def keyed(policy, num_pages=8):
    policy.attach(num_pages, lambda page_id: f"content of {page_id}")
    return policy


def test_fifo_keeps_first_cached_order_through_hits():
    policy = FIFOEvictionPolicy()
    policy.add_all([1, 2, 3])
    policy.remove(1)  # a hit revives page 1 ...
    policy.add(1)  # ... and its release does not make it young again
    assert policy.order() == [1, 2, 3]
    assert policy.pop_victims(2) == [1, 2] and policy.order() == [3]


def test_lfu_evicts_the_least_revived_page_oldest_first():
    policy = LFUEvictionPolicy()
    policy.add_all([1, 2, 3])
    for _ in range(2):
        policy.remove(3)
        policy.add(3)
    policy.remove(1)
    policy.add(1)
    assert policy.order() == [2, 1, 3]  # revivals 0, 1, 2
    assert [policy.pop_victim() for _ in range(3)] == [2, 1, 3]


def test_s3fifo_one_off_content_leaves_first_and_returning_content_enters_main():
    policy = keyed(S3FIFOEvictionPolicy(), num_pages=10)
    policy.add_all([1, 2, 3])
    policy.remove(1)  # page 1 is reused while in the small queue
    policy.add(1)
    assert policy.order() == [2, 3, 1]  # 1 is promoted to the main queue, 2 and 3 go
    assert policy.pop_victim() == 2
    policy.add(2)  # the content of page 2 comes back (its hash is a ghost): main queue
    assert policy.order() == [3, 1, 2]
    assert [policy.pop_victim() for _ in range(3)] == [3, 1, 2]


def test_s3fifo_ghosts_are_as_many_as_main_holds_when_a_page_leaves_small():
    """Notebook 10's worked example, worked by hand: 1 and 2 are revived in S and go to M;
    3, 4 and 5 leave S while M holds 2 pages, so G keeps the last two; 6 leaves S with M
    empty, so G keeps one hash."""
    policy = keyed(S3FIFOEvictionPolicy(), num_pages=20)  # S's share: 2 pages
    policy.add_all([1, 2])
    for page_id in (1, 2):
        policy.remove(page_id)
        policy.add(page_id)
    policy.add_all([3, 4, 5, 6])
    seen = []
    while len(policy):
        victim = policy.pop_victim()
        seen.append((victim, policy.queues()))
    g = [[int(key.rsplit(" ", 1)[1]) for key in queues["G"]] for _, queues in seen]
    assert [victim for victim, _ in seen] == [3, 4, 5, 1, 2, 6]
    assert g == [[3], [3, 4], [4, 5], [4, 5], [4, 5], [6]]
    assert seen[0][1]["M"] == [1, 2] and seen[0][1]["S"] == [4, 5, 6]


def test_lfu_breaks_ties_by_release_order():
    policy = LFUEvictionPolicy()
    policy.add_all([5, 2, 9])
    policy.remove(2)
    policy.add(2)
    assert policy.order() == [5, 9, 2]  # 5 and 9 were revived equally often: 5 was released first


def test_arc_moves_its_target_on_ghost_hits():
    policy = keyed(ARCEvictionPolicy(), num_pages=4)
    policy.add_all([1, 2])
    policy.remove(2)
    policy.add(2)  # page 2 is in T2 (revived), page 1 in T1
    assert policy.order() == [1, 2]
    assert policy.pop_victim() == 1 and policy.p == 0
    policy.add(1)  # content 1 returns while a B1 ghost: recency would have kept it
    assert policy.p == 1 and policy.order() == [2, 1]  # both in T2 now, LRU first


def test_arc_counts_the_ghosts_that_come_back():
    """A hand trace on 2 pages whose content changes as the pool refills them: content "a"
    comes back once while a B1 ghost and once while a B2 ghost; new content and a page
    released again after a revival are no ghosts."""
    content = {1: "a", 2: "b"}
    policy = ARCEvictionPolicy()
    policy.attach(2, content.__getitem__)
    policy.add_all([1, 2])  # T1: a, b
    assert policy.pop_victim() == 1  # a leaves T1: B1 [a]
    content[1] = "c"
    policy.add(1)  # c is new: T1 b, c
    assert policy.pop_victim() == 2  # b leaves T1: B1 [a, b]
    content[2] = "a"
    policy.add(2)  # a is back from B1: T2 [a], p = 0 + max(0 / 1, 1) = 1
    assert (policy.tally["B1 ghost back"], policy.p) == (1, 1)
    policy.remove(1)
    policy.add(1)  # c revived and released: T2 at once, no ghost
    assert policy.pop_victim() == 2  # T1 is empty: a leaves T2, B2 [a]
    policy.add(2)  # a is back from B2: p = 1 - max(|B1| 1 / 1, 1) = 0
    assert (policy.tally["B1 ghost back"], policy.tally["B2 ghost back"], policy.p) == (1, 1, 0)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("page_size", [2, 4])
def test_every_policy_keeps_the_pool_rules(policy, page_size):
    rng = random.Random(page_size)
    pool = KVCachePool(CacheConfig(num_pages=12, page_size=page_size, eviction_policy=policy))
    seqs = SequenceManager(pool)
    prefixes = [[rng.randrange(50) for _ in range(9)] for _ in range(3)]
    live = []
    for step in range(150):
        if live and (len(live) > 2 or rng.random() < 0.4):
            seqs.free(live.pop(rng.randrange(len(live))))
        else:
            prompt = rng.choice(prefixes)[: rng.randrange(1, 10)] + [rng.randrange(50)] * rng.randrange(3)
            try:
                seqs.add(step, prompt)
                live.append(step)
                for _ in range(rng.randrange(4)):
                    seqs.append_slot(step, rng.randrange(50))
            except MemoryError:
                pass
        seqs.check_invariants()
        assert sorted(pool.eviction.order()) == sorted(pool.eviction.release_order())
    assert pool.stats.evictions > 0 and pool.stats.prefix_hits > 0


def reference_hits(requests, num_pages, page_size):
    ref = ReferencePool(num_pages, page_size)
    for r in requests:
        ref.add(r.req_id, list(r.prompt_token_ids))
        for token in r.output_token_ids:
            ref.append(r.req_id, token)
        ref.free_seq(r.req_id)
    return ref.stats["prefix_hits"], ref.stats["evictions"]


@pytest.mark.parametrize("workload", ["chat", "zipf", "rag", "scan"])
def test_lru_hit_tokens_equal_the_reference_model(workload):
    requests = lab_workload(workload)[:120]
    result = replay(requests, 1024, "lru", page_size=16)
    assert (result.hit_tokens, result.evictions) == reference_hits(requests, 64, 16)


class LeafWatch(LRUEvictionPolicy):
    """LRU that records, for each victim, whether some indexed page continues its prefix."""

    def __init__(self, prefix_of, indexed):
        super().__init__()
        self.prefix_of, self.indexed, self.interior = prefix_of, indexed, []

    def pop_victims(self, n):
        victims, indexed = super().pop_victims(n), self.indexed()
        for v in victims:
            if v not in indexed:  # check_policy's scratch run on a copy
                continue
            mine = self.prefix_of[indexed[v]]
            others = [self.prefix_of[h] for p, h in indexed.items() if p not in victims]
            self.interior += [o for o in others if len(o) > len(mine) and o[: len(mine)] == mine]
        return victims


def test_lru_on_the_hash_chain_is_leaf_first():
    """Children are released before their parents, so LRU never evicts a page whose
    prefix another cached page continues: it is SGLang's leaf-first LRU here."""
    requests = multi_turn_chat(num_conversations=8, turns=4)
    prefix_of = {}
    for r in requests:
        tokens = r.prompt_token_ids + r.output_token_ids
        for i, h in enumerate(block_hashes(tokens, 16)):
            prefix_of[h] = tuple(tokens[: (i + 1) * 16])
    pool = KVCachePool(CacheConfig(num_pages=40, page_size=16, num_layers=1, head_dim=1))

    def indexed():
        return {p: pool.page(p).block_hash for p in range(pool.num_pages) if pool.page(p).block_hash}

    watch = LeafWatch(prefix_of, indexed)
    install_policy(pool, watch)
    serve_one_at_a_time(SequenceManager(pool), requests)
    assert pool.stats.evictions > 50 and watch.interior == []


def test_lab_claims():
    """The notebook's answer: LRU wins on chat, loses on the scan to the scan-resistant
    policies, and the numbers are seeded."""
    rates = {
        w: {p: replay(lab_workload(w), 2048, p).hit_rate for p in ("lru", "lfu", "arc", "s3fifo")}
        for w in ("chat", "scan")
    }
    assert max(rates["chat"], key=rates["chat"].get) == "lru"
    assert all(rates["scan"][p] > rates["scan"]["lru"] + 0.05 for p in ("lfu", "arc", "s3fifo"))
    verdict = lru_verdict(rates)
    assert verdict[0].startswith("chat: LRU 58.5%, better than every other policy (the next best: arc")
    assert verdict[1].startswith("scan: LRU loses")
    assert replay(scan_mix(seed=3), 2048, "arc") == replay(scan_mix(seed=3), 2048, "arc")


class WrongType(LRUEvictionPolicy):
    def pop_victim(self):
        return str(super().pop_victim())


class NotEvictable(LRUEvictionPolicy):
    def pop_victim(self):
        super().pop_victim()
        return 99


def test_bad_policies_are_refused_and_the_pool_is_unchanged():
    pool = KVCachePool(CacheConfig(num_pages=4, page_size=2))
    before = pool.eviction
    with pytest.raises(TypeError, match=r"WrongType.pop_victim\(\) must return an int page id, got '1'"):
        install_policy(pool, WrongType())
    with pytest.raises(ValueError, match=r"returned page 99, which is not evictable"):
        install_policy(pool, NotEvictable())
    with pytest.raises(TypeError, match="policy must be a policy name or an EvictionPolicy, got dict"):
        check_policy({})
    assert pool.eviction is before and pool.clock == 0
    requests = [LabRequest("a", [1, 2, 3], [4])]
    with pytest.raises(ValueError, match=r"NotEvictable.pop_victim\(\) returned page 99"):
        replay(requests, 16, NotEvictable())


def test_bad_names_and_sizes():
    requests = [LabRequest("a", list(range(20)), [1, 2])]
    with pytest.raises(ConfigError, match=r"eviction_policy must be one of .*got 'lruu'"):
        replay(requests, 64, "lruu")
    with pytest.raises(ValueError, match=r"eviction_policy must be one of .*'s3fifo'"):
        make_eviction_policy("clock")
    with pytest.raises(ValueError, match=r"cache_tokens must be at least one page \(16 tokens\), got 8"):
        replay(requests, 8)
    with pytest.raises(ValueError, match=r"cache_tokens=16 \(1 pages of 16\) cannot hold the longest"):
        replay(requests, 16)
    with pytest.raises(ValueError, match="workload must be one of"):
        lab_workload("burst")


def test_lru_verdict_says_plainly_how_lru_compares_when_it_is_not_beaten():
    rates = {
        "ahead": {"lru": 0.60, "fifo": 0.50, "lfu": 0.55},
        "tied": {"lru": 0.585, "leaf-lru": 0.585, "arc": 0.585, "fifo": 0.54},
        "chat": {"lru": 0.585, "leaf-lru": 0.585, "lru+pin": 0.574},  # leaf-lru is LRU: left out
        "close": {"lru": 0.50, "arc": 0.505},
        "behind": {"lru": 0.50, "arc": 0.52, "lfu": 0.515},
    }
    assert lru_verdict(rates) == [
        "ahead: LRU 60.0%, better than every other policy (the next best: lfu 55.0%)",
        "tied: LRU 58.5%, as good as the best other policy (arc 58.5%)",
        "chat: LRU 58.5%, better than every other policy (the next best: lru+pin 57.4%)",
        "close: LRU 50.0%, within 1 point of the best other policy (arc 50.5%)",
        "behind: LRU loses (50.0%) to arc, lfu (best arc 52.0%)",
    ]
    named = lru_verdict(rates, best_label="highest on seed 0:")[4]
    assert named == "behind: LRU loses (50.0%) to arc, lfu (highest on seed 0: arc 52.0%)"
    assert lru_verdict(rates, margin=0.03)[4].startswith("behind: LRU 50.0%, within 3 points of")


def test_lru_verdict_without_another_policy():
    assert lru_verdict({"chat": {"lru": 0.585}, "scan": {"lru": 0.2}}) == [
        "chat: LRU 58.5%; no other policy ran to compare it with",
        "scan: LRU 20.0%; no other policy ran to compare it with",
    ]


class RevivedLast(EvictionPolicy):
    """A policy written as notebook 10 asks, with the public interface only: evict the page
    released longest ago among those no prefix hit has revived, else the oldest of all."""

    def __init__(self):
        super().__init__()
        self.revived = set()

    def remove(self, page_id):
        super().remove(page_id)
        self.revived.add(page_id)

    def order(self):
        pages = self.release_order()
        return [p for p in pages if p not in self.revived] + [p for p in pages if p in self.revived]

    def pop_victim(self):
        victim = self.order()[0]
        self.revived.discard(victim)
        return self.take_victim(victim)


def test_a_policy_of_ones_own_needs_only_the_public_interface():
    policy = RevivedLast()
    policy.add_all([1, 2, 3])
    policy.remove(1)
    policy.add(1)  # revived: released last, and kept last
    assert policy.release_order() == [2, 3, 1] and policy.order() == [2, 3, 1]
    policy.remove(2)
    policy.add(2)
    assert policy.order() == [3, 1, 2] and policy.pop_victims(2) == [3, 1]
    assert len(policy) == 1 and 2 in policy and 1 not in policy
    with pytest.raises(
        NotEvictableError, match=r"take_victim\(7\): page 7 is not evictable: it is not CACHED"
    ):
        policy.take_victim(7)
    assert policy.release_order() == [2]  # the refused call changed nothing
    check_policy(RevivedLast())
    # "seen once" first: one-off pages go before revived ones, as LFU (counts 1 and 2+) does
    scan = lab_workload("scan")
    assert replay(scan, 2048, RevivedLast()).hit_rate > replay(scan, 2048).hit_rate + 0.05


class CountsMarkedVictims(RevivedLast):
    """RevivedLast counting its victims, and those that carry a mark (`pop_victim`'s discard
    then forgets one)."""

    tally = {"victims": 0, "marked": 0}

    def pop_victim(self):
        victim = self.order()[0]
        CountsMarkedVictims.tally["victims"] += 1
        CountsMarkedVictims.tally["marked"] += victim in self.revived
        return super().pop_victim()


def test_without_the_discard_zipf_and_the_scan_do_not_change_as_their_victims_rarely_carry_a_mark():
    """10b's spoiler: on zipf and the scan a victim almost never carries a mark to forget (a
    page no hit revived is nearly always there to evict first), so the discard changes nothing."""

    class NoDiscard(RevivedLast):
        def pop_victim(self):
            return self.take_victim(self.order()[0])

    for name in ("zipf", "scan"):
        stream = lab_workload(name)
        CountsMarkedVictims.tally = {"victims": 0, "marked": 0}
        with_discard = replay(stream, 2048, CountsMarkedVictims())
        assert CountsMarkedVictims.tally["marked"] * 100 < CountsMarkedVictims.tally["victims"], name
        assert replay(stream, 2048, NoDiscard()).hit_tokens == with_discard.hit_tokens, name


def test_the_eviction_figure_draws_lru_over_leaf_lru_and_both_show():
    from matplotlib.colors import to_hex

    from pagedkv.bench import Report, eviction

    curves = {"chat": {"lru": [0.4, 0.5], "leaf-lru": [0.4, 0.5], "fifo": [0.3, 0.4]}}
    fig = eviction.figure(
        Report("e", [], [], data={"curves": curves, "sizes": [1024, 2048], "cache_tokens": 2048})
    )
    lines = {
        line.get_label(): line for line in fig.axes[0].get_lines() if not line.get_label().startswith("_")
    }
    lru, leaf = lines["lru"], lines["leaf-lru"]
    assert lru.get_zorder() > leaf.get_zorder() and lru.get_zorder() > lines["fifo"].get_zorder()
    assert leaf.get_linewidth() > 2 * lru.get_linewidth()  # the band shows on both sides
    assert to_hex(leaf.get_color()) != to_hex(lru.get_color())


class RevivedLastWithoutDiscard(RevivedLast):
    """The same policy with notebook 10's third step left out: a victim stays in `revived`."""

    def pop_victim(self):
        return self.take_victim(self.order()[0])


def test_the_third_step_check_catches_a_policy_that_never_forgets_a_victim():
    assert reuse_probe(RevivedLast()) == ([2, 1], [1, 3])
    assert reuse_probe(LRUEvictionPolicy()) == ([2, 1], [1, 3])  # the exercise as given
    assert reuse_probe(RevivedLastWithoutDiscard()) == ([2, 1], [3, 1])

    # what the notebook says: zipf cannot tell the two apart, rag can
    def rates(stream: str) -> tuple[float, float]:
        requests = lab_workload(stream)
        return tuple(replay(requests, 2048, p).hit_rate for p in (RevivedLast(), RevivedLastWithoutDiscard()))

    with_discard, without = rates("zipf")
    assert with_discard == without
    with_discard, without = rates("rag")
    assert without < with_discard - 0.04


class ForgotTake(EvictionPolicy):
    """A usual mistake: pop_victim returns its choice without taking it out."""

    def pop_victim(self):
        victim = self.release_order()[0]
        return victim

    def order(self):
        return self.release_order()


def test_a_victim_not_taken_out_is_refused_with_the_fix():
    with pytest.raises(ValueError) as refused:
        check_policy(ForgotTake())
    message = str(refused.value)
    assert message.startswith("policy ForgotTake.pop_victim() returned page 1 but left it evictable")
    assert "did you call self.take_victim(1)?" in message
    assert "pop_victims" not in message


class Contrary(LRUEvictionPolicy):
    """order() says newest release first, pop_victim() still evicts the oldest."""

    def order(self):
        return self.release_order()[::-1]


class TakesTheRevived(EvictionPolicy):
    """Takes page 2, which check_policy's scratch run revived (ACTIVE), with take_victim."""

    def pop_victim(self):
        return self.take_victim(2 if 1 in self and 3 in self else self.release_order()[0])

    def order(self):
        return self.release_order()


def test_a_policy_whose_order_and_victim_disagree_is_refused_naming_both_pages():
    with pytest.raises(ValueError) as refused:
        check_policy(Contrary())
    assert str(refused.value).startswith(
        "policy Contrary: order() puts page 3 first, but pop_victim() evicted page 1."
    )
    for name in POLICIES:  # the lab's own policies agree with themselves
        check_policy(make_eviction_policy(name))


def test_a_victim_that_is_active_or_never_cached_is_explained():
    with pytest.raises(ValueError) as refused:
        check_policy(TakesTheRevived())
    message = str(refused.value)
    assert message.startswith("policy TakesTheRevived.pop_victim() returned page 2, which is not evictable")
    assert "page 2 is ACTIVE (a prefix hit revived it and a request holds it)" in message
    assert "Only CACHED pages can be evicted: here pages 1 and 3" in message
    with pytest.raises(ValueError, match=r"the scratch run never cached page 99"):
        check_policy(NotEvictable())


def test_the_mix_holds_both_streams_each_in_its_own_order():
    mix = mixed_traffic()
    chat, scan = multi_turn_chat(), scan_mix()
    assert [r for r in mix if r.req_id.startswith("chat")] == chat
    assert [r for r in mix if not r.req_id.startswith("chat")] == scan
    assert len(mix) == len(chat) + len(scan) and lab_workload("mix") == mix
    assert [r.req_id for r in mix[:40]] != [r.req_id for r in (chat + scan)[:40]]  # interleaved


def test_hit_rates_by_source_splits_the_replay_and_matches_each_stream_alone():
    """Oracle: chat and the scan share no prefix, so with a cache too big to evict, each
    source's rate in the mix is its own stream's rate replayed alone; at 2,048 tokens the
    groups' hits, weighted by their prompt tokens, add up to `replay`'s total."""
    from pagedkv.labs.hit_rate_lab import hit_rates_by, replay, source
    from pagedkv.labs.lab_workloads import lab_workload

    mix = lab_workload("mix")
    assert {source(r) for r in mix} == {"chat", "zipf", "scan"}
    unbounded = hit_rates_by(mix, 1 << 16)
    assert unbounded["chat"] == replay(lab_workload("chat"), 1 << 16).hit_rate
    assert unbounded["scan"] == 0.0  # one-off prompts never hit
    rates = hit_rates_by(mix, 2048)
    tokens = {g: sum(len(r.prompt_token_ids) for r in mix if source(r) == g) for g in rates}
    total = replay(mix, 2048)
    assert round(sum(rates[g] * tokens[g] for g in rates)) == total.hit_tokens
    halves = hit_rates_by(mix, 2048, key=lambda r: "all")
    assert halves == {"all": total.hit_rate}


class ForgetsTheRevived(RevivedLast):
    """RevivedLast with a learner's slip: order() lists only the pages no hit has revived, so
    a revived page released again is CACHED but never listed."""

    def order(self):
        return [p for p in self.release_order() if p not in self.revived]


def test_an_order_that_leaves_out_a_revived_page_is_refused_before_any_replay():
    with pytest.raises(ValueError) as refused:
        check_policy(ForgetsTheRevived())
    message = str(refused.value)
    assert message.startswith(
        "policy ForgetsTheRevived.order() must list every evictable page, revived ones too"
    )
    assert "got [1, 3]" in message
    check_policy(RevivedLast())  # the right version passes


def test_reuse_feedback_says_right_or_what_to_fix_in_two_numbered_steps():
    from pagedkv.labs.hit_rate_lab import reuse_feedback

    def said(policy):  # the feedback, its line breaks and indents read as spaces
        return " ".join(reuse_feedback(policy).split())

    right = "Your order [1, 3] puts it first, as it should"
    assert right in said(RevivedLast())
    assert right in said(LRUEvictionPolicy())
    wrong = reuse_feedback(RevivedLastWithoutDiscard())
    assert "Your order [3, 1] puts it last: page 1 kept the mark" in " ".join(wrong.split())
    assert "Forget the victim in pop_victim" in " ".join(wrong.split())
    lines = wrong.split("\n")
    assert lines[0] == "Third TODO check, on a scratch copy:" and lines[1].startswith("  1. ")
    assert any(line.startswith("  2. ") for line in lines) and max(map(len, lines)) <= 90


class LeavesOutRevived(RevivedLast):
    """order() forgets a page a hit revived and its request released again."""

    def order(self):
        return [p for p in self.release_order() if p not in self.revived]


def test_try_policy_prints_one_wrapped_refusal_and_returns_none(capsys):
    from pagedkv.labs.hit_rate_lab import reuse_feedback, try_policy

    assert try_policy(LeavesOutRevived(), width=60) is None
    printed = capsys.readouterr().out
    assert printed.startswith("refused: policy LeavesOutRevived.order() must list every")
    assert "Traceback" not in printed and all(len(line) <= 60 for line in printed.splitlines())
    words = " ".join(line.strip() for line in printed.splitlines())  # wrapped between words
    assert "pages 1, 2 and 3 in some order" in words and words.endswith("got [1, 3]")
    policy = LRUEvictionPolicy()
    assert try_policy(policy) is policy and capsys.readouterr().out == ""
    assert reuse_feedback(LeavesOutRevived()).startswith("refused: policy LeavesOutRevived")


def test_the_packaged_reference_answer_serves_what_this_files_policy_and_the_notebook_say():
    from pagedkv.labs.policy_check import RevivedLast as Packaged

    for w, said in (("zipf", 68.9), ("rag", 58.0), ("scan", 28.0), ("chat", 46.1)):
        stream = lab_workload(w)
        mine = replay(stream, 2048, RevivedLast()).hit_rate  # written in this file
        assert replay(stream, 2048, Packaged()).hit_rate == mine, w
        assert round(100 * mine, 1) == said, w  # notebook 10's answer block


class _PopsOldestRelease(RevivedLast):
    """A learner's `Mine` from a report: remove and order are right, but pop_victim takes
    the oldest release, not order()[0]."""

    def pop_victim(self):
        victim = self.release_order()[0]
        self.revived.discard(victim)
        return self.take_victim(victim)


def test_check_policy_refuses_a_pop_victim_that_ignores_order():
    from pagedkv.labs.policy_check import RevivedLast

    with pytest.raises(PolicyRejected) as caught:
        check_policy(_PopsOldestRelease())
    message = str(caught.value)
    assert "pop_victim must take order()[0]" in message
    assert "order() puts page 2 first, but pop_victim() evicted page 1" in message
    assert check_policy(RevivedLast()) is not None  # the reference still passes
    assert check_policy(LRUEvictionPolicy()) is not None


def test_likely_todo_names_the_first_step_still_missing():
    from pagedkv.labs.policy_check import likely_todo

    class AsWritten(EvictionPolicy):  # Mine as the notebook gives it: LRU
        def __init__(self):
            super().__init__()
            self.revived = set()

        def order(self):
            return self.release_order()

        def pop_victim(self):
            return self.take_victim(self.order()[0])

    class MarksOnly(AsWritten):  # the first TODO done, the order still LRU's
        def remove(self, page_id):
            super().remove(page_id)
            self.revived.add(page_id)

    assert "first TODO" in likely_todo(AsWritten())
    assert "second TODO" in likely_todo(MarksOnly())


def test_s3fifo_rules_5_and_6_act_in_notebook_10s_replays():
    """10b says rules 5 and 6 are not in its drain, only in notebook 10's replays: on chat at
    2,048 tokens some victim searches pass over an ACTIVE page at a queue's head (rule 6) and
    give an M page with a count above 0 a second chance (rule 5: its count drops, it stays in M)."""
    from pagedkv.labs.eviction_policies import S3FIFOEvictionPolicy

    seen = {"rule 5": 0, "rule 6": 0}

    class Watched(S3FIFOEvictionPolicy):
        def pop_victim(self):
            small, main, freq = self._small, self._main, self._freq  # noqa: SLF001 (read only)
            heads = [next(iter(q), None) for q in (small, main)]
            seen["rule 6"] += any(h is not None and h not in self for h in heads)
            counts = {p: freq[p] for p in main}
            victim = super().pop_victim()
            seen["rule 5"] += sum(p in main and freq[p] < n for p, n in counts.items())
            return victim

    replay(lab_workload("chat"), 2048, Watched())
    assert seen["rule 5"] > 0 and seen["rule 6"] > 0
