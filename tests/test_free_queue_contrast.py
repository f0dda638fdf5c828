"""The free-queue contrast of notebook 01: pagedkv's pool against two models of vLLM's queue."""

from __future__ import annotations

from pagedkv import KVCachePool, TinyLM
from pagedkv.labs.free_queue_contrast import contrast_text, pagedkv_run, vllm_queue_run


def _pool() -> KVCachePool:
    return KVCachePool(TinyLM.pretrained().cache_config(num_pages=4, page_size=4))


def test_pagedkv_takes_the_free_page_and_evicts_nothing():
    assert pagedkv_run(_pool()) == {"free": 1, "cached": 3, "page": 3, "evicted": 0}


def test_current_vllm_agrees_and_older_vllm_evicts_a_cached_page():
    assert vllm_queue_run(prepend_fresh=True) == {"queue": [3, 1, 0, 2], "page": 3, "evicted": None}
    assert vllm_queue_run(prepend_fresh=False) == {"queue": [1, 0, 3, 2], "page": 1, "evicted": 1}


def test_the_text_has_one_line_per_run():
    lines = contrast_text(_pool()).splitlines()
    assert len(lines) == 4 and "C gets page 1" in lines[3] and "evicted: none" in lines[2]
