"""pin_coverage against lists built by hand, and check_policy's refusal as one short error."""

from __future__ import annotations

import traceback

import pytest

from pagedkv import LRUEvictionPolicy
from pagedkv.core.hashing import block_hashes
from pagedkv.labs.eviction_policies import ARCEvictionPolicy
from pagedkv.labs.hit_rate_lab import PolicyRejected, check_policy, most_reused_pages, replay
from pagedkv.labs.lab_workloads import LabRequest, lab_workload
from pagedkv.labs.pin_coverage import arc_tally_by, pin_coverage, pinned_or_others, prompt_of


def _stream() -> tuple[list[LabRequest], dict[str, list[int]]]:
    """Prompt "a" used 4 times, "b" 2 times, "c" once; each prompt 3 pages of 4 tokens."""
    prompts = {k: [100 * n + t for t in range(12)] for n, k in enumerate("abc", start=1)}
    uses = ["a", "b", "a", "c", "a", "b", "a"]
    requests = [LabRequest(f"zipf{i}-p{k}", prompts[k] + [900 + i, 901 + i], [7]) for i, k in enumerate(uses)]
    return requests, prompts


def test_pin_coverage_matches_a_pin_list_built_by_hand():
    requests, prompts = _stream()
    a, b, c = (block_hashes(prompts[k], 4) for k in "abc")
    pins = set(a) | {b[0], b[2]} | {c[1]}  # "a" whole, pages 1 and 3 of "b", page 2 of "c"
    cover = pin_coverage(requests, pins, prompt_tokens=12, page_size=4)
    assert cover.rank == ["a", "b", "c"]
    assert cover.whole == ["a"]
    assert cover.partly == {"b": [1, 3], "c": [2]}
    assert cover.whole_users == 4
    assert cover.place("c") == 3 and cover.pages_per_prompt == 3


def test_pin_coverage_on_the_zipf_stream_agrees_with_a_direct_count():
    zipf = lab_workload("zipf")
    pins = most_reused_pages(zipf, 32)
    cover = pin_coverage(zipf, pins)
    # independent count: a prompt is wholly pinned iff every one of its 6 page hashes is
    first_pages = {prompt_of(r): r.prompt_token_ids[:96] for r in zipf}
    whole = {k for k, toks in first_pages.items() if all(h in pins for h in block_hashes(toks, 16))}
    assert set(cover.whole) == whole
    assert cover.whole_users == sum(prompt_of(r) in whole for r in zipf)
    pinned_pages = 6 * len(cover.whole) + sum(len(p) for p in cover.partly.values())
    assert pinned_pages == len(pins)  # every pin is a system prompt's page


class _Sloppy(LRUEvictionPolicy):
    def pop_victim(self):
        return self.take_victim(2)  # page 2 is ACTIVE on the scratch run


def test_a_refusal_is_one_policy_rejected_raised_from_check_policy():
    with pytest.raises(PolicyRejected, match="returned page 2, which is not evictable") as refused:
        check_policy(_Sloppy())
    assert isinstance(refused.value, ValueError) and isinstance(refused.value, TypeError)
    assert refused.value.__cause__ is None and refused.value.__suppress_context__
    frames = traceback.extract_tb(refused.value.__traceback__)
    assert [f.name for f in frames][-1] == "check_policy"  # no inner check in the traceback
    assert "pop_victims" not in "".join(traceback.format_exception(refused.value))


def test_an_error_in_the_policy_itself_is_not_hidden():
    class Buggy(LRUEvictionPolicy):
        def order(self):
            raise KeyError("my own bug")

    with pytest.raises(KeyError, match="my own bug"):
        check_policy(Buggy())


def test_pinned_or_others_splits_by_a_hand_made_list():
    requests, _ = _stream()
    key = pinned_or_others(["a", "c"])
    assert [key(r) for r in requests] == [
        "pinned",
        "others",
        "pinned",
        "pinned",
        "pinned",
        "others",
        "pinned",
    ]


def test_arc_tally_counts_victims_and_revivals_by_list_as_traced_by_hand():
    # pages 1, 2, 3 enter T1; page 1 is revived from T1 (into T2), then from T2;
    # the victims are then 2 and 3 from T1 and 1 from T2
    arc = ARCEvictionPolicy()
    arc.attach(4, lambda page_id: page_id)
    arc.add_all([1, 2, 3])
    arc.remove(1)  # revived from T1
    arc.add(1)  # now in T2
    arc.remove(1)  # revived from T2
    arc.add(1)
    assert [arc.pop_victim() for _ in range(3)] == [2, 3, 1]
    assert arc.tally == {
        "revived from T1": 1,
        "revived from T2": 1,
        "evicted from T1": 2,
        "evicted from T2": 1,
    }


def test_arc_tally_by_adds_up_to_the_pages_the_replay_serves_from_the_cache():
    zipf = lab_workload("zipf")
    key = pinned_or_others(pin_coverage(zipf, most_reused_pages(zipf, 32)).whole)
    by_group, whole = arc_tally_by(zipf, 2048, key)
    revived = sum(n for counts in by_group.values() for n in counts.values())
    result = replay(zipf, 2048, "arc")
    assert revived * 16 == result.hit_tokens  # every hit is a full page revived
    assert whole["evicted from T1"] + whole["evicted from T2"] == result.evictions


def test_pin_budget_rates_with_no_pins_is_lru_and_a_quarter_is_the_lab_s_lru_pin():
    from pagedkv.labs.hit_rate_lab import make_policy, replay
    from pagedkv.labs.lab_workloads import lab_workload
    from pagedkv.labs.pin_coverage import pin_budget_rates

    scan = lab_workload("scan")
    rates = pin_budget_rates(scan, 2048, (0.0, 0.25))
    assert rates[0.0] == replay(scan, 2048, "lru").hit_rate
    assert rates[0.25] == replay(scan, 2048, make_policy("lru+pin", scan, 2048, 16)).hit_rate
