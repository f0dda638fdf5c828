"""Pages as text: which tokens each page of a block table holds, printable in a terminal.

`python -m pagedkv demo` prints these; the token-by-page pictures of `pagedkv.viz` draw
the same runs, and the dashboard's log names a token's slot with `slot_words`, as the demo
does. Leaves out: colour (the pictures add it).
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping
from collections.abc import Sequence as SequenceLike

from pagedkv.core.observe.snapshot import PoolSnapshot
from pagedkv.core.plumbing.validation import check_instance
from pagedkv.core.sequence import SequenceManager
from pagedkv.engine.scheduler import Scheduler
from pagedkv.engine.scheduler_output import StepRecord


def token_ids_of(seqs: SequenceManager) -> dict[Hashable, list[int]]:
    """seq id -> token ids of every live sequence (what the views below draw)."""
    return {s: list(seqs.get(s).token_ids) for s in seqs.sequences}


def slot_words(text: str, page_size: int | None) -> str:
    """A log line's "in slot 17" as "in slot 17 (page 4, place 1)" for `page_size` 4: the
    slot is the token's place in the whole pool (page x page size + place), the place is
    where it sits in its page; both count from 0. The dashboard's log and
    `python -m pagedkv demo` print the same words. Unchanged when `page_size` is None."""
    if page_size is None:
        return text
    where = lambda m: f"in slot {m[1]} (page {int(m[1]) // page_size}, place {int(m[1]) % page_size})"  # noqa: E731
    return re.sub(r"in slot (\d+)", where, text)


ROLE_WORDS = {"request": "queues", "abort": "aborts", "add": "adds", "free": "frees"}


def step_role_at(actions: SequenceLike, step: int) -> str:
    """What scenario step `step` (counted from 1) of a run with a scheduler does:
    "scheduler step k" when it ran the scheduler (the k-th such step), else e.g. "queues req3".
    The dashboard's header and log and `event_list` print the same words."""
    if not 0 < step <= len(actions):
        return ""
    action = actions[step - 1]
    if action.op == "schedule":
        return f"scheduler step {sum(a.op == 'schedule' for a in actions[:step])}"
    return f"{ROLE_WORDS.get(action.op, action.op)} {action.seq_id}".rstrip()


def waiting_words(scheduler: Scheduler, step: StepRecord) -> str:
    """The log's line on why the waiting queue's head was not admitted in `step` ("" when
    nothing waits, or nothing held it back)."""
    refusal = scheduler.head_refused
    if refusal is not None:
        after = " (checked after this step's admissions)" if step.prefill else ""
        return f"{refusal.req_id} waits{after}: {refusal.reason}"
    if not scheduler.waiting:
        return ""
    if step.preempted:  # vLLM v1 tries the waiting queue only when nobody was preempted
        names = ", ".join(str(s.req_id) for s in scheduler.waiting)
        return f"{names} not tried: a step that preempts admits nobody"
    budget = scheduler.max_num_batched_tokens
    if step.num_batched_tokens >= budget:
        return f"{scheduler.waiting[0].req_id} waits: the step's token budget ({budget}) is used up"
    return ""


def glyph(token: int) -> str:
    """The character a byte token shows as: itself if printable, "·" a space, "↵" a newline, else hex."""
    if token in (10, 32):
        return "↵" if token == 10 else "·"
    return chr(token) if 32 < token < 127 else f"\\x{token:02x}"


def page_runs(
    snapshot: PoolSnapshot, token_ids: Mapping[Hashable, SequenceLike[int]], max_tokens: int = 128
) -> dict[Hashable, list[tuple[int, str]]]:
    """seq id -> [(page id, text of its tokens in that page), ...] for every live sequence.

    Example (page_size 4, block table [3, 0]): "The KV" -> [(3, "The·"), (0, "KV")].
    """
    check_instance("snapshot", snapshot, PoolSnapshot)
    size, out = snapshot.page_size, {}
    for seq_id in snapshot.seq_ids:
        tokens = list(token_ids.get(seq_id, []))[:max_tokens]
        table = snapshot.block_tables[seq_id]
        out[seq_id] = [
            (table[k], "".join(glyph(t) for t in tokens[k * size : (k + 1) * size]))
            for k in range(min(len(table), -(-len(tokens) // size)))
        ]
    return out
