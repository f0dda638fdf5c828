"""The tokens-by-page view puts every token in the page its K/V were written to.

Oracle: `SequenceManager.slot_mapping` (slot // page_size is the page a token's K/V went to),
and the K/V themselves: the page the view names for a token holds, at that token's offset,
the keys a dense recompute gives that token.
"""

from __future__ import annotations

import re

import numpy as np

from pagedkv import KVCachePool, SequenceManager, TinyLM
from pagedkv.scenarios.text import page_runs
from pagedkv.viz import Dashboard, plot_token_pages, token_ids_of, token_pages_html


def _pool_with_sharing():
    model = TinyLM(seed=3)
    seqs = SequenceManager(KVCachePool(model.cache_config(24, 4)))
    model.generate(seqs, ["The KV cache holds"], 6, seq_ids=["a"])  # leaves CACHED pages
    model.generate(seqs, ["The KV cache holds pages", "Copy on write"], 5, seq_ids=["b", "c"], free=False)
    seqs.fork("c", "c2")
    return model, seqs


def test_every_token_sits_in_the_page_of_its_slot():
    model, seqs = _pool_with_sharing()
    snap = seqs.snapshot()
    runs = page_runs(snap, token_ids_of(seqs))
    for seq_id in seqs.sequences:
        tokens = seqs.get(seq_id).token_ids
        pages = (seqs.slot_mapping(seq_id) // seqs.page_size).tolist()
        glyphs = [(page, g) for page, text in runs[seq_id] for g in re.findall(r"\\x[0-9a-f]{2}|.", text)]
        assert [page for page, _ in glyphs] == pages and len(glyphs) == len(tokens)
        expected = [chr(t) if 32 <= t < 127 or t == 10 else f"\\x{t:02x}" for t in tokens]
        assert [g.replace("·", " ").replace("↵", "\n") for _, g in glyphs] == expected


def test_the_named_page_holds_the_tokens_keys():
    model, seqs = _pool_with_sharing()
    layer0_k = seqs.pool.kv_cache[0, 0]  # [num_pages, page_size, kv_heads, head_dim]
    for seq_id in ("b", "c2"):
        tokens = seqs.get(seq_id).token_ids
        computed = seqs.get(seq_id).num_computed_tokens
        h = model.embed[tokens[:computed]]
        ref_k = model._qkv(model.layers[0], h, np.arange(computed))[1]  # noqa: SLF001 - the dense K of layer 0 has no public verb
        position = 0
        for page, text in page_runs(seqs.snapshot(), token_ids_of(seqs))[seq_id]:
            for offset in range(len(re.findall(r"\\x[0-9a-f]{2}|.", text))):
                if position < computed:
                    np.testing.assert_allclose(layer0_k[page, offset], ref_k[position], atol=1e-5)
                position += 1


def test_shared_pages_show_in_the_owners_colour_with_their_ref_count():
    _, seqs = _pool_with_sharing()
    snap = seqs.snapshot()
    html = token_pages_html(snap, token_ids_of(seqs))
    shared = [p for p in range(snap.num_pages) if snap.ref_count[p] > 1]
    assert shared and all(f"page {p} ×{int(snap.ref_count[p])}" in html for p in shared)
    assert "The·KV·cache·holds·pages" not in html  # boxed page by page, not one run
    assert ">The·<" in html


def test_the_figure_labels_every_page():
    _, seqs = _pool_with_sharing()
    snap = seqs.snapshot()
    fig = plot_token_pages(snap, token_ids_of(seqs))
    labels = {t.get_text() for t in fig.axes[0].texts}
    for seq_id in seqs.sequences:
        for page in seqs.block_table(seq_id):
            assert any(label.startswith(f"page {page}") for label in labels)


def test_the_dashboard_shows_tokens_by_page():
    board = Dashboard("walkthrough")
    board.step()
    board.step()
    assert "tokens by page" in board.block_tables.value
    assert "The·" in board.block_tables.value
