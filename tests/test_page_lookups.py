"""entries_and_reuse against a real pool: the block table it builds and the prefix hit it finds."""

import pytest

from pagedkv import KVCachePool, SequenceManager, TinyLM
from pagedkv.labs.page_lookups import entries_and_reuse, entries_and_reuse_text


@pytest.mark.parametrize("page_size", [1, 4, 16])
def test_entries_and_reuse_match_a_pool(page_size: int) -> None:
    prompt, shared = 300, 250
    model = TinyLM.pretrained()
    pool = KVCachePool(model.cache_config(num_pages=2 * (prompt // page_size + 1), page_size=page_size))
    seqs = SequenceManager(pool)
    first = [t % 200 for t in range(prompt)]
    seqs.add("first", first)
    seqs.free("first")  # its full pages stay CACHED for the next prompt
    second = first[:shared] + [201 + t % 50 for t in range(prompt - shared)]
    seqs.add("second", second)
    entries = len(seqs.block_table("second"))
    reused = seqs.snapshot().num_cached_tokens["second"]
    assert entries_and_reuse(prompt, shared, (page_size,)) == {page_size: (entries, reused)}


def test_the_notebook_numbers_and_bad_input() -> None:
    assert entries_and_reuse(300, 250) == {1: (300, 250), 16: (19, 240)}
    assert entries_and_reuse_text().splitlines()[-1].split() == ["16", "19", "240"]
    with pytest.raises(ValueError):
        entries_and_reuse(10, 11)
