"""run_clients: four threads share one ServiceEngine; the oracle is TinyLM with no cache.

Each sequence's new tokens must equal `generate_reference` of its prompt (dense recompute,
no pages, no threads), the pool's invariants must hold, and the ACTIVE pages must be exactly
the block tables' pages (the prompts differ from their first token, so none is shared).
A thread's failure must reach the caller, and bad input must change nothing.
"""

from __future__ import annotations

import sys

import pytest

from pagedkv import OutOfPagesError, TinyLM
from pagedkv.service.clients_at_once import run_clients
from pagedkv.service.engine import ServiceEngine

PROMPTS = {name: list(f"{name}: one lock for every page".encode()) for name in "ABCD"}


@pytest.fixture(autouse=True)
def fast_thread_switching():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # threads interleave inside requests
    yield
    sys.setswitchinterval(old)


def test_every_client_gets_the_tokens_of_a_run_without_cache_or_threads():
    engine = ServiceEngine(num_pages=64, page_size=4)
    run_clients(engine, PROMPTS, 5)
    model = TinyLM.pretrained()
    pages = 0
    for name, prompt in PROMPTS.items():
        seq = engine.sequence(name)
        assert seq["token_ids"][len(prompt) :] == model.generate_reference(prompt, 5)
        pages += len(seq["block_table"])
    engine.check()
    assert engine.pool.num_active_pages == pages == 4 * -(-(len(PROMPTS["A"]) + 5) // 4)


def test_a_thread_that_fails_raises_in_the_caller():
    engine = ServiceEngine(num_pages=8, page_size=4)  # 32 slots: four 26-token prompts cannot fit
    with pytest.raises(OutOfPagesError):
        run_clients(engine, PROMPTS, 1)


@pytest.mark.parametrize(
    ("prompts", "new_tokens", "error", "words"),
    [
        ({}, 1, ValueError, "prompts is empty"),
        ({"A": [1, 2]}, 0, ValueError, "new_tokens must be >= 1, got 0"),
        ({"A": []}, 1, ValueError, "prompts['A']"),
        ({"A": [1, 2], "B": [1, 999]}, 1, ValueError, "prompts['B']"),
        ({7: [1, 2]}, 1, TypeError, "a name in prompts"),
    ],
)
def test_bad_input_is_refused_before_any_thread_starts(prompts, new_tokens, error, words):
    engine = ServiceEngine(num_pages=16, page_size=4)
    before = engine.snapshot()
    with pytest.raises(error, match=words.replace("[", r"\[").replace("]", r"\]")):
        run_clients(engine, prompts, new_tokens)
    assert engine.snapshot() == before


def test_a_live_name_is_refused_and_nothing_changes():
    engine = ServiceEngine(num_pages=16, page_size=4)
    engine.create([1, 2, 3], "A")
    before = engine.snapshot()
    with pytest.raises(ValueError, match="'A' is already a live sequence"):
        run_clients(engine, {"B": [4, 5], "A": [6]}, 1)
    assert engine.snapshot() == before
