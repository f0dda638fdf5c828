"""The slots a contiguous policy reserves per request, against hand-computed sizes and a
power of two found by doubling (not by bit tricks)."""

import pytest

from pagedkv.engine.request import Request
from pagedkv.labs.reservations import buddy_block, reserved_slots
from pagedkv.labs.workloads import generate


def _req(prompt: int, output: int) -> Request:
    # `output` tokens that hold K/V: the last sampled token never gets a slot, so one more
    return Request("r", list(range(prompt)), output + 1)


def _doubling(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


@pytest.mark.parametrize(
    ("prompt", "output", "oracle", "pow2", "paper_pow2", "block"),
    [
        # notebook 06's first three requests, worked by hand
        (115, 190, 305, 512, 115 + 256, 512),
        (88, 267, 355, 512, 88 + 512, 1024),
        (192, 115, 307, 512, 192 + 128, 512),
        (1, 1, 2, 2, 1 + 1, 2),
        (1040, 1000, 2040, 2048, 2048, 2048),  # 1,040 + 1,024 = 2,064, capped at 2,048
    ],
)
def test_hand_computed(prompt, output, oracle, pow2, paper_pow2, block):
    r = _req(prompt, output)
    assert reserved_slots("oracle", r) == oracle
    assert reserved_slots("pow2", r) == pow2
    assert reserved_slots("pow2", r, "output") == paper_pow2
    assert reserved_slots("max", r) == 2048
    assert buddy_block(paper_pow2) == block


def test_against_doubling_on_generated_requests():
    for r in generate("sharegpt", 60):
        final, prompt = r.final_len, r.prompt_len
        assert reserved_slots("oracle", r) == final
        assert reserved_slots("pow2", r) == min(_doubling(final), 2048)
        assert reserved_slots("pow2", r, "output") == min(prompt + _doubling(final - prompt), 2048)
        for slots in (final, final + 1):
            assert buddy_block(slots) == _doubling(slots)
