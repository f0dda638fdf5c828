"""Notebook 09, section 4c: the chat stream with retries and the sweep over both pools."""

from pagedkv.labs.retry_sweep import chat_with_retries, retry_sweep
from pagedkv.viz.projector import min_font_pt
from pagedkv.viz.retry_sweep import plot_retry_sweep


def test_every_prompt_ends_on_a_page_boundary():
    assert all(len(r.prompt_token_ids) % 16 == 0 for r in chat_with_retries(0.5))


def test_streams_nest_as_the_rate_grows():
    base, some, every = (chat_with_retries(rate) for rate in (0, 0.3, 1.0))
    kept = [r for r in some if not r.req_id.endswith("-first")]
    assert kept == base and len(base) == 120  # the conversations do not depend on the rate
    retried = {r.req_id for r in some if r.req_id.endswith("-first")}
    assert retried <= {r.req_id for r in every} and len(every) == 240
    first = next(r for r in every if r.req_id.endswith("-first"))
    again = next(r for r in every if r.req_id == first.req_id.removesuffix("-first"))
    assert first.prompt_token_ids == again.prompt_token_ids  # a retry: the same prompt


def test_no_retry_no_difference_and_retries_favour_the_hash_chain():
    points = retry_sweep([0, 0.5], [16384])
    assert points[0].extra_hits == 0 and points[1].extra_hits > 0
    assert points[1].hash_evictions == points[1].radix_evictions == 0  # room for everything


def test_the_figure_is_readable_on_a_projector():
    assert min_font_pt(plot_retry_sweep(retry_sweep([0, 1.0], [1024]))) >= 13
