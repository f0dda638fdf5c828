"""Which running request to preempt: the newest (vLLM's rule) or another, and what each costs.

`victim_costs` serves the same requests twice in a small pool, under policy "fcfs" (the
victim is the last admitted, vLLM's rule) and "priority" (the victim is the least urgent),
and reports for each run the victim and the tokens computed again for it. With a newest
request that is long and nearly done, "fcfs" throws away the most work.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from pagedkv.core.pool import KVCachePool
from pagedkv.core.sequence import SequenceManager
from pagedkv.engine.scheduler import Scheduler
from pagedkv.model.tinylm import TinyLM


def victim_costs(
    model: TinyLM,
    requests: Sequence[tuple[Hashable, str, int, int]],
    *,
    num_pages: int,
    page_size: int = 4,
) -> dict[str, dict[str, object]]:
    """Serve `requests`, (req_id, prompt text, max_new_tokens, priority) in arrival order, once
    per policy ("fcfs", "priority") with recompute preemption, and return for each policy:
    `victims` (preempted req_ids, in order), `first_preempt` (the step of the first preemption,
    counted from 1, and the victim's tokens then against its final length), `recomputed_tokens`,
    `steps` and `same` (every output equal to the model's uncached reference)."""
    result: dict[str, dict[str, object]] = {}
    for policy in ("fcfs", "priority"):
        pool = KVCachePool(model.cache_config(num_pages=num_pages, page_size=page_size))
        sched = Scheduler(SequenceManager(pool), model, max_num_seqs=len(requests), policy=policy)
        events: list = []
        sched.add_listener(events.append)
        for req_id, text, new, priority in requests:
            sched.add_request(req_id, model.encode(text), new, priority=priority)
        first: list[tuple[int, int, int]] = []

        def note(record, sched=sched, first=first) -> None:  # the first preemption, once
            for req_id, _ in record.preempted[: 1 - len(first)]:
                req = sched.requests[req_id]
                done = len(req.prompt_token_ids) + len(req.output) - 1  # the last sampled: unwritten
                final = len(req.prompt_token_ids) + req.max_new_tokens - 1
                first.append((record.step, done, final))

        outputs = sched.run(on_step=note)
        same = all(outputs[r] == model.generate_reference(t, n) for r, t, n, _ in requests)
        result[policy] = {
            "victims": [e.seq_id for e in events if e.kind == "preempt"],
            "first_preempt": first[0] if first else None,
            "recomputed_tokens": sched.stats.recomputed_tokens,
            "steps": sched.stats.steps,
            "same": same,
        }
    return result


def sglang_retract_order(
    model: TinyLM,
    requests: Sequence[tuple[Hashable, str, int, int]],
    *,
    num_pages: int,
    step: int,
    page_size: int = 4,
) -> list[tuple[Hashable, int, int]]:
    """Serve `requests` as `victim_costs` does under "fcfs" up to just before `step`, and return
    (req_id, sampled tokens, prompt length) for each running request, in the order SGLang's
    `retract_decode` (schedule_batch.py) retracts them without speculative decoding: it sorts by
    (sampled tokens, -prompt length) descending and pops from the end, so fewest sampled tokens
    first and, among equals, the longest prompt first."""
    pool = KVCachePool(model.cache_config(num_pages=num_pages, page_size=page_size))
    sched = Scheduler(SequenceManager(pool), model, max_num_seqs=len(requests))
    for req_id, text, new, priority in requests:
        sched.add_request(req_id, model.encode(text), new, priority=priority)
    for _ in range(step - 1):
        sched.step()
    rows = [
        (s.req_id, len(sched.requests[s.req_id].output), len(sched.requests[s.req_id].prompt_token_ids))
        for s in sched.running
    ]
    rows.sort(key=lambda r: (r[1], -r[2]), reverse=True)
    return rows[::-1]  # the first to retract first
