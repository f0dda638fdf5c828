"""ContiguousKVCache against a slot-by-slot oracle: an arena as a plain list of owners.

The oracle finds the first run of free slots by scanning slot by slot and classifies every
slot by looking at it alone, so it shares no code path with the allocator's hole list.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pagedkv.core.sequence import UnknownSequenceError
from pagedkv.labs.contiguous import ContiguousKVCache, NoContiguousHoleError

from .hypothesis_profiles import examples


class ArenaOracle:
    def __init__(self, num_slots: int, size_of) -> None:
        self.owner: list[object] = [None] * num_slots
        self.size_of = size_of  # final_len -> reservation length
        self.req: dict[object, list[int]] = {}  # id -> [used, final_len]

    def first_fit(self, length: int) -> int | None:
        run = 0
        for i, o in enumerate(self.owner):
            run = run + 1 if o is None else 0
            if run == length:
                return i - length + 1
        return None

    def add(self, rid, prompt_len, final_len):
        length = self.size_of(final_len)
        start = self.first_fit(length)
        if start is None:
            return None
        self.owner[start : start + length] = [rid] * length
        self.req[rid] = [prompt_len, final_len]
        return start

    def free(self, rid):
        self.owner = [None if o == rid else o for o in self.owner]
        del self.req[rid]

    def categories(self, need: int) -> dict[str, int]:
        cats = dict(token_states=0, reserved=0, internal_fragmentation=0, external_fragmentation=0, free=0)
        seen: dict[object, int] = {}
        run = 0
        for o in [*self.owner, "end"]:
            if o is None:
                run += 1
                continue
            key = "free" if run >= need else "external_fragmentation"
            cats[key] += run
            run = 0
            if o == "end":
                break
            k = seen[o] = seen.get(o, 0) + 1  # k-th slot of o's range
            used, final_len = self.req[o]
            if k <= used:
                cats["token_states"] += 1
            else:
                cats["reserved" if k <= final_len else "internal_fragmentation"] += 1
        return cats


def sizes(policy: str, max_len: int):
    return {
        "max": lambda f: max_len,
        "pow2": lambda f: min(1 << (f - 1).bit_length(), max_len),
        "oracle": lambda f: f,
    }[policy]


@pytest.mark.parametrize(
    ("policy", "final_len", "expected"),
    [
        ("max", 5, 64),
        ("pow2", 1, 1),
        ("pow2", 5, 8),
        ("pow2", 8, 8),
        ("pow2", 33, 64),
        ("pow2", 50, 64),
        ("oracle", 37, 37),
    ],
)
def test_reservation_size(policy, final_len, expected):
    assert ContiguousKVCache(1024, policy, 64).reservation_size(final_len) == expected


def test_pow2_is_capped_at_max_seq_len():
    assert ContiguousKVCache(1024, "pow2", 100).reservation_size(70) == 100


ops = st.lists(
    st.tuples(
        st.sampled_from(["add", "add", "append", "append_all", "free"]),
        st.integers(1, 40),
        st.integers(0, 40),
        st.integers(0, 10),
    ),
    max_size=60,
)


def append_all(arena: ContiguousKVCache, oracle: ArenaOracle) -> None:
    """A token for every request, or for none if one of them is full."""
    if all(used < final for used, final in oracle.req.values()):
        arena.append_all()
        for entry in oracle.req.values():
            entry[0] += 1
    else:
        before = arena.accounting()
        with pytest.raises(ValueError, match="already holds its final_len"):
            arena.append_all()
        assert arena.accounting() == before


@pytest.mark.parametrize("policy", ["max", "pow2", "oracle"])
@settings(max_examples=examples(60), deadline=None)
@given(ops=ops)
def test_matches_slot_oracle(policy, ops):
    arena = ContiguousKVCache(160, policy, 40)
    oracle = ArenaOracle(160, sizes(policy, 40))
    next_id = 0
    for op, final_len, prompt_cut, pick in ops:
        live = list(oracle.req)
        if op == "add":
            prompt_len = max(1, final_len - prompt_cut)
            rid, next_id = f"r{next_id}", next_id + 1
            expected = oracle.add(rid, prompt_len, final_len)
            if expected is None:
                before = arena.accounting()
                with pytest.raises(NoContiguousHoleError, match="contiguous slots"):
                    arena.add(rid, prompt_len, final_len)
                assert arena.accounting() == before and rid not in arena
            else:
                assert arena.add(rid, prompt_len, final_len) == expected
        elif live and op == "append":
            rid = live[pick % len(live)]
            used, final = oracle.req[rid]
            if used < final:
                start = next(i for i, o in enumerate(oracle.owner) if o == rid)
                assert arena.append(rid) == start + used
                oracle.req[rid][0] += 1
            else:
                with pytest.raises(ValueError, match="final_len"):
                    arena.append(rid)
        elif op == "append_all":
            append_all(arena, oracle)
        elif live and op == "free":
            rid = live[pick % len(live)]
            arena.free(rid)
            oracle.free(rid)
        for nxt in (None, 1, 17, 40):
            acc = arena.accounting(nxt)
            assert arena.shares(40 if nxt is None else nxt) == acc.as_dict()
            need = sizes(policy, 40)(40 if nxt is None else nxt)
            got = acc.as_dict()
            assert got.pop("num_slots") == 160
            assert got == oracle.categories(need)
            assert sum(got.values()) == 160
        layout = [(r.req_id, r.start, r.length, r.used) for r in arena.accounting().reservations]
        assert [r[1] for r in layout] == sorted(r[1] for r in layout)
        for rid, start, length, used in layout:
            assert oracle.owner[start : start + length] == [rid] * length
            assert used == oracle.req[rid][0]


def test_external_fragmentation_example():
    # Three max-size reservations, the middle one freed: its hole is exactly one
    # reservation, so it is free for the next request; shrink the arena by one slot
    # and the trailing hole is too small: external fragmentation.
    arena = ContiguousKVCache(31, "max", 10)
    for rid in ("a", "b", "c"):
        arena.add(rid, 3, 6)
    arena.free("b")
    acc = arena.accounting()
    assert (acc.token_states, acc.reserved, acc.internal_fragmentation) == (6, 6, 8)
    assert (acc.free, acc.external_fragmentation) == (10, 1)
    assert arena.holes() == [(10, 10), (30, 1)]
    assert arena.add("d", 1, 2) == 10  # first fit reuses the freed hole


def test_full_arena_refuses_and_changes_nothing():
    arena = ContiguousKVCache(20, "oracle", 20)
    arena.add("a", 5, 12)
    before = arena.accounting()
    with pytest.raises(NoContiguousHoleError, match=r"needs 9 contiguous.*largest hole has 8"):
        arena.add("b", 2, 9)
    assert arena.accounting() == before


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((0, "max", 1), ValueError, "num_slots must be in"),
        ((10, "max", 11), ValueError, r"max_seq_len must be in \[1, 10\], got 11"),
        ((10, "fifo", 4), ValueError, "policy must be one of"),
        ((10.0, "max", 4), TypeError, "num_slots must be an int"),
        ((10, 3, 4), TypeError, "policy must be one of"),
    ],
)
def test_constructor_validates(args, error, match):
    with pytest.raises(error, match=match):
        ContiguousKVCache(*args)


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        (("x", 0, 5), ValueError, r"prompt_len must be in \[1, 5\], got 0"),
        (("x", 6, 5), ValueError, r"prompt_len must be in \[1, 5\], got 6"),
        (("x", 1, 65), ValueError, r"final_len must be in \[1, 64\], got 65"),
        (("a", 1, 5), ValueError, "req_id 'a' is already holding a reservation"),
        ((1.5, 1, 5), TypeError, "req_id must be a str or int"),
    ],
)
def test_add_validates_and_changes_nothing(args, error, match):
    arena = ContiguousKVCache(256, "pow2", 64)
    arena.add("a", 2, 3)
    before = arena.accounting()
    with pytest.raises(error, match=match):
        arena.add(*args)
    assert arena.accounting() == before


def test_unknown_request():
    arena = ContiguousKVCache(64, "max", 8)
    with pytest.raises(UnknownSequenceError, match="req_id 'nope' is not a request holding a reservation"):
        arena.free("nope")
    with pytest.raises(KeyError):
        arena.append("nope")


# ---- the paper's Orca baselines: buddy allocation, pow2 of the output ----------------------


def _top_level_blocks(num_slots: int) -> list[tuple[int, int]]:
    """The arena's binary decomposition, largest block first: where aligned blocks may lie."""
    out, start = [], 0
    for bit in reversed(range(num_slots.bit_length())):
        if num_slots >> bit & 1:
            out.append((start, 1 << bit))
            start += 1 << bit
    return out


def _aligned_free_run_exists(owner: list[object], size: int, num_slots: int) -> bool:
    """Slot by slot: is there a free range of `size` slots at a multiple of `size`, inside one
    block of the decomposition? (What a buddy system with full merging can always serve.)"""
    for top, length in _top_level_blocks(num_slots):
        for a in range(top, top + length - size + 1, size):
            if all(o is None for o in owner[a : a + size]):
                return True
    return False


@pytest.mark.parametrize("num_slots", [160, 100])  # 128 + 32; 64 + 32 + 4
@settings(max_examples=40, deadline=None)
@given(ops=ops)
def test_buddy_allocator_against_slot_oracle(num_slots, ops):
    arena = ContiguousKVCache(num_slots, "oracle", 40, allocator="buddy")
    owner: list[object] = [None] * num_slots
    live: dict[str, int] = {}  # req id -> block size
    for i, (op, final_len, prompt_cut, pick) in enumerate(ops):
        if op != "free" or not live:
            size = 1 << (final_len - 1).bit_length()
            fits = _aligned_free_run_exists(owner, size, num_slots)
            try:
                start = arena.add(f"r{i}", max(1, final_len - prompt_cut), final_len)
            except NoContiguousHoleError:
                assert not fits
                continue
            assert fits and start % size == 0
            assert all(o is None for o in owner[start : start + size])
            owner[start : start + size] = [f"r{i}"] * size
            live[f"r{i}"] = size
        else:
            rid = sorted(live)[pick % len(live)]
            arena.free(rid)
            owner = [None if o == rid else o for o in owner]
            del live[rid]
        acc = arena.accounting(17)
        finals = sum(r.final_len for r in acc.reservations)
        assert acc.internal_fragmentation == 0  # oracle asks for exactly the final length
        # the buddy rounding (block - final length) is the allocator's: with the unusable holes
        assert acc.free + acc.external_fragmentation == owner.count(None) + sum(live.values()) - finals
    for rid in list(live):
        arena.free(rid)
    merged = sum(length for _, length in _top_level_blocks(num_slots) if length >= 64)
    assert arena.accounting().free == merged  # everything merged back (max_seq_len 40 needs 64)


def test_buddy_example_splits_and_merges():
    arena = ContiguousKVCache(48, "oracle", 16, allocator="buddy")  # blocks 32 @ 0, 16 @ 32
    assert arena.add("a", 2, 5) == 32  # 8 slots: the 16-block splits, never the 32
    assert arena.add("b", 1, 3) == 40  # 4 slots from the other half
    acc = arena.accounting(9)  # next needs 16 slots: only the 32-block can hold it
    # external: the free 4-block plus the rounding of a (5 -> 8) and b (3 -> 4)
    assert (acc.free, acc.external_fragmentation, acc.internal_fragmentation) == (32, 4 + 3 + 1, 0)
    arena.free("a")
    arena.free("b")
    assert arena.add("c", 1, 16) == 32  # 8 + 4 + 4 merged back into one 16-block


@pytest.mark.parametrize(
    ("prompt_len", "final_len", "expected"),
    [(10, 35, 10 + 32), (10, 11, 11), (10, 42, 10 + 32), (60, 64, 64), (30, 64, 64)],
)
def test_pow2_of_the_output_over_reserves_the_output_at_most_twice(prompt_len, final_len, expected):
    # The paper's Orca (Pow2): an output of 25 tokens reserves 32 (Sec. 6.1); capped at max_seq_len.
    arena = ContiguousKVCache(1024, "pow2", 64, pow2_of="output")
    assert arena.reservation_size(final_len, prompt_len) == expected
    assert expected - prompt_len < 2 * (final_len - prompt_len) or expected == 64


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"allocator": "best_fit"}, "allocator must be one of"),
        ({"pow2_of": "prompt"}, "pow2_of must be one of"),
    ],
)
def test_allocator_and_pow2_choices_are_validated(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ContiguousKVCache(64, "pow2", 8, **kwargs)


def test_free_blocks_are_the_buddy_blocks_not_the_merged_holes():
    # 2,048 slots: 600 -> [0, 1024), 300 -> [1024, 1536), 100 -> [1536, 1664); B freed.
    # By hand: B's 512 cannot merge (its buddy [1536, 2048) is split); C's split left the
    # blocks [1664, 1792) and [1792, 2048), next to each other but not buddies.
    arena = ContiguousKVCache(2048, "oracle", allocator="buddy")
    for req, final_len in (("A", 600), ("B", 300), ("C", 100)):
        arena.add(req, final_len // 2, final_len)
    arena.free("B")
    assert arena.free_blocks() == [(1024, 512), (1664, 128), (1792, 256)]
    assert arena.holes() == [(1024, 512), (1664, 384)]
    with pytest.raises(NoContiguousHoleError):
        arena.add("D", 350, 700)  # needs a block of 1,024: 896 slots free, none that large
    shares = arena.accounting(700, 350).as_dict()
    assert shares["external_fragmentation"] == 896 + (1024 - 600) + (128 - 100)
    first_fit = ContiguousKVCache(2048, "oracle")
    first_fit.add("A", 300, 600)
    assert first_fit.free_blocks() == first_fit.holes() == [(600, 1448)]
