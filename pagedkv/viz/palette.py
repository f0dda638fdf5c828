"""Colours shared by every pagedkv picture, chosen to stay readable with colour blindness.

- Page states use three Okabe–Ito colours (light grey FREE, blue ACTIVE, orange CACHED),
  the palette designed for viewers with any common colour-vision deficiency.
- Sequences use twelve colours from Paul Tol's qualitative palettes (also colour-blind
  safe, and away from the state colours), picked so that no two of them look alike (at
  least 30 apart in CIELAB, tests/test_colors.py), assigned in order of first appearance by a
  `SequencePalette`: pass the same palette to every plot and a sequence keeps its colour
  in the heatmaps, the block-table view and the dashboard. A sequence forked at run time,
  `stem.k` (a beam search's `beam.3`), takes the colour k places after `stem.0`'s.
- Continuous quantities (occupancy, ref count) use cividis / viridis, which are perceptually
  uniform and remain ordered in greyscale. The LRU order shades the CACHED orange (light:
  evicted last, full orange: evicted next), so every picture keeps one colour per state.

Matplotlib's own colour maps are used as they are; nothing here draws. Leaves out: choosing
another palette (every picture would have to agree on it).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Hashable, Iterable
from typing import Any

from matplotlib.colors import LinearSegmentedColormap, to_rgba

from pagedkv.core.page import PageState

STATE_COLORS = {  # page state -> Okabe–Ito colour
    PageState.FREE: "#DDDDDD",
    PageState.ACTIVE: "#0072B2",
    PageState.CACHED: "#E69F00",
}
VICTIM_COLOR = "#D55E00"  # Okabe–Ito vermillion: the next page to be evicted, COW copies
# an evicted page (its content gone): light grey, cross-hatched, its label on a white box; one
# look in every figure (notebook 09's page chains, notebook 08's LRU strip), never CACHED orange
EVICTED_FILL, EVICTED_HATCH = "#C8C8C8", "xx"
HIT_COLOR = "#009E73"  # Okabe–Ito bluish green: pages reused by a prefix hit
NO_OWNER_COLOR = STATE_COLORS[PageState.FREE]  # the owner view's FREE pages: grey, as in the state view
# the owner view's CACHED pages: no holder either, but full and hashed. Orange, as in the
# state and LRU views, so no colour names two states across views
CACHED_NO_OWNER_COLOR = STATE_COLORS[PageState.CACHED]
SEQUENCE_COLORS = (  # twelve colours from Paul Tol's colour-blind-safe palettes
    "#CC6677",  # muted: rose
    "#332288",  # muted: indigo
    "#44AA99",  # muted: teal (not sand: too close to CACHED orange on a projector)
    "#666633",  # dark: olive (not green: beside teal, the 3rd and 4th requests read as two greens)
    "#88CCEE",  # muted: cyan
    "#225555",  # dark: teal
    "#AA4499",  # muted: purple
    "#117733",  # muted: green
    "#663333",  # dark: brown
    "#BBCC33",  # light: pear
    "#004488",  # high-contrast: blue
    "#EE3377",  # vibrant: magenta
)
# The serving run's four systems (`bench serving`, notebook 11's section 4). A system is no
# request: a picture of requests shown near them takes its colours from REQUEST_COLORS_BESIDE_SYSTEMS
# (oracle is purple, not indigo: indigo read as the token-state blue of the bucket panel)
SYSTEM_COLORS = {"max": "#CC6677", "pow2": "#666633", "oracle": "#AA4499", "paged": "#117733"}
# The serving figure's memory buckets (the paper's Fig. 2), in the order of serving.CATEGORIES:
# token states, reserved, internal and external fragmentation, free
SERVING_BUCKET_COLORS = (
    STATE_COLORS[PageState.ACTIVE],
    SEQUENCE_COLORS[4],
    STATE_COLORS[PageState.CACHED],
    VICTIM_COLOR,
    STATE_COLORS[PageState.FREE],
)
# one colour per request: none a system's or a bucket's, nor close to one (the navy #004488 read
# as the token-state blue), so no request reads as a system or a bucket of the figure above it
REQUEST_COLORS_BESIDE_SYSTEMS = ("#44AA99", "#663333", "#BBCC33", "#225555", "#EE3377")
# Your own requests (ids "yours1", ...) and your own forks (ids "<parent>.f1", ...): colours
# far from CACHED orange (no pear or rose) and from ACTIVE blue (no cyan or blue: a learner read
# yours1's light blue as the ACTIVE of the legend above it), the first one no other sequence of
# the picture has yet; the bright ones first, so that they stand out from a scenario's first
# colours (a fork of yours next to sample.2's teal and sample.3's olive takes purple or magenta)
YOURS_COLORS = ("#AA4499", "#EE3377", "#117733", "#663333", "#225555", "#332288")
OCCUPANCY_CMAP = "cividis"
# Notebook 06's benchmark figures: each colour means one thing in all of them. The kinds of slot
# (memory figure) keep blue, light blue, orange, pink and grey; the chain figure's systems take
# colours near none of those (a learner read 11's rose `max` beside them as "external"); every
# other series takes a colour none of those has
BENCH_SYSTEM_COLORS = {"max": "#663333", "pow2": "#666633", "oracle": "#999933", "paged": "#117733"}
BENCH_SLOT_COLORS = ("#0072B2", "#56B4E9", "#E69F00", "#CC79A7", "#DDDDDD")  # memory.CATEGORIES' order
BENCH_MODE_COLORS = {"parallel sampling": "#EE3377", "beam search": "#44AA99"}  # magenta, teal: no system's
BENCH_SERIES_COLOR = "#555555"  # dark grey: a figure's measured series that is no kind, mode or system
BENCH_ACTIVE_COLOR = "#332288"  # indigo: the scale figure's share of pages ACTIVE
BENCH_LOCK_COLORS = {"coarse": "#0072B2", "rwlock": "#E69F00"}  # bench threads: the two lock designs
REF_COUNT_CMAP = "viridis"
# CACHED pages in the LRU view: 0.0 (a light tint of CACHED orange) = evicted last, 1.0 (the
# CACHED orange itself) = evicted next; each cell also prints its rank (#1, #2, ...)
LRU_CMAP = LinearSegmentedColormap.from_list("pagedkv_lru", ["#FBE6BC", STATE_COLORS[PageState.CACHED]])


class SequencePalette:
    """Sequence id -> colour, fixed at first sight (cycles after twelve sequences)."""

    def __init__(self) -> None:
        self._colors: dict[Hashable, str] = {}  # seq id -> hex colour, in order of first sight

    def color(self, seq_id: Hashable) -> str:
        if seq_id not in self._colors:
            known = fork_color(seq_id, self._colors) or yours_color(seq_id, self._colors)
            self._colors[seq_id] = known or self._next_unused()
        return self._colors[seq_id]

    def _next_unused(self) -> str:
        """The next colour in order that no sequence has (one of yours may have taken it),
        or, once all twelve are taken, the next in order."""
        used, start = set(self._colors.values()), len(self._colors)
        order = [SEQUENCE_COLORS[(start + k) % len(SEQUENCE_COLORS)] for k in range(len(SEQUENCE_COLORS))]
        return next((color for color in order if color not in used), order[0])

    def rgba(self, seq_id: Hashable) -> tuple[float, float, float, float]:
        return to_rgba(self.color(seq_id))

    def text_color(self, seq_id: Hashable) -> str:
        """Black or white, whichever reads better on the sequence's colour."""
        r, g, b, _ = self.rgba(seq_id)
        return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"

    def clear(self) -> None:
        self._colors.clear()

    def restart(self, steps: Iterable[Any] = ()) -> SequencePalette:
        """Forget every colour, then colour the sequences of a scenario's `steps` (its
        actions) in the order they first appear there: every widget built on the same
        scenario (the dashboard, a prediction) then gives a request the same colour.
        Example: restart(ScenarioRun("walkthrough").steps) -> request_A first, request_B second."""
        self._colors.clear()
        for action in steps:
            for seq_id in (action.seq_id, action.parent, *action.seq_ids):
                if seq_id is not None:
                    self.color(seq_id)
        return self

    def items(self) -> list[tuple[Hashable, str]]:
        """(sequence id, colour) pairs, in the order the ids were first coloured."""
        return list(self._colors.items())

    def __len__(self) -> int:
        return len(self._colors)

    def __repr__(self) -> str:
        return f"SequencePalette({dict(self._colors)})"


class SharedPalette(SequencePalette):
    """The palette of every picture not given one (`DEFAULT_PALETTE`). A request of a named
    scenario gets the colour a dashboard or a prediction playing that scenario gives it (its
    place in the scenario's order, `SequencePalette.restart`), whatever was drawn before it
    in the notebook; any other id gets the next colour in order of first sight."""

    def __init__(self) -> None:
        super().__init__()
        self._others = 0  # ids of no scenario coloured so far

    def color(self, seq_id: Hashable) -> str:
        if seq_id not in self._colors:
            known = scenario_colors().get(seq_id) or fork_color(seq_id, scenario_colors())
            if known is None:
                known = SEQUENCE_COLORS[self._others % len(SEQUENCE_COLORS)]
                self._others += 1
            self._colors[seq_id] = known
        return self._colors[seq_id]

    def clear(self) -> None:
        super().clear()
        self._others = 0

    def restart(self, steps: Iterable[Any] = ()) -> SequencePalette:
        self._others = 0
        return super().restart(steps)


def _yours(seq_id: Hashable) -> bool:
    """An id you made on a dashboard: a request "yours<n>" or a fork "<parent>.f<n>"."""
    return str(seq_id).startswith("yours") or re.fullmatch(r".+\.f\d+", str(seq_id)) is not None


def yours_color(seq_id: Hashable, known: dict[Hashable, str]) -> str | None:
    """The colour of one of your own requests or forks (an id "yours<n>" or "<parent>.f<n>"),
    or None for any other id: the first of YOURS_COLORS that `known` does not use yet (cycling
    once all are used), so it is never the sand or pear that reads like CACHED orange.
    Example: yours_color("yours1", {"request_A": "#CC6677"}) -> "#AA4499"."""
    if not _yours(seq_id):
        return None
    used = set(known.values())
    free = [color for color in YOURS_COLORS if color not in used]
    mine = sum(_yours(other) for other in known)
    return free[0] if free else YOURS_COLORS[mine % len(YOURS_COLORS)]


def fork_color(seq_id: Hashable, known: dict[Hashable, str]) -> str | None:
    """The colour of a sequence a scenario forks at run time, named `stem.k` after a `stem.0`
    that `known` colours: the colour k places after `stem.0`'s, so `beam.1` never takes
    `beam.0`'s colour and has the same one in every picture, whatever was drawn first.
    None for any other id. Example: {"beam.0": SEQUENCE_COLORS[0]} -> "beam.5": SEQUENCE_COLORS[5]."""
    stem, dot, k = str(seq_id).rpartition(".")
    first = known.get(f"{stem}.0") if dot and k.isdigit() else None
    if first is None:
        return None
    return SEQUENCE_COLORS[(SEQUENCE_COLORS.index(first) + int(k)) % len(SEQUENCE_COLORS)]


@functools.lru_cache(maxsize=1)
def scenario_colors() -> dict[Hashable, str]:
    """Sequence id -> colour for the requests of every named scenario, as a palette restarted
    on that scenario gives them (the first scenario naming an id decides; none is named twice
    with two colours, which tests/test_colors.py checks)."""
    from pagedkv.scenarios import SCENARIOS  # lazy: a plain plot does not need the scenarios

    colors: dict[Hashable, str] = {}
    for scenario in SCENARIOS.values():
        for seq_id, color in SequencePalette().restart(scenario.steps()).items():
            colors.setdefault(seq_id, color)
    return colors


DEFAULT_PALETTE = SharedPalette()  # shared by plots that are not given a palette

EVENT_COLORS = {  # event-log entry kind -> text colour (Okabe–Ito, dark enough on white)
    "allocate": "#0072B2",
    "prefix_hit": "#007A5A",
    "fork": "#007A5A",
    "evict": "#C2410C",
    "cow": "#A23B72",
    "cache": "#9A6700",
    "free": "#555555",
    "reset": "#555555",
    "preempt": "#B91C1C",
    "resume": "#1D4ED8",
    "abort": "#7E22CE",
    "append": "#111111",
    "note": "#444444",
    "refused": "#B91C1C",
}
