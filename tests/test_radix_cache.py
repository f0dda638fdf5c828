"""RadixCache on its own: the behaviours SGLang's radix-cache unit tests check (insert and
match, splits that keep the size, page alignment, lock refs and eviction, extra-key
isolation), checked against a plain dict of prefixes."""

from __future__ import annotations

import copy
import random

import pytest

from pagedkv.radix.radix_cache import RadixCache


def test_insert_and_match():
    cache = RadixCache(page_size=1)
    assert cache.insert([1, 2, 3], [10, 20, 30]) == 0  # nothing was there
    assert cache.total_size() == cache.evictable_size() == 3
    assert cache.match_prefix([1, 2, 3]).page_ids == [10, 20, 30]
    assert cache.match_prefix([1, 2]).page_ids == [10, 20]  # a partial match
    assert cache.match_prefix([1, 2, 3, 4, 5]).page_ids == [10, 20, 30]
    assert cache.match_prefix([9]).page_ids == []
    assert cache.insert([1, 2, 3, 4], [11, 21, 31, 41]) == 3  # 3 tokens were cached already
    assert cache.match_prefix([1, 2, 3, 4]).page_ids == [10, 20, 30, 41]  # the tree keeps its own
    assert cache.total_size() == 4
    cache.insert([4, 5], [40, 50])
    assert cache.total_size() == 6
    cache.check()


def test_a_split_keeps_the_size():
    cache = RadixCache(page_size=2)
    cache.insert([1, 2, 3, 4, 5, 6], [10, 11, 12])
    assert cache.num_nodes == 1
    result = cache.match_prefix([1, 2, 3, 4, 9, 9])  # ends inside the node: split after 4 tokens
    assert result.page_ids == [10, 11] and result.last_node.key == [1, 2, 3, 4]
    assert cache.num_nodes == 2 and cache.total_size() == 3
    assert [n.key for n in cache.nodes()][1:] == [[1, 2, 3, 4], [5, 6]]
    cache.insert([1, 2, 7, 8], [10, 13])  # a branch off the middle: another split
    assert cache.num_nodes == 4 and cache.total_size() == 4
    cache.check()


@pytest.mark.parametrize("page_size, length", [(1, 5), (2, 5), (4, 6), (4, 3)])
def test_page_alignment(page_size, length):
    cache = RadixCache(page_size=page_size)
    tokens = list(range(length))
    pages = list(range(100, 100 + length // page_size))
    assert cache.insert(tokens, pages) == 0
    result = cache.match_prefix(tokens)
    assert len(result.page_ids) == length // page_size  # only whole pages
    assert cache.total_size() == length // page_size
    assert cache.match_prefix(tokens[:-1] + [99]).num_pages == (length - 1) // page_size
    with pytest.raises(ValueError, match="page_ids must hold one page per"):
        cache.insert(list(range(50, 50 + 2 * page_size)), [1])


def test_lock_refs_protect_a_path():
    cache = RadixCache(page_size=1)
    cache.insert([1, 2, 3], [10, 20, 30])
    node = cache.match_prefix([1, 2, 3]).last_node
    cache.inc_lock_ref(node)
    assert (cache.protected_size(), cache.evictable_size()) == (3, 0)
    assert cache.evict(3) == []  # nothing unlocked
    cache.dec_lock_ref(node)
    assert (cache.protected_size(), cache.evictable_size()) == (0, 3)
    with pytest.raises(ValueError, match="is not locked"):
        cache.dec_lock_ref(node)
    cache.check()


def test_eviction_takes_unlocked_leaves_least_recently_used_first():
    cache = RadixCache(page_size=1)
    cache.insert([1, 2], [10, 20])
    cache.insert([3, 4], [30, 40])
    cache.insert([1, 2, 5], [10, 20, 50])  # [5] is a leaf under [1, 2]
    cache.match_prefix([3, 4])  # [3, 4] is the most recently used now
    assert cache.evict(1) == [50]  # the least recently used leaf, whole
    assert cache.evict(1) == [20, 10]  # its parent became a leaf: tail page first
    locked = cache.match_prefix([3, 4]).last_node
    cache.inc_lock_ref(locked)
    assert cache.evict(5) == [] and cache.total_size() == 2
    cache.dec_lock_ref(locked)
    assert cache.evict(5) == [40, 30] and cache.total_size() == 0
    cache.check()


def test_notebook_09_tree_gives_up_b_leaf_then_the_shared_nodes_once_b_unlocks():
    # Notebook 09, sections 1 and 2: A and B share 4 pages, a lookup of 2 pages splits the
    # shared node again, B runs (its path locked) and evict(3) frees only A's leaf. Once B
    # unlocks, leaf first and tail page first: B's leaf, then 'be brief', then 'System: '.
    cache = RadixCache(page_size=4)
    a, b = list(b"System: be brief. Hi you"), list(b"System: be brief! Why so")
    cache.insert(a, [0, 1, 2, 3, 4, 5])
    cache.insert(b, cache.match_prefix(b).page_ids + [6, 7])
    cache.match_prefix(list(b"System: be"))
    running = cache.match_prefix(b).last_node
    cache.inc_lock_ref(running)
    assert cache.evict(3) == [5, 4]
    cache.dec_lock_ref(running)
    assert cache.evict(10) == [7, 6, 3, 2, 1, 0]
    assert cache.total_size() == 0
    cache.check()


def test_extra_keys_isolate_trees():
    cache = RadixCache(page_size=1)
    cache.insert([1, 2, 3], [10, 20, 30], extra_key="key1")
    cache.insert([1, 2, 3], [40, 50, 60], extra_key="key2")
    cache.insert([1, 2, 3], [70, 80, 90])
    assert cache.match_prefix([1, 2, 3], "key1").page_ids == [10, 20, 30]
    assert cache.match_prefix([1, 2, 3], "key2").page_ids == [40, 50, 60]
    assert cache.match_prefix([1, 2, 3]).page_ids == [70, 80, 90]
    assert cache.match_prefix([1, 2, 3], "nonexistent").page_ids == []
    cache.check()


def test_reset():
    cache = RadixCache(page_size=1)
    cache.insert([1, 2, 3], [10, 20, 30])
    cache.reset()
    assert cache.total_size() == cache.evictable_size() == cache.protected_size() == 0
    assert cache.num_nodes == 0


@pytest.mark.parametrize("page_size", [1, 2, 4])
def test_random_inserts_match_a_dict_of_prefixes(page_size):
    """Oracle: every whole-page prefix ever inserted -> the page that first stored it."""
    rng = random.Random(page_size)
    cache, oracle, next_page = RadixCache(page_size), {}, 0
    for _ in range(200):
        tokens = [rng.randrange(3) for _ in range(rng.randrange(1, 14))]
        extra = rng.choice([None, "a"])
        pages = list(range(next_page, next_page + len(tokens) // page_size))
        next_page += len(pages)
        known = 0
        while known < len(pages) and (extra, tuple(tokens[: (known + 1) * page_size])) in oracle:
            known += 1
        assert cache.insert(tokens, pages, extra) == known * page_size
        for i, page in enumerate(pages):
            oracle.setdefault((extra, tuple(tokens[: (i + 1) * page_size])), page)
        probe = [rng.randrange(3) for _ in range(rng.randrange(1, 14))]
        want = []
        while (extra, tuple(probe[: (len(want) + 1) * page_size])) in oracle and (
            len(want) + 1
        ) * page_size <= len(probe):
            want.append(oracle[extra, tuple(probe[: (len(want) + 1) * page_size])])
        assert cache.match_prefix(probe, extra).page_ids == want
        assert cache.total_size() == len(oracle)
        cache.check()


def test_the_growth_picture_shows_each_step():
    from pagedkv.viz.radix import plot_radix_growth

    cache = RadixCache(page_size=2)
    cache.insert([1, 2, 3, 4], [0, 1])
    before = copy.deepcopy(cache)
    cache.match_prefix([1, 2, 9, 9])  # splits [1, 2, 3, 4]
    fig = plot_radix_growth([("before", before), ("after the split", cache)])
    texts = [sorted(t.get_text() for t in ax.texts) for ax in fig.axes]
    assert [ax.get_title() for ax in fig.axes] == ["before", "after the split"]
    assert texts == [["1 2 3 4\npages 0, 1", "root"], ["1 2\npage 0", "3 4\npage 1", "root"]]


def test_the_tree_colours_a_state_as_the_pool_heatmap_does():
    """ACTIVE and CACHED boxes and legend in the palette's state colours, readable text."""
    from matplotlib.colors import to_hex

    from pagedkv.core.page import PageState
    from pagedkv.viz.palette import STATE_COLORS
    from pagedkv.viz.radix import plot_radix_tree

    cache = RadixCache(page_size=2)
    cache.insert([1, 2, 3, 4], [0, 1])
    cache.insert([1, 2, 5, 6], [0, 2])  # [1, 2] -> children [3, 4] and [5, 6]
    fig = plot_radix_tree(cache, page_state=lambda p: "CACHED" if p == 1 else "ACTIVE")
    ax = fig.axes[0]
    boxes = {t.get_text(): (to_hex(t.get_bbox_patch().get_facecolor()), t.get_color()) for t in ax.texts}
    active, cached = to_hex(STATE_COLORS[PageState.ACTIVE]), to_hex(STATE_COLORS[PageState.CACHED])
    assert boxes["1 2\npage 0"] == (active, "white") and boxes["5 6\npage 2"] == (active, "white")
    assert boxes["3 4\npage 1"] == (cached, "black")
    key = ax.get_legend()
    legend = {t.get_text(): to_hex(h.get_facecolor()) for t, h in zip(key.get_texts(), key.legend_handles)}
    assert legend == {"ACTIVE": active, "CACHED": cached}


def test_the_tree_picture_fits_its_tree_and_shows_labels_whole():
    """A small tree draws small (at most 360 px tall at 100 dpi, half a 720 px screen), a
    long run of tokens wraps over lines with every character kept, and the legend names only
    the states present."""
    from pagedkv.viz.radix import plot_radix_tree

    cache = RadixCache(page_size=2)
    cache.insert([1, 2, 3, 4, 5, 6], [0, 1, 2])
    cache.match_prefix([1, 2, 9, 9])  # a chain of two nodes under the root
    small = plot_radix_tree(cache)
    assert small.get_size_inches()[1] * small.dpi <= 360
    long_run = list(range(10, 30))  # 20 tokens: "10 11 ... 29", 59 characters
    cache.insert(long_run, list(range(3, 13)))
    fig = plot_radix_tree(cache, page_state=lambda p: "CACHED", width=20)
    ax = fig.axes[0]
    label = next(t.get_text() for t in ax.texts if t.get_text().startswith("10 "))
    lines = label.split("\n")
    text_lines = lines[: next(i for i, line in enumerate(lines) if line.startswith("pages"))]
    assert len(text_lines) == 3 and all(len(line) <= 20 for line in text_lines)
    assert " ".join(text_lines).split() == [str(t) for t in long_run]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["CACHED"]
    assert fig.get_size_inches()[1] > small.get_size_inches()[1]  # taller boxes, taller picture


def _locked_path() -> RadixCache:
    """Notebook 09's locked path: a chain of three nodes a running request holds, beside one
    unlocked leaf."""
    tree = RadixCache(page_size=4)
    tree.insert(list(range(24)), [0, 1, 2, 3, 4, 5])
    tree.match_prefix(list(range(8)) + [99] * 16)  # splits after 8 tokens
    tree.insert(list(range(16)) + [77] * 8, [0, 1, 2, 3, 6, 7])  # splits after 16
    tree.inc_lock_ref(tree.match_prefix(list(range(16)) + [77] * 8).last_node)
    return tree


def test_a_locked_path_draws_compact_boxes_and_little_white_between_them():
    """Notebook 09's locked path: a chain of three locked nodes. "locked" follows the page ids
    on their line (a box of two lines, not three), and the picture is the boxes, the root and
    the title with at most 50 px of white per level (it was 530 px tall, 228 px of it white)."""
    from pagedkv.viz.radix import plot_radix_tree

    tree = _locked_path()
    assert tree.evict(3) == [5, 4]  # the unlocked leaf goes; the locked path stays
    fig = plot_radix_tree(tree, title="locked")
    fig.canvas.draw()
    renderer, ax = fig.canvas.get_renderer(), fig.axes[0]
    assert {t.get_text() for t in ax.texts} == {
        "root",
        "0 1 2 3 4 5 6 7\npages 0, 1 · locked",
        "8 9 10 11 12 13 14 15\npages 2, 3 · locked",
        "77 77 77 77 77 77 77\n77\npages 6, 7 · locked",
    }
    drawn = sum(t.get_bbox_patch().get_window_extent(renderer).height for t in ax.texts)
    drawn += ax.title.get_window_extent(renderer).height
    levels = 4  # the root and three nodes
    assert fig.bbox.height - drawn <= 50 * levels, (fig.bbox.height, drawn)


def test_a_locked_path_drawn_across_is_one_short_row_of_boxes_side_by_side():
    """Notebook 09's locked path drawn `across`: the root and three boxes in one row, each box
    right of the one before it with no overlap, in a picture at least five times as wide as it
    is tall (drawn upright it was about as tall as wide, and shown stretched to a cell's width it
    filled more than a 720 px screen)."""
    from pagedkv.viz.radix import plot_radix_tree

    tree = _locked_path()
    tree.evict(3)
    fig = plot_radix_tree(tree, title="locked", across=True)
    fig.canvas.draw()
    renderer, ax = fig.canvas.get_renderer(), fig.axes[0]
    boxes = sorted((t.get_bbox_patch().get_window_extent(renderer) for t in ax.texts), key=lambda b: b.x0)
    assert len(boxes) == 4  # the root and three nodes
    assert all(left.x1 < right.x0 for left, right in zip(boxes, boxes[1:]))  # side by side
    assert all(b.y0 < boxes[0].y1 and boxes[0].y0 < b.y1 for b in boxes)  # one row
    assert all(0 <= b.x0 and b.x1 <= fig.bbox.width and 0 <= b.y0 and b.y1 <= fig.bbox.height for b in boxes)
    assert fig.bbox.width >= 5 * fig.bbox.height, (fig.bbox.width, fig.bbox.height)
    with pytest.raises(ValueError, match="page_state needs across=False"):
        plot_radix_tree(tree, page_state=lambda p: "CACHED", across=True)


def test_a_newline_in_a_node_key_is_drawn_as_backslash_n_not_a_space():
    """A node's tokens "a tree.\\n" are drawn as 'a tree.\\n' (the escape shown), so a reader
    can tell a newline from a trailing space, as in notebook 09."""
    from pagedkv.viz.radix import plot_radix_tree

    chars = "a tree.\n"
    cache = RadixCache(page_size=4)
    cache.insert([ord(c) for c in chars], [0, 1])
    fig = plot_radix_tree(cache, decode=lambda ids: "".join(map(chr, ids)))
    (label,) = [t.get_text() for t in fig.axes[0].texts if t.get_text().startswith("'a")]
    assert label.split("\n")[0] == "'a tree.\\n'"


def test_a_box_lists_three_or_more_pages_in_a_row_as_a_range():
    """By hand: pages 4, 5, 6 in a row read "pages 4-6"; 0, 2, 3 (a gap) and a pair stay listed."""
    from pagedkv.viz.radix import plot_radix_tree

    cache = RadixCache(page_size=1)
    cache.insert([1, 2, 3], [4, 5, 6])
    cache.insert([7, 8, 9], [0, 2, 3])
    cache.insert([5, 6], [8, 9])
    texts = sorted(t.get_text() for t in plot_radix_tree(cache).axes[0].texts)
    assert texts == ["1 2 3\npages 4-6", "5 6\npages 8, 9", "7 8 9\npages 0, 2, 3", "root"]
