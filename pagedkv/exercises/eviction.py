"""Checker for the `eviction_policy` exercise: an LRU class with the EvictionPolicy interface.

Three stages, smallest first. (1) The class alone, op by op, next to the package's
`LRUEvictionPolicy`. (2) The class plugged into a real `KVCachePool` (through
`CacheConfig(eviction_policy=TheClass)`) on the pool's rule scenarios, next to the hash-free
`ReferencePool`. (3) A short seeded random run of add / append / fork / free on a tight pool,
next to the same reference, shortest failing run first. vLLM's equivalent of the class is
its `FreeKVCacheBlockQueue`; SGLang's radix cache evicts LRU leaves.

Leaves out: the bad-input behaviour of the interface (adding a page twice and so on); the
checks only ever make valid calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from pagedkv.core.config import CacheConfig
from pagedkv.core.eviction import EvictionPolicy, LRUEvictionPolicy
from pagedkv.core.pool import KVCachePool, OutOfPagesError
from pagedkv.core.sequence import SequenceManager
from pagedkv.exercises.guard import Delegated, Failure, call, describe_error, learner_code, refusal, show
from pagedkv.exercises.reference_pool import OutOfPages, ReferencePool

NAME = "eviction_policy"
REQUIRED = (
    "add",
    "add_all",
    "remove",
    "pop_victim",
    "pop_victims",
    "order",
    "release_order",
    "clear",
    "__contains__",
    "__len__",
)
RULE = (
    "a page joins the evictable set when its last holder releases "
    "it, leaves it when a prefix hit revives it, and the victim is the page released longest "
    "ago (least recently used); order() lists the next victim first"
)
SCENARIOS = [  # (rule shown, num_pages, page_size, steps)
    (
        "with no FREE page left, allocation evicts the least recently released CACHED page",
        6,
        2,
        [("add", "a", [1, 2, 3, 4]), ("add", "b", [5, 6, 7]), ("free", "a"), ("add", "c", [9] * 5)],
    ),
    (
        "a finished sequence's pages are released tail first, its last page is evicted first",
        3,
        2,
        [("add", "a", [1, 2, 3, 4, 5, 6]), ("free", "a"), ("add", "b", [7, 7, 7])],
    ),
    (
        "a prefix hit on a CACHED page makes it ACTIVE again: it is no longer evictable",
        4,
        2,
        [("add", "a", [1, 2, 3, 4]), ("free", "a"), ("add", "b", [1, 2, 3]), ("add", "c", [8, 8, 8])],
    ),
    (
        "one allocation may evict several pages, in eviction order",
        4,
        1,
        [("add", "a", [1, 2]), ("add", "b", [3, 4]), ("free", "a"), ("free", "b"), ("add", "c", [5, 6, 7])],
    ),
]


# The interface's own methods (a subclass of EvictionPolicy may keep add, remove, ...).
BASE_CODE = tuple(f for f in vars(EvictionPolicy).values() if callable(f))


def _invoke(policy: object, op: tuple, trace: list[str]) -> object:
    try:
        with learner_code(BASE_CODE):
            return getattr(policy, op[0])(*op[1:])
    except Delegated as delegated:
        raise refusal(NAME, str(delegated)) from None
    except Exception as error:  # noqa: BLE001 - the learner's method raised
        what = describe_error(error)
        raise Failure(f"✗ {NAME}: in {_call_text(op)}, {what}\n  calls:    {'; '.join(trace)}") from None


def _unit_traces() -> list[list[tuple]]:
    """Valid call sequences on page ids 0..5, generated next to the package's LRU."""
    rng, traces = np.random.default_rng(0), []
    for length in range(1, 9):
        for _ in range(12):
            oracle, trace = LRUEvictionPolicy(), []
            for _ in range(length):
                absent = [p for p in range(6) if p not in oracle]
                held = len(oracle) > 0  # the calls that may come next, in this order:
                may = {"add": absent, "add_all": len(absent) > 1, "remove": held, "pop_victim": held}
                kinds = [k for k, ok in {**may, "pop_victims": held, "clear": length > 4}.items() if ok]
                kind = kinds[rng.integers(len(kinds))]
                op: tuple
                if kind == "add":
                    op = ("add", int(rng.choice(absent)))
                elif kind == "add_all":
                    op = ("add_all", [int(p) for p in rng.permutation(absent)[:2]])
                elif kind == "remove":
                    op = ("remove", int(rng.choice(oracle.order())))
                elif kind == "pop_victims":
                    op = ("pop_victims", int(rng.integers(1, len(oracle) + 1)))
                else:
                    op = (kind,)
                getattr(oracle, op[0])(*op[1:])
                trace.append(op)
            traces.append(trace)
    return traces


def _call_text(op: tuple) -> str:
    return f"{op[0]}({', '.join(map(repr, op[1:]))})"


def _probe(cls: type, method: str) -> object:
    """`method` of a fresh instance after releases 3, 1 (together), then 2; None if it fails.
    LRU gives victim 3 and order [3, 1, 2]; MRU victim 2; page-id order victim 1."""
    try:
        with learner_code(BASE_CODE):
            probe = cls()
            probe.add_all([3, 1])
            probe.add(2)
            return list(probe.order()) if method == "order" else probe.pop_victim()
    except Exception:  # noqa: BLE001 - the call sequence shown already failed; no hint then
        return None


def _diagnose(cls: type) -> str:
    """Name the mistake from how a fresh instance treats three releases (3, 1, 2): which page
    pop_victim gives, and, only when that is right, how order() lists them."""
    victim = _probe(cls, "pop_victim")
    if victim == 2:
        return "your pop_victim evicts the most recently released page first (MRU), not the least"
    if victim == 1:
        return "your pop_victim takes the lowest page id: pages leave in release order, not in page-id order"
    order = _probe(cls, "order")
    if victim == 3 and order == [2, 1, 3]:
        return (
            "pop_victim is right but order() lists the pages last victim first: order() lists "
            "the next victim (what pop_victim would return) first"
        )
    if victim == 3 and order == [1, 2, 3]:
        return "order() lists pages in page-id order: it lists them in the order they will be evicted"
    return ""


def _unit_hint(cls: type, op: tuple, expected: dict, got: dict) -> str:
    returned = got.get("returned")
    if op[0] == "pop_victims" and isinstance(returned, (list, tuple)) and len(returned) != op[1]:
        return f"pop_victims({op[1]}) returned {len(returned)} page(s): it removes and returns exactly n"
    if got["len()"] > expected["len()"] and op[0] in ("pop_victim", "pop_victims", "remove"):
        return f"after {op[0]} the page is still in your set: {op[0]} must take it out"
    return _diagnose(cls)


def _view(policy: Any, returned: object) -> dict[str, Any]:
    view: dict[str, Any] = {"order()": list(policy.order()), "release_order()": list(policy.release_order())}
    view["len()"] = len(policy)
    view["in"] = [p for p in range(6) if p in policy]
    if returned is not None:
        view = {"returned": returned, **view}
    return view


def _check_alone(cls: type) -> int:
    traces = _unit_traces()
    for trace in traces:
        learner, oracle = call(NAME, cls, {}, BASE_CODE), LRUEvictionPolicy()
        done: list[str] = []
        for op in trace:
            done.append(_call_text(op))
            expected = _view(oracle, getattr(oracle, op[0])(*op[1:]))
            returned = _invoke(learner, op, done)
            try:
                with learner_code(BASE_CODE):
                    got = _view(learner, returned)
            except Delegated as delegated:
                raise refusal(NAME, str(delegated)) from None
            except Exception as error:  # noqa: BLE001
                raise Failure(f"✗ {NAME}: {describe_error(error)}\n  calls:    {'; '.join(done)}") from None
            if got != expected:
                keys = [k for k in expected if got.get(k) != expected[k]]
                raise Failure(
                    f"✗ {NAME}: wrong state after the smallest failing call sequence\n"
                    f"  calls:    {'; '.join(done)}\n"
                    f"  expected: {', '.join(f'{k} = {expected[k]!r}' for k in keys)}\n"
                    f"  got:      {', '.join(f'{k} = {got.get(k)!r}' for k in keys)}\n"
                    f"  rule:     {RULE}"
                    + (f"\n  hint:     {h}" if (h := _unit_hint(cls, op, expected, got)) else "")
                )
    return len(traces)


def _pool_view(seqs: SequenceManager) -> dict:
    return {
        "block tables": {s: seqs.block_table(s) for s in seqs.sequences},
        "eviction order": list(seqs.pool.eviction.order()),
    }


def _ref_view(ref: ReferencePool) -> dict:
    return {"block tables": dict(ref.tables), "eviction order": ref.eviction_order()}


def _step_text(step: tuple) -> str:
    return " ".join(str(x) for x in step)


def _on_pool(seqs: SequenceManager, step: tuple) -> None:
    kind = step[0]
    if kind == "add":
        seqs.add(step[1], step[2])
    elif kind == "append":
        seqs.append_slot(step[1], step[2])
    elif kind == "fork":
        seqs.fork(step[1], step[2])
    else:
        seqs.free(step[1])


def _on_reference(ref: ReferencePool, step: tuple) -> None:
    kind = step[0]
    if kind == "add":
        ref.add(step[1], step[2])
    elif kind == "append":
        ref.append(step[1], step[2])
    elif kind == "fork":
        ref.fork(step[1], step[2])
    else:
        ref.free_seq(step[1])


def _outcome(apply: Callable[[], None]) -> str:
    try:
        apply()
    except (OutOfPages, OutOfPagesError):
        return "out of pages"
    return "ok"


def _apply(seqs: SequenceManager, ref: ReferencePool, step: tuple) -> tuple[str, str]:
    """Apply one step to the reference, then the pool: ('ok' | 'out of pages') of each."""
    return _outcome(lambda: _on_reference(ref, step)), _outcome(lambda: _on_pool(seqs, step))


def _run(cls: type, num_pages: int, page_size: int, steps: list[tuple], title: str) -> None:
    config = CacheConfig.bookkeeping(num_pages, page_size, eviction_policy=cls)
    seqs, ref = SequenceManager(KVCachePool(config)), ReferencePool(num_pages, page_size, True, "lru")
    for i, step in enumerate(steps):
        done = "; ".join(_step_text(s) for s in steps[: i + 1])
        where = f"  pool:     {num_pages} pages of {page_size} slots ({title})\n  steps:    {done}\n"
        try:
            with learner_code(BASE_CODE):
                expected_outcome, got_outcome = _apply(seqs, ref, step)
                expected, got = _ref_view(ref), _pool_view(seqs)
        except Delegated as delegated:
            raise refusal(NAME, str(delegated)) from None
        except Exception as error:  # noqa: BLE001 - the pool broke on the learner's policy
            what = describe_error(error)
            raise Failure(
                f"✗ {NAME}: the pool could not work with your policy: {what}\n{where}  rule:     {RULE}"
            ) from None
        try:
            seqs.check_invariants()
        except AssertionError as error:
            raise Failure(
                f"✗ {NAME}: after the last step the pool no longer holds together ({error}): your set "
                f"and the pool's CACHED pages disagree\n{where}  rule:     {RULE}"
            ) from None
        expected["outcome"], got["outcome"] = expected_outcome, got_outcome
        if got != expected:
            hint = f"\n  hint:     {h}" if (h := _diagnose(cls)) else ""
            raise Failure(
                f"✗ {NAME}: in a real KVCachePool your policy gives a different result than LRU\n"
                f"  pool:     {num_pages} pages of {page_size} slots ({title})\n  steps:    {done}\n"
                f"  expected: {show(expected)}\n  got:      {show(got)}\n  rule:     {RULE}{hint}"
            )


def _random_steps(rng: np.random.Generator, length: int) -> list[tuple]:
    """Valid-looking steps (ids that exist) for a 5-page pool; out of pages is fine."""
    live: list[str] = []
    steps: list[tuple] = []
    next_id = 0
    for _ in range(length):
        kind = "add" if not live else ("add", "append", "append", "fork", "free")[rng.integers(5)]
        if kind in ("add", "fork"):
            next_id += 1
            new = f"s{next_id}"
        if kind == "add":
            steps.append(("add", new, rng.integers(0, 3, rng.integers(1, 7)).tolist()))
        elif kind == "fork":
            steps.append(("fork", live[rng.integers(len(live))], new))
        elif kind == "append":
            steps.append(("append", live[rng.integers(len(live))], int(rng.integers(0, 3))))
        else:
            steps.append(("free", live.pop(rng.integers(len(live)))))
        if kind in ("add", "fork"):
            live.append(new)  # an add that runs out of pages leaves no sequence: caught below
    return steps


def check_eviction_policy(cls: Callable) -> str:
    """cls: a class with the EvictionPolicy interface that evicts least recently released first."""
    if not isinstance(cls, type):
        raise Failure(f"✗ {NAME}: pass the class itself (check('{NAME}', MyLRU)), not {cls!r}")
    borrowed = [
        c.__name__ for c in cls.__mro__[1:] if c.__module__.startswith("pagedkv") and c is not EvictionPolicy
    ]
    if borrowed:
        raise refusal(NAME, borrowed[0])
    missing = [m for m in REQUIRED if not callable(getattr(cls, m, None))]
    if missing:
        raise Failure(f"✗ {NAME}: the class has no {', '.join(missing)}: the pool calls all of {REQUIRED}")
    num_traces = _check_alone(cls)
    for title, num_pages, page_size, steps in SCENARIOS:
        _run(cls, num_pages, page_size, steps, title)
    rng, runs = np.random.default_rng(1), 0
    for length in (4, 8, 16, 32):
        for _ in range(8):
            steps = _random_steps(rng, length)
            _run_valid(cls, steps)
            runs += 1
    return (
        f"✓ {NAME}: {num_traces} call sequences evict least recently released first; in a real pool "
        f"the {len(SCENARIOS)} rule scenarios and {runs} random runs agree with LRU."
    )


def _run_valid(cls: type, steps: list[tuple]) -> None:
    """Drop the steps on sequences that never got admitted (the reference decides), then run."""
    ref, kept = ReferencePool(5, 2, True, "lru"), []
    for step in steps:
        if step[0] != "add" and step[1] not in ref.tables:
            continue
        try:
            _on_reference(ref, step)
        except OutOfPages:
            pass
        kept.append(step)
    _run(cls, 5, 2, kept, "random run")
