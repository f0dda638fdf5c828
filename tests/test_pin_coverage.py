"""pin_coverage against lists built by hand, and check_policy's refusal as one short error."""

from __future__ import annotations

import traceback

import pytest

from pagedkv import LRUEvictionPolicy
from pagedkv.core.hashing import block_hashes
from pagedkv.labs.hit_rate_lab import PolicyRejected, check_policy, most_reused_pages
from pagedkv.labs.lab_workloads import LabRequest, lab_workload
from pagedkv.labs.pin_coverage import pin_coverage, prompt_of


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
