"""pagedkv.exercises: every reference solution passes, every known mistake fails with feedback
that points at it, and broken code (raises, wrong type, mutates, loops) gets a plain message."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from pagedkv import EvictionPolicy
from pagedkv.exercises import EXERCISES, check

from .exercise_answers import SOLUTIONS, WRONG

CASES = [(name, i) for name, answers in WRONG.items() for i in range(len(answers))]


def test_the_seven_exercises_have_fixed_ids():
    assert list(EXERCISES) == [
        "slot_mapping",
        "pages_needed",
        "block_hashes",
        "eviction_policy",
        "copy_on_write",
        "paged_attention",
        "preemption",
    ]
    assert set(SOLUTIONS) == set(WRONG) == set(EXERCISES)


REFERENCE_NAMES = (
    "pagedkv.",
    "SequenceManager",
    "LRUEvictionPolicy",
    "dense_attention",
    "Scheduler",
    "append_slot",
)


@pytest.mark.parametrize("name", list(EXERCISES))
def test_the_reference_solution_passes(name, capsys):
    assert check(name, SOLUTIONS[name]) is True
    out = capsys.readouterr().out
    assert out.startswith(f"✓ {name}:") and "Traceback" not in out
    assert [ref for ref in REFERENCE_NAMES if ref in out] == [], out  # the ✓ never names the reference


@pytest.mark.parametrize("name", [n for n in EXERCISES if n != "eviction_policy"])  # that one is a class
def test_the_learner_may_name_the_parameters_as_they_like(name, capsys):
    solution = SOLUTIONS[name]
    renamed = lambda *args: solution(*args)  # noqa: E731 - no parameter names at all
    assert check(name, renamed) is True, capsys.readouterr().out


def test_pages_needed_with_other_names_and_a_divmod(capsys):
    def pages_needed(n, size):
        full, rest = divmod(n, size)
        return full + (rest > 0)

    assert check("pages_needed", pages_needed) is True, capsys.readouterr().out


def test_attention_written_differently_passes(capsys):
    def online_softmax(q, kc, vc, table, n):  # one position at a time, running max and sum
        size, kv_heads, dim = kc.shape[1:]
        group = len(q) // kv_heads
        best, total, acc = np.full(len(q), -np.inf), np.zeros(len(q)), np.zeros(q.shape)
        for i in range(n):
            k, v = kc[table[i // size], i % size], vc[table[i // size], i % size]
            s = np.array([q[h] @ k[h // group] for h in range(len(q))]) / np.sqrt(dim)
            new = np.maximum(best, s)
            total = total * np.exp(best - new) + np.exp(s - new)
            acc = acc * np.exp(best - new)[:, None] + np.exp(s - new)[:, None] * v[np.arange(len(q)) // group]
            best = new
        return acc / total[:, None]

    assert check("paged_attention", online_softmax) is True, capsys.readouterr().out


@pytest.mark.parametrize("name", list(EXERCISES))
def test_at_least_three_mistakes_per_exercise(name):
    assert len(WRONG[name]) >= 3


@pytest.mark.parametrize(("name", "index"), CASES)
def test_a_mistake_fails_with_feedback_pointing_at_it(name, index, capsys):
    answer, phrase = WRONG[name][index]
    assert check(name, answer) is False
    out = capsys.readouterr().out
    assert out.startswith(f"✗ {name}:"), out
    assert phrase in out, out
    assert "Traceback" not in out and "pagedkv/" not in out, out
    assert "docs/" not in out and "rule 1" not in out, out  # the rule's text, not its number
    if "wrong answer" in out or "wrong state" in out:
        assert "expected:" in out and "got:" in out and "rule:" in out, out


def test_feedback_shows_the_smallest_failing_case(capsys):
    check("pages_needed", lambda num_tokens, page_size: num_tokens)
    out = capsys.readouterr().out
    assert "num_tokens=2, page_size=2" in out and "expected: 1" in out and "got:      2" in out


def test_code_that_is_not_written_yet_names_the_method(capsys):
    def slot_mapping(block_table, positions, page_size):
        raise NotImplementedError()

    assert check("slot_mapping", slot_mapping) is False
    assert "`slot_mapping` is not written yet" in capsys.readouterr().out

    class LRUPolicy(SOLUTIONS["eviction_policy"]):
        def pop_victims(self, n):
            raise NotImplementedError()

    assert check("eviction_policy", LRUPolicy) is False
    assert "`pop_victims` is not written yet" in capsys.readouterr().out


def test_code_that_raises_names_the_line_not_the_package(capsys):
    def broken(num_tokens, page_size):
        return num_tokens / (page_size - page_size)

    assert check("pages_needed", broken) is False
    out = capsys.readouterr().out
    assert "ZeroDivisionError" in out and "in broken" in out and "page_size - page_size" in out
    assert "Traceback" not in out


def test_the_wrong_type(capsys):
    assert check("copy_on_write", lambda block_table, num_tokens, page_size, ref_counts: "copy") is False
    assert "return a pair (action, page_id)" in capsys.readouterr().out


def test_code_that_mutates_its_input(capsys):
    def pops(block_table, positions, page_size):
        answer = [block_table[p // page_size] * page_size + p % page_size for p in positions]
        block_table.clear()
        return answer

    assert check("slot_mapping", pops) is False
    assert "changed its input `block_table`" in capsys.readouterr().out


def test_code_that_loops_forever_is_stopped_as_never_returning(monkeypatch, capsys):
    monkeypatch.setattr("pagedkv.exercises.guard.CALL_LIMIT", 0.3)

    def spins(num_tokens, page_size):
        while num_tokens < 5:  # an endless loop on the smallest cases only
            pass
        return -(-num_tokens // page_size)

    assert check("pages_needed", spins) is False
    out = capsys.readouterr().out
    assert "one call of your code never returned (stopped after 0.3 s" in out and "num_tokens=1" in out


def test_slow_but_correct_code_passes(monkeypatch, capsys):
    monkeypatch.setattr("pagedkv.exercises.guard.CALL_LIMIT", 0.3)  # each call ~0.01 s, 65 calls

    def slow(num_tokens, page_size):
        time.sleep(0.01)
        return -(-num_tokens // page_size)

    assert check("pages_needed", slow) is True, capsys.readouterr().out


def test_code_too_slow_for_the_whole_check_is_told_so(monkeypatch, capsys):
    monkeypatch.setattr("pagedkv.exercises.TIME_LIMIT", 0.3)

    def slow(num_tokens, page_size):
        time.sleep(0.02)  # returns every time, but 65 calls take ~1.3 s
        return -(-num_tokens // page_size)

    assert check("pages_needed", slow) is False
    out = capsys.readouterr().out
    assert "too slow. Your code returned every time" in out and "never returned" not in out


def test_an_except_clause_does_not_swallow_the_time_limit(monkeypatch, capsys):
    monkeypatch.setattr("pagedkv.exercises.guard.CALL_LIMIT", 0.5)

    def swallows(num_tokens, page_size):
        while True:
            try:
                while True:
                    pass
            except Exception:
                pass

    assert check("pages_needed", swallows) is False
    assert "never returned" in capsys.readouterr().out


def test_a_policy_passed_as_an_instance_or_missing_methods(capsys):
    assert check("eviction_policy", SOLUTIONS["eviction_policy"]()) is False
    assert "pass the class itself" in capsys.readouterr().out

    class Half:
        def add(self, page_id): ...

    assert check("eviction_policy", Half) is False
    assert "has no add_all, remove" in capsys.readouterr().out


def test_a_policy_that_fails_only_inside_the_pool_is_caught_there(capsys):
    class KeepsTwoOfEachRelease(SOLUTIONS["eviction_policy"]):
        def add_all(self, page_ids):
            super().add_all(page_ids[:2])

    assert check("eviction_policy", KeepsTwoOfEachRelease) is False
    out = capsys.readouterr().out
    assert "the pool no longer holds together" in out and "add a [1, 2, 3, 4, 5, 6]; free a" in out


def test_unknown_exercise_name_is_feedback_not_a_traceback(capsys):
    assert check("slot-mapping", SOLUTIONS["slot_mapping"]) is False
    out = capsys.readouterr().out
    assert out.startswith("✗ there is no exercise 'slot-mapping'. Did you mean 'slot_mapping'?"), out


def test_the_preemption_hint_probes_when_the_case_cannot_tell(capsys):
    # PROBE's right answer, from the real scheduler: the newest request, req3, is preempted.
    from pagedkv.exercises.preemption import PROBE, _oracle

    assert _oracle(**PROBE) == (["req3"], 1)


def test_a_check_from_another_thread_still_works(capsys):
    # No alarm outside the main thread: the check runs in a worker thread with a join timeout.
    results = []
    worker = threading.Thread(target=lambda: results.append(check("pages_needed", SOLUTIONS["pages_needed"])))
    worker.start()
    worker.join(30)
    assert results == [True]
    assert "✓ pages_needed" in capsys.readouterr().out


def test_a_subclass_of_the_packages_eviction_policy_is_accepted(capsys):
    class LRUFromTheBase(EvictionPolicy):  # keeps add, remove, ... of the base class
        def pop_victim(self):
            return self._pages.popitem(last=False)[0]

        def order(self):
            return list(self._pages)

    assert check("eviction_policy", LRUFromTheBase) is True
