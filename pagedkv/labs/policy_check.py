"""check_policy: try an `EvictionPolicy` on a scratch copy before a pool uses it.

A policy that answers with the wrong type, evicts a page that is not evictable, or evicts a
page its own order() does not list first is refused with a `PolicyRejected` error whose
message says what it did and what to fix. The error is raised from `check_policy` itself,
so a notebook shows one short traceback, not the checks' inner calls.
"""

from __future__ import annotations

import copy
import textwrap

from pagedkv.core.eviction import EvictionPolicy, NotEvictableError

SECTION_4 = '10b, section 4, "Refused policies, newest first, and one way to write Mine"'  # its heading


class PolicyRejected(ValueError, TypeError):
    """check_policy refused a policy; the message is the whole story: what the policy did on
    the scratch run and what to fix. A ValueError and a TypeError, as the checks raised."""


def check_policy(policy: object) -> EvictionPolicy:
    """`policy` if it behaves as an `EvictionPolicy` on a scratch copy, else `PolicyRejected`
    naming what it did. Checked: order() and pop_victim() answer with page ids (ints) that
    are evictable, pop_victim() takes its victim out (with take_victim) and evicts the page
    order() lists first, pop_victims(n) gives a list of n of them, and a page revived by a
    hit and released again is listed and evicted like any other."""
    __tracebackhide__ = True  # noqa: F841  (pytest hides this frame)
    try:
        return _check(policy)
    except PolicyRejected as error:  # raised again here: the traceback stops at this call
        refusal = PolicyRejected(str(error))
    raise refusal from None


def try_policy(policy: object, width: int = 88) -> EvictionPolicy | None:
    """`check_policy(policy)` for a notebook cell: the policy if it passes, else None after
    printing one short refusal, "refused: <what it did and what to fix>", wrapped at `width`
    columns between words, with no traceback. Example: a policy whose order() leaves out a
    revived page -> prints "refused: policy Mine.order() must list every evictable page..."."""
    try:
        return check_policy(policy)
    except PolicyRejected as error:
        print(textwrap.fill(f"refused: {error}", width, subsequent_indent="  "))
        return None


def _check(policy: object) -> EvictionPolicy:
    """`policy` if it behaves as an `EvictionPolicy` on a scratch copy, else PolicyRejected
    naming what it did. Checked: order() and pop_victim() answer with page ids
    (ints) that are evictable, pop_victim() takes its victim out (with take_victim) and
    evicts the page order() lists first, pop_victims(n) gives a list of n of them, and a
    page revived by a hit and released again is listed and evicted like any other."""
    if not isinstance(policy, EvictionPolicy):
        raise PolicyRejected(
            f"policy must be a policy name or an EvictionPolicy, got {type(policy).__name__}"
        )
    probe = copy.deepcopy(policy)
    probe.clear()
    probe.attach(4, lambda page_id: ("block", page_id))
    probe.add_all([1, 2])  # pages 1, 2, 3 turn CACHED; a prefix hit revives page 2
    probe.add(3)
    probe.remove(2)
    name = type(policy).__name__
    order = probe.order()
    if not isinstance(order, list) or sorted(order) != [1, 3]:
        raise PolicyRejected(f"policy {name}.order() must list the evictable pages [1, 3], got {order!r}")
    victim = _first_victim(probe, name)
    if victim != order[0]:
        raise PolicyRejected(
            f"policy {name}: order() puts page {order[0]} first, but pop_victim() evicted page "
            f"{victim}. order() must list first the page pop_victim() takes next"
        )
    other = ({1, 3} - {victim}).pop()
    rest = probe.pop_victims(1)
    if rest != [other]:
        what = (
            "pop_victims(1)" if type(probe).pop_victims is not EvictionPolicy.pop_victims else "pop_victim()"
        )
        raise PolicyRejected(
            f"policy {name}.{what}, asked for a second victim, must give page {other}, got {rest!r}"
        )
    _check_revived_listed(policy, name)
    _check_revived_released_first(policy, name)
    return policy


def _check_revived_released_first(policy: EvictionPolicy, name: str) -> None:
    """check_policy's third scratch run: page 1 is revived by a prefix hit and released
    before pages 2 and 3 are cached, so release order (1, 2, 3) and an order() that keeps
    revived pages may disagree; pop_victim() must still evict the page order() lists first.
    Catches a pop_victim() that takes self.release_order()[0] instead of order()[0]."""
    probe = copy.deepcopy(policy)
    probe.clear()
    probe.attach(4, lambda page_id: ("block", page_id))
    probe.add(1)
    probe.remove(1)  # a prefix hit revives page 1 ...
    probe.add(1)  # ... and its request releases it, before pages 2 and 3 are cached
    probe.add_all([2, 3])
    first = probe.order()[0]
    victim = probe.pop_victim()
    if victim != first:
        raise PolicyRejected(
            f"policy {name}: with page 1 revived and released before pages 2 and 3 were "
            f"cached, order() puts page {first} first, but pop_victim() evicted page {victim}. "
            "pop_victim must take order()[0], not self.release_order()[0]"
        )


def likely_todo(policy: EvictionPolicy) -> str:
    """For a policy whose hit rates equal LRU's: the step it most likely still misses, found on
    a scratch copy (page 1 revived and released, then page 2 cached). Example: `Mine` as
    written -> "the first TODO: in remove, add page_id to self.revived"."""
    probe = copy.deepcopy(policy)
    probe.clear()
    probe.attach(4, lambda page_id: ("block", page_id))
    probe.add(1)
    probe.remove(1)
    marks = getattr(probe, "revived", None)
    if isinstance(marks, set) and 1 not in marks:
        return "the first TODO: in remove, add page_id to self.revived"
    probe.add(1)
    probe.add(2)
    if probe.order()[:1] != [2]:
        return "the second TODO: in order, list the pages not in self.revived first"
    return "pop_victim must take order()[0]"


def _check_revived_listed(policy: EvictionPolicy, name: str) -> None:
    """check_policy's second scratch run: page 2 is revived by a prefix hit, then released
    again, so pages 1, 2 and 3 are all CACHED; order() must list all three (a revived page
    is evictable again once released) and pop_victims(3) must evict all three."""
    probe = copy.deepcopy(policy)
    probe.clear()
    probe.attach(4, lambda page_id: ("block", page_id))
    probe.add_all([1, 2, 3])
    probe.remove(2)  # a prefix hit revives page 2 ...
    probe.add(2)  # ... and its request releases it: CACHED again
    order = probe.order()
    if not isinstance(order, list) or sorted(order) != [1, 2, 3]:
        raise PolicyRejected(
            f"policy {name}.order() must list every evictable page, revived ones too: pages 1, "
            f"2 and 3 in some order (page 2 was revived by a prefix hit, then released again), "
            f"got {order!r}"
        )
    victims = probe.pop_victims(3)
    if sorted(victims) != [1, 2, 3]:
        raise PolicyRejected(
            f"policy {name}.pop_victims(3), with pages 1, 2 and 3 evictable, must evict all "
            f"three, got {victims!r}"
        )


def _not_evictable(name: str, victim: object) -> PolicyRejected:
    """The error for a pop_victim() on check_policy's scratch run that chose `victim`, not
    one of the CACHED pages 1 and 3."""
    if victim == 2:
        why = "page 2 is ACTIVE (a prefix hit revived it and a request holds it)"
    else:
        why = f"the scratch run never cached page {victim} (it uses pages 1, 2 and 3)"
    return PolicyRejected(
        f"policy {name}.pop_victim() returned page {victim}, which is not evictable: {why}. "
        "Only CACHED pages can be evicted: here pages 1 and 3, the ones self.release_order() lists"
    )


def _first_victim(probe: EvictionPolicy, name: str) -> int:
    """probe.pop_victim() on check_policy's scratch run (CACHED: 1 and 3; ACTIVE: 2), refused
    with what it did if the answer is not an int page id, not evictable, or not taken out."""
    try:
        victim = probe.pop_victim()
    except NotEvictableError as error:  # take_victim(page) on a page that is not CACHED
        raise _not_evictable(name, error.page_id) from None
    if isinstance(victim, bool) or not isinstance(victim, int):
        raise PolicyRejected(f"policy {name}.pop_victim() must return an int page id, got {victim!r}")
    if victim not in (1, 3):
        raise _not_evictable(name, victim)
    if victim in probe:
        raise PolicyRejected(
            f"policy {name}.pop_victim() returned page {victim} but left it evictable: "
            f"did you call self.take_victim({victim})? End pop_victim with "
            "`return self.take_victim(page_id)`"
        )
    return victim


def reuse_probe(policy: EvictionPolicy) -> tuple[list[int], list[int]]:
    """A page id evicted and cached again holds new content, so a policy must not carry its
    old marks over. On `policy` (a new one, outside any pool): page 1 is revived by a hit and
    released again, both pages are evicted, then pages 1 and 3 are cached anew. Returns (the
    two victims, the order after). Example: LRU -> ([2, 1], [1, 3]); a policy that keeps
    page 1 marked as revived after evicting it -> ([2, 1], [3, 1])."""
    check_policy(policy)
    policy.add_all([1, 2])
    policy.remove(1)  # a prefix hit revives page 1 ...
    policy.add(1)  # ... and its request releases it again
    evicted = [policy.pop_victim(), policy.pop_victim()]
    policy.add_all([1, 3])  # page 1 holds new content now, cached before page 3's
    return evicted, policy.order()


def reuse_feedback(policy: EvictionPolicy) -> str:
    """`reuse_probe` on `policy`, said as a heading and two numbered steps, each wrapped at
    90 characters: what it evicted, the order after, and whether page 1's new content goes
    first, as no hit has revived it; "refused: <why>" if check_policy refuses the policy.
    Example: LRU -> "Third TODO check, on a scratch copy: ... 2. ... your order [1, 3] puts
    it first, as it should: ..."."""
    try:
        evicted, after = reuse_probe(policy)
    except PolicyRejected as error:  # check_policy refused it: say so instead of a traceback
        return textwrap.fill(f"refused: {error}", 90, subsequent_indent="  ")
    if evicted != [2, 1]:
        return textwrap.fill(
            f"Third TODO check: your policy evicted {evicted}, but the victims must be 2, then 1:"
            " a hit revived page 1, never page 2.",
            90,
            subsequent_indent="  ",
        )
    step2 = (
        "2. Pages 1 and 3 then take new content (page 1 released first). Neither was"
        f" revived, so page 1 should go first. Your order {after}"
    )
    if after != [1, 3]:
        step2 += (
            " puts it last: page 1 kept the mark of its evicted content. Forget the"
            f' victim in pop_victim. {SECTION_4}, under "The third step", tells this case.'
        )
    else:
        step2 += " puts it first, as it should."
    steps = ("1. Pages 1 and 2 are cached, a hit revives page 1; the victims are 2, then 1.", step2)
    lines = [textwrap.fill(t, 90, initial_indent="  ", subsequent_indent="     ") for t in steps]
    return "\n".join(["Third TODO check, on a scratch copy:", *lines])


class RevivedLast(EvictionPolicy):
    """Notebook 10's reference answer to `Mine`: evict the page released longest ago among
    those no prefix hit has revived since they were cached, else the oldest of all; an
    evicted page forgets its mark. Example: pages 1, 2, 3 cached, page 1 revived and released
    again -> order() [2, 3, 1]."""

    def __init__(self) -> None:
        super().__init__()
        self.revived: set[int] = set()

    def remove(self, page_id: int) -> None:
        super().remove(page_id)
        self.revived.add(page_id)

    def order(self) -> list[int]:
        pages = self.release_order()
        fresh = [p for p in pages if p not in self.revived]
        return fresh + [p for p in pages if p in self.revived]

    def pop_victim(self) -> int:
        victim = self.order()[0]
        self.revived.discard(victim)
        return self.take_victim(victim)
