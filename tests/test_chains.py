"""Notebook 09's page-chain picture and the kinds it draws, on a pool built by hand."""

from __future__ import annotations

import pytest
from matplotlib.patches import FancyBboxPatch

from pagedkv import CacheConfig, KVCachePool, SequenceManager
from pagedkv.labs.radix_roles import page_kinds
from pagedkv.viz.chains import KINDS, plot_page_chains


def corner_pool(prefix_index: str, evict_original: bool = False) -> KVCachePool:
    """Notebook 09, section 5: page 0 = [1, 2] CACHED; `second` holds its copy, page 1, and
    page 2 = [3, 4]; with `evict_original`, a request of 6 new pages takes page 0."""
    sizes = dict(num_pages=8, page_size=2, num_layers=1, num_kv_heads=1, head_dim=1)
    config = CacheConfig(**sizes, prefix_index=prefix_index)
    pool = KVCachePool(config)
    seqs = SequenceManager(pool)
    seqs.add("first", [1, 2])
    seqs.free("first")
    seqs.add("second", [1, 2])
    seqs.append_slot("second", 3)
    seqs.append_slot("second", 4)
    assert seqs.block_table("second") == [1, 2]
    if evict_original:
        seqs.add("other", list(range(10, 22)))  # 6 pages: the 5 FREE ones, then page 0
        assert 0 in seqs.block_table("other")
    return pool


def test_page_kinds_of_the_corner():
    # the hash chain indexes page 2 through [1, 2]'s hash; the tree leaves it out; the copy,
    # page 1, is in neither; once page 0 is evicted nothing leads to page 2
    assert page_kinds(corner_pool("hash"), [0, 1, 2]) == ["reached", "not indexed", "reached"]
    assert page_kinds(corner_pool("radix"), [0, 1, 2]) == ["reached", "not indexed", "not indexed"]
    assert page_kinds(corner_pool("hash", evict_original=True), [1, 2]) == ["not indexed", "orphan"]


def test_one_box_per_entry_and_a_legend_of_the_kinds_drawn():
    rows = {"a": [("page 0", "reached", "x"), ("page 2", "orphan", "")], "b": [("no page", "evicted", "")]}
    fig = plot_page_chains(rows, "t")
    (ax,) = fig.axes
    assert len([p for p in ax.patches if isinstance(p, FancyBboxPatch)]) == 3
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == [KINDS[k][3] for k in ("reached", "orphan", "evicted")]
    assert fig.get_size_inches()[0] * fig.dpi <= 848  # shown unshrunk


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError):
        plot_page_chains({"a": [("page 0", "cached", "")]})


def test_an_arrow_joins_only_two_pages_the_index_holds():
    # notebook 09, section 3: the tree holds none of request 3's last 4 pages, so its row has
    # no arrow; in the hash row the copy (page 7) is not indexed, so it has no arrow in or
    # out, and only the orphans 6 -> 8 are joined
    from matplotlib.text import Annotation

    tail = [("page 7", "not indexed", ""), ("page 6", "orphan", ""), ("page 8", "orphan", "")]
    rows = {
        "hash": [("pages 0-5", "reached", ""), *tail, ("page 11", "not indexed", "")],
        "tree": [("pages 0-5", "reached", "")] + [(t, "not indexed", "") for t, _, _ in tail],
    }
    (ax,) = plot_page_chains(rows).axes
    arrows = [t for t in ax.texts if isinstance(t, Annotation)]
    assert len(arrows) == 1  # 6 -> 8 in the hash row, none in the tree's
    starts = sorted({round(p.get_x(), 6) for p in ax.patches if isinstance(p, FancyBboxPatch)})
    assert starts[2] < arrows[0].xyann[0] < arrows[0].xy[0] < starts[4]  # page 6 -> page 8
    (ax,) = plot_page_chains({"tree": rows["tree"]}).axes
    assert not [t for t in ax.texts if isinstance(t, Annotation)]
    assert not any("\u2192" in t.get_text() for t in ax.texts)  # no arrow, no arrow key


def test_an_evicted_page_has_no_arrow_out():
    # notebook 09, section 5: once page 0 is evicted, page 2 is an orphan with nothing before it
    from matplotlib.text import Annotation

    (ax,) = plot_page_chains({"hash": [("no page", "evicted", ""), ("page 2", "orphan", "")]}).axes
    assert not [t for t in ax.texts if isinstance(t, Annotation)]
    (ax,) = plot_page_chains({"hash": [("page 0", "reached", ""), ("page 2", "reached", "")]}).axes
    assert len([t for t in ax.texts if isinstance(t, Annotation)]) == 1


def test_rows_are_shorter_when_every_note_is_one_line():
    # notebook 09, section 5: three rows of one-line notes fit a 1280x720 screen (<= 480 px)
    one = {name: [("page 0", "reached", "[1, 2]"), ("page 2", "orphan", "[3, 4]")] for name in "abc"}
    two = {**one, "c": [("page 0", "reached", "[1, 2],\nthe original")]}
    one_px, two_px = (plot_page_chains(rows, "t").get_size_inches()[1] * 100 for rows in (one, two))
    assert one_px <= 480
    assert round(two_px - one_px) == 3 * 20  # a second note line: 20 px more for each row


def test_evicted_and_not_indexed_boxes_differ_in_fill_border_and_hatch():
    # an evicted box is grey and crossed; a not-indexed box white and dashed (notebook 09, section 5)
    (ax,) = plot_page_chains({"hash": [("no page", "evicted", ""), ("page 1", "not indexed", "")]}).axes
    from matplotlib.patches import FancyBboxPatch

    evicted, not_indexed = [p for p in ax.patches if isinstance(p, FancyBboxPatch)]
    assert evicted.get_hatch() and not not_indexed.get_hatch()
    assert evicted.get_facecolor() != not_indexed.get_facecolor()
    assert evicted.get_linestyle() != not_indexed.get_linestyle()


def test_release_chains_by_hand():
    """A repeated request after release: one box for its hits, the first recomputed block
    marked as the copy, the last as partial, and a page no index holds drawn as FREE."""
    from pagedkv.labs.radix_roles import release_chains

    kinds = {"x": ["reached", "reached", "not indexed", "orphan", "not indexed"]}
    assert release_chains(kinds, [0, 1, 9, 5, 3], hit_blocks=2) == {
        "x": [
            ("pages 0-1", "reached", "blocks 0-1"),
            ("page 9", "free", "block 2: copy"),
            ("page 5", "orphan", "block 3"),
            ("page 3", "free", "block 4: partial"),
        ]
    }
    assert KINDS["free"][3] == "not indexed: FREE after release"
    # the earlier request held block 2 on page 5: the copy's note names it, and block 3, which
    # the later request wrote on page 5 once it had evicted it, says what page 5 holds now,
    # then that it held the earlier request's block 2 (a learner misread "before: block 2")
    named = release_chains(kinds, [0, 1, 9, 5, 3], hit_blocks=2, original=5, earlier="req. 1")["x"]
    assert [note for _, _, note in named[1:3]] == [
        "block 2: copy of\nreq. 1's block 2",
        "now block 3; was\nreq. 1's block 2",
    ]


def test_pair_table_by_hand():
    """Request 2 repeats request 1's 8-token prompt (pages of 4): the last-token rule hits block
    0 only, block 1 is recomputed on a FREE page as a copy, block 2 is partial."""
    from pagedkv.labs.radix_roles import pair_table

    def row(pages, hits, released_free):
        return {"pages": pages, "hits": hits, "evicted": [], "released_free": released_free, "orphans": []}

    rows = [row([0, 1], 0, []), row([0, 2, 3], 4, [2, 3])]
    tokens = [list(range(1, 9)), list(range(1, 10))]
    lines = [
        [c.strip() for c in line.split(" | ")] for line in pair_table(rows, 0, 1, tokens, [8, 8]).splitlines()
    ]  # type: ignore[arg-type]
    assert lines == [
        ["block", "request 1", "request 2", "request 2's page came from", "note"],
        ["0", "0", "0", "prefix hit"],  # no note: the line ends there
        ["1", "1", "2", "FREE", "copy of block 1"],
        ["2", "", "3", "FREE", "partial: not full"],
    ]


def test_insert_rest_adds_only_the_unmatched_pages():
    """Section 1 by hand: B shares A's first 4 pages of 6, so 2 new pages join as a leaf and
    the tree holds 8 pages in 3 nodes; B then matches its own pages."""
    from pagedkv.labs.radix_roles import insert_rest
    from pagedkv.radix.radix_cache import RadixCache

    tree = RadixCache(page_size=4)
    a, b = list(range(24)), list(range(16)) + list(range(100, 108))
    tree.insert(a, [0, 1, 2, 3, 4, 5])
    assert insert_rest(tree, b, tree.match_prefix(b), next_page=6) == [6, 7]
    assert (tree.total_size(), tree.num_nodes) == (8, 3)
    assert tree.match_prefix(b).page_ids == [0, 1, 2, 3, 6, 7]


def test_corner_figure_names_the_unindexed_copy():
    """Section 4a's picture: the evicted box's note names the copy's page, which no index
    holds, and the figure draws 6 page boxes (2 per row, 3 rows) plus the legend."""
    from pagedkv.viz.radix import corner_figure

    fig = corner_figure("CACHED", ["reached", "reached"], "orphan", ("CACHED", ["reached", "not indexed"]), 5)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "evicted; its copy, page 5, is not indexed" in texts
    assert "[3, 4], written after page 5\n(page 5 = the copy: same hash as page 0)" in texts  # why 0 -> 2
    assert "[3, 4], written after page 5,\nwhich is not in the tree" in texts
    rows = [t for t in texts if t[:1] == "("]  # the row captions, numbered as the prose reads them
    assert [r[:4] for r in rows] == ["(1) ", "(2) ", "(3) "] and "radix pool" in rows[2]
    assert "Pages 0 and 2 as each index sees them; the copy (page 5) is in neither" in texts
    boxes = [p for p in fig.axes[0].patches if isinstance(p, FancyBboxPatch)]
    assert len(boxes) == 6 and sum(bool(b.get_hatch()) for b in boxes) == 1


def test_lookup_note_names_the_split_node_and_its_two_halves():
    """Section 1's lookup answer: a lookup ending inside a node splits it, and the note names
    the old node and the two new ones and where the split falls (after 1 whole page of 2
    tokens, worked by hand); a lookup that ends on a node boundary changes nothing."""
    import copy

    from pagedkv.labs.radix_roles import lookup_note
    from pagedkv.radix.radix_cache import RadixCache

    decode = lambda ids: "".join(chr(97 + i) for i in ids)  # noqa: E731
    tree = RadixCache(page_size=2)
    tree.insert([0, 1, 2, 3, 4, 5], [0, 1, 2])
    before = copy.deepcopy(tree)
    tree.match_prefix([0, 1, 9])  # one whole page of the node's three: a split
    assert (
        lookup_note(before, tree, decode)
        == "yes: the lookup split 'abcdef' into 'ab' and 'cdef'; no page moved\n"
        "the split falls on a page boundary (1 page = 2 tokens): a match counts whole pages only"
    )
    again = copy.deepcopy(tree)
    tree.match_prefix([0, 1, 9])  # ends where a node ends now
    assert lookup_note(again, tree, decode) == "no: the lookup left the tree as it was (2 nodes)"


def test_swap_text_wraps_at_spaces_and_tells_the_copy_and_the_original_in_time_order():
    """Worked by hand: request 2 repeats request 1, whose block 3 sat on page 6; request 2
    recomputed block 3 on page 7 (prefill), then its block 4 took page 6 (decode)."""
    from pagedkv.labs.radix_roles import swap_text

    rows = [{"pages": [0, 1, 2, 6]}, {"pages": [0, 1, 2, 7, 6]}]
    text = swap_text(rows, 1, 0, 3, [6, 5, 4, 3, 2, 1, 0, 9, 8], width=30)  # type: ignore[arg-type]
    lines = text.splitlines()
    assert all(len(line) <= 30 for line in lines[5:8])  # the LRU lines wrap
    words = " ".join(lines[5:8]).split()  # wrapping only at spaces: every word whole
    assert " ".join(words) == "LRU order before request 2, first evicted first: [6, 5, 4, 3, 2, 1, 0, 9, 8]"
    wide = swap_text(rows, 1, 0, 3, [6, 5, 4]).splitlines()
    assert wide[:4] == [  # first: the table
        "both pools, request 2's block -> page, in time order:",
        "block | prefill                 | decode",
        "3     | page 7, copy of block 3 |",
        "4     |                         | page 6, request 1's block 3: evicted, reused",
    ]
    assert wide[7:] == [  # then the LRU order (lines 5, 6), then its reading
        "Prefill: request 2 recomputes block 3 on page 7.",  # page 7 was in no earlier request
        "Decode: request 2 evicts page 6 (request 1's block 3, the original) and writes",
        "block 4 on it.",
    ]
    # page 7 held request 1's block 4 before: the sentence names it, so 7 never reads as block 3
    before = [{"pages": [0, 1, 2, 6, 7]}, {"pages": [0, 1, 2, 7, 6]}]
    said = " ".join(swap_text(before, 1, 0, 3, [7, 6]).splitlines()[7:])  # type: ignore[arg-type]
    assert said.startswith(
        "Prefill: request 2 evicts page 7 (request 1's block 4) and recomputes block 3 on it."
    )
    assert all(len(line) <= 80 for line in wide)
    no_lru = swap_text(rows, 1, 0, 3).splitlines()  # type: ignore[arg-type]
    assert no_lru == wide[:5] + wide[7:]  # without an LRU order: the table and the sentences only
    gone = swap_text([{"pages": [0, 6]}, {"pages": [0, 7, 8]}], 1, 0, 1, [6])  # type: ignore[arg-type]
    assert gone.splitlines()[3].endswith("| page 6 (the original) goes to no block")
    assert gone.splitlines()[4] == "2     |                         | page 8: FREE"  # held by no one before
    assert gone.splitlines()[8:] == ["Prefill: request 2 recomputes block 1 on page 7."]  # no decode line
    # every block after the copy gets a row (notebook 09, section 5: blocks 8 and 9 too)
    more = [{"pages": [0, 6, 5], "evicted": []}, {"pages": [0, 7, 6, 5, 9], "evicted": [7, 6, 5]}]
    rows_more = swap_text(more, 1, 0, 1).splitlines()  # type: ignore[arg-type]
    assert rows_more[3:6] == [
        "2     |                         | page 6, request 1's block 1: evicted, reused",
        "3     |                         | page 5, request 1's block 2: evicted, reused",
        "4     |                         | page 9: FREE",
    ]


def test_evictions_table_by_hand():
    """Two pools, two requests: the later request's evictions, the summed hits, the running
    eviction count; a request that evicted nothing reads "none"."""
    from pagedkv.labs.radix_roles import evictions_table

    rows = {
        "hash": [{"hits": 0, "evicted": [], "evictions": 0}, {"hits": 8, "evicted": [3, 1], "evictions": 2}],
        "radix": [{"hits": 0, "evicted": [], "evictions": 0}, {"hits": 4, "evicted": [], "evictions": 0}],
    }
    lines = [[c.strip() for c in line.split(" | ")] for line in evictions_table(rows, 1).splitlines()]  # type: ignore[arg-type]
    assert lines == [
        ["pool", "request 2 evicts", "hit tokens, requests 1-2", "evictions"],
        ["hash", "3, 1", "8", "2"],
        ["radix", "none", "4", "0"],
    ]
