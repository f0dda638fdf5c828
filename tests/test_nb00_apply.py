"""Notebook 00's synthesis question ("00-apply") against the pool itself.

Oracle: a replay of the walkthrough to step 22, where a prompt made of request_A's first 20
tokens is admitted and then finished. The question's answer must name what the pool did: how
many tokens came from the cache, and the state its one new page ends in.
"""

from __future__ import annotations

from pagedkv.scenarios import ScenarioRun
from pagedkv.viz import questions


def test_the_apply_question_answers_what_the_pool_does():
    run = ScenarioRun("walkthrough")
    run.goto(22)  # request_A has just finished
    cached = run.pool.eviction.order()[::-1]  # its CACHED pages, in block order
    assert cached == list(range(9))
    prompt = [t for page in cached[:5] for t in run.pool.page(page).token_ids]  # tokens 1-20
    from_cache = run.seqs.add("apply", prompt)
    new_pages = [p for p in run.seqs.block_table("apply") if p not in cached]
    assert len(prompt) == 20 and len(new_pages) == 1
    run.seqs.free("apply")
    ends = run.pool.page(new_pages[0]).state.name
    q = questions.quiz("00-apply").questions[0]
    assert q.answer == f"{from_cache}; its new page ends {ends}"
    assert (from_cache, ends) == (16, "FREE")  # the last page is computed again, then not indexed
    assert new_pages == [9] and "page 9" in q.why  # the lowest FREE page, as the why says


def test_a_prompt_seen_before_computes_again_the_page_of_its_last_token():
    """Notebook 00's cost of the last-page rule with 16-token pages, against the count from
    page arithmetic: the tokens of the page holding the last token, 1 to 16."""
    from pagedkv import KVCachePool, SequenceManager, TinyLM

    model = TinyLM.pretrained()
    seqs = SequenceManager(KVCachePool(model.cache_config(num_pages=16, page_size=16)))
    text = model.encode("The KV cache holds pages, and a page holds the K/V of 16 tokens.")
    for n in (16, 17, 31, 32, 33, 40, 48):
        seqs.add("first", text[:n])
        seqs.free("first")
        from_cache = seqs.add("again", text[:n])
        seqs.free("again")
        last_page_tokens = n - 16 * ((n - 1) // 16)  # tokens in the page holding token n
        assert n - from_cache == last_page_tokens, n
