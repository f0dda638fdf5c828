"""victim_costs: the newest request preempted (fcfs) against the least urgent (priority),
checked by hand against the pool's pages and the model's uncached reference."""

from pagedkv import TinyLM
from pagedkv.labs.victim_choice import victim_costs


def test_a_long_newest_request_costs_more_to_preempt_than_a_short_older_one():
    model = TinyLM.pretrained()
    old, new = "Hi", "A long prompt is prefilled in chunks of 8."
    assert (len(model.encode(old)), len(model.encode(new))) == (2, 42)
    # 12 pages of 4: old's 2 tokens take 1 page, new's 42 take 11; the pool is full at once
    costs = victim_costs(model, [("old", old, 24, 1), ("new", new, 4, 0)], num_pages=12)
    fcfs, prio = costs["fcfs"], costs["priority"]
    assert fcfs["victims"] == ["new"] and prio["victims"] == ["old"]
    assert fcfs["same"] and prio["same"]  # preemption never changes the tokens
    # old's victim loses at most the 4 tokens of its one full page; new loses whole pages
    assert prio["recomputed_tokens"] <= 4 < fcfs["recomputed_tokens"]
    assert fcfs["recomputed_tokens"] % 4 == 0 and fcfs["recomputed_tokens"] <= 42 + 3


def test_the_newest_is_preempted_nearly_done():
    # by hand: old (1 page) and new (11 pages, 42 of 44 slots) fill the 12 pages at step 1;
    # steps 2 and 3 write old's tokens 3-4 and new's 43-44, so at step 4 both need a page and
    # none is left. fcfs preempts new with 44 of its 42 + 4 - 1 tokens written
    model = TinyLM.pretrained()
    old, new = "Hi", "A long prompt is prefilled in chunks of 8."
    costs = victim_costs(model, [("old", old, 24, 1), ("new", new, 4, 0)], num_pages=12)
    assert costs["fcfs"]["first_preempt"] == (4, 44, 45)
    assert costs["priority"]["first_preempt"] == (4, 4, 2 + 24 - 1)  # old: its 4 tokens
