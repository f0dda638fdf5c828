"""The buddy arena picture of notebook 11: every block part where the allocator put it, its
labels the slot counts worked out here by hand, and text of at least 12 px in a notebook."""

from __future__ import annotations

from matplotlib.colors import to_rgb
from matplotlib.patches import Rectangle

from pagedkv.labs.contiguous import ContiguousKVCache
from pagedkv.viz.buddy import plot_buddy_arena
from tests.test_figure_text import MIN_PX, shown_px


def _moments():
    arena = ContiguousKVCache(2048, "oracle", allocator="buddy")
    for req, final_len in (("A", 600), ("B", 300), ("C", 100)):
        arena.add(req, prompt_len=final_len // 2, final_len=final_len)
    before = ("before", arena.accounting().reservations, arena.free_blocks())
    arena.free("B")
    return [before, ("after", arena.accounting().reservations, arena.free_blocks())]


def test_the_bars_cover_the_arena_and_label_what_was_asked_rounded_and_free():
    fig = plot_buddy_arena(_moments(), 2048)
    first, second = fig.axes
    # by hand: A 600 in 1,024, B 300 in 512, C 100 in 128, the rest free in blocks of 128 and 256
    spans = [(p.get_x(), p.get_width()) for p in first.patches if isinstance(p, Rectangle)]
    assert sorted(spans) == [
        (0, 600),
        (600, 424),
        (1024, 300),
        (1324, 212),
        (1536, 100),
        (1636, 28),
        (1664, 128),
        (1792, 256),
    ]
    assert sum(width for _, width in spans) == 2048
    labels = [t.get_text() for t in first.texts]
    assert labels == ["A 600", "424", "B 300", "212", "C\n100", "28", "free\n128", "free 256"]
    assert [t.get_text() for t in second.texts] == [
        "A 600",
        "424",
        "C\n100",
        "28",
        "free 512",
        "free\n128",
        "free 256",
    ]
    # C's 28 rounded-away slots are too thin for a label inside: a callout under the bar names them
    for ax in (first, second):
        (callout,) = [t for t in ax.texts if t.get_text() == "28"]
        assert callout.get_position()[1] < -0.4 and callout.xy == (1636 + 28 / 2, -0.4)
    sizes = [px for px, _ in shown_px(fig)]
    assert min(sizes) >= MIN_PX, sizes


def test_each_request_keeps_one_request_colour_that_no_serving_system_has():
    # The serving figure of section 4 colours the systems; the arena's requests must not be
    # read as systems: their colours come from the request palette, none a system's.
    from pagedkv.viz.palette import SEQUENCE_COLORS, SYSTEM_COLORS

    fig = plot_buddy_arena(_moments(), 2048)
    by_request: dict[str, set] = {}
    for ax in fig.axes:
        for p in ax.patches:
            if isinstance(p, Rectangle) and p.get_facecolor()[:3] != (1.0, 1.0, 1.0):
                x = p.get_x()
                name = "A" if x < 1024 else "B" if x < 1536 else "C"
                by_request.setdefault(name, set()).add(tuple(round(c, 3) for c in p.get_facecolor()[:3]))
    assert sorted(by_request) == ["A", "B", "C"]
    assert all(len(colours) == 1 for colours in by_request.values())  # hatched part: same hue
    used = {next(iter(c)) for c in by_request.values()}
    assert len(used) == 3
    as_rgb = {tuple(round(v, 3) for v in to_rgb(c)) for c in SEQUENCE_COLORS}
    systems = {tuple(round(v, 3) for v in to_rgb(c)) for c in SYSTEM_COLORS.values()}
    assert used <= as_rgb and not used & systems
