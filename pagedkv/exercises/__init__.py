"""Exercises with auto-checkers: write a piece of the paged KV cache, get feedback at once.

    from pagedkv.exercises import check
    check("slot_mapping", my_slot_mapping)   # prints feedback, returns True or False

Each checker holds the learner's function (or class) to the package's own oracles, smallest
case first, and on a failure names that case (inputs, expected, got), the rule it breaks and,
when the answer matches a known mistake, a hint; it never shows the solution. Code that
raises, returns the wrong type, changes its inputs, never returns (one call past
`guard.CALL_LIMIT` seconds) or is too slow (the whole check past `TIME_LIMIT`) gets a plain
message instead of a traceback. The learner's function is called positionally, so any
parameter names work. An answer that calls pagedkv's own implementation is refused.
The exercises, one per idea of notebooks 01-05:

- slot_mapping(block_table, positions, page_size) -> slots of those positions
- pages_needed(num_tokens, page_size) -> pages a sequence of num_tokens tokens holds
- block_hashes(token_ids, page_size, hash_block) -> chained hashes of the full blocks
- eviction_policy: a class with the EvictionPolicy interface that evicts LRU first
- copy_on_write(block_table, num_tokens, page_size, ref_counts) -> (action, page id or None)
- paged_attention(q, k_cache, v_cache, block_table, context_len) -> [num_heads, head_dim]
- preemption(running, page_size, num_free_pages) -> (victims, tokens recomputed)

Leaves out: grading. nbgrader grades the notebooks in notebooks/exercises/, whose graded
cells call `check`.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable

from pagedkv.exercises.attention import check_paged_attention
from pagedkv.exercises.blocks import check_pages_needed, check_slot_mapping
from pagedkv.exercises.cow import check_copy_on_write
from pagedkv.exercises.eviction import check_eviction_policy
from pagedkv.exercises.guard import TOTAL_LIMIT, Failure, run_with_limit
from pagedkv.exercises.hashes import check_block_hashes
from pagedkv.exercises.preemption import check_preemption

TIME_LIMIT = TOTAL_LIMIT  # seconds per check() call; each call of the learner's code has CALL_LIMIT
EXERCISES: dict[str, Callable[[Callable], str]] = {
    "slot_mapping": check_slot_mapping,
    "pages_needed": check_pages_needed,
    "block_hashes": check_block_hashes,
    "eviction_policy": check_eviction_policy,
    "copy_on_write": check_copy_on_write,
    "paged_attention": check_paged_attention,
    "preemption": check_preemption,
}

__all__ = ["EXERCISES", "TIME_LIMIT", "check"]


def check(name: str, fn: Callable) -> bool:
    """Check a learner's answer to exercise `name`; print feedback; True if it is right."""
    if name not in EXERCISES:  # a learner's typo: feedback, not a traceback from inside pagedkv
        close = difflib.get_close_matches(str(name).replace("-", "_"), list(EXERCISES), n=1)
        guess = f" Did you mean {close[0]!r}?" if close else ""
        print(f"✗ there is no exercise {name!r}.{guess} The exercises: {', '.join(EXERCISES)}.")
        return False
    if name != "eviction_policy" and not callable(fn):  # that one takes a class
        print(f"✗ {name}: pass your function itself, check({name!r}, my_function), not {fn!r}")
        return False

    def job() -> bool:
        try:
            print(EXERCISES[name](fn))
        except Failure as failure:
            print(failure)
            return False
        return True

    return run_with_limit(job, TIME_LIMIT, name)
