"""Several clients driving one `ServiceEngine` at the same time, one thread each.

`run_clients(engine, prompts, new_tokens)` starts one thread per prompt. Each thread admits
its prompt under its own name (`engine.create`), then asks for one token at a time
(`engine.generate(name, 1)`), `new_tokens` times, while the other threads do the same, so
the engine's lock sees the calls interleave in an order that changes from run to run. It
returns once every thread has finished, and raises the first exception any thread met
(a thread's exception is otherwise lost), so a caller never checks a half-run result.
Every prompt is checked before any thread starts: a bad one changes nothing.

Notebook 07 and the concurrency tests use it to show what the lock guarantees: each
sequence's tokens equal `TinyLM.generate_reference` of its prompt, whatever the order.
Leaves out: timing (`bench threads` measures what the lock costs).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from pagedkv.core.plumbing.validation import check_instance, check_int, check_tokens, check_vocab
from pagedkv.model.tinylm import VOCAB_SIZE
from pagedkv.service.engine import ServiceEngine


def run_clients(engine: ServiceEngine, prompts: Mapping[str, list[int]], new_tokens: int) -> None:
    """One thread per `prompts` entry (name -> token ids): admit it, then decode one token at
    a time, `new_tokens` times. Raises the first exception a thread raised."""
    check_instance("engine", engine, ServiceEngine)
    check_instance("prompts", prompts, Mapping)
    check_int("new_tokens", new_tokens, 1)
    if not prompts:
        raise ValueError("prompts is empty: give at least one name -> token ids")
    for name, token_ids in prompts.items():  # all checked before any thread starts
        check_instance("a name in prompts", name, str)
        check_tokens(f"prompts[{name!r}]", token_ids)
        check_vocab(f"prompts[{name!r}]", token_ids, VOCAB_SIZE)
        if name in engine.locked:
            raise ValueError(f"prompts: {name!r} is already a live sequence of the engine")
    errors: list[BaseException] = []

    def client(name: str) -> None:
        try:
            engine.create(list(prompts[name]), name)
            for _ in range(new_tokens):
                engine.generate(name, 1)
        except BaseException as error:  # handed to the caller below
            errors.append(error)

    threads = [threading.Thread(target=client, args=(name,)) for name in prompts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
