"""One colour per request everywhere: every picture that draws requests uses the shared
palette, and gives a scenario's request the colour the dashboard gives it.

Oracle: `SequencePalette().restart(run.steps)`, the palette a Dashboard or a PredictStep
playing the scenario uses. Each picture is drawn with its default palette, after another
scenario was drawn first (as in a notebook), and the colours it paints for requests are read
back from the figure's patches and images, the PNG's pixels or the HTML's styles.
"""

from __future__ import annotations

import ast
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
from matplotlib import rcParams
from matplotlib.colors import to_hex, to_rgba
from matplotlib.image import AxesImage
from matplotlib.patches import Patch
from PIL import Image

from pagedkv.scenarios import SCENARIOS, ScenarioRun
from pagedkv.scenarios.text import token_ids_of
from pagedkv.viz import (
    Dashboard,
    PoolHeatmap,
    block_table_html,
    plot_block_tables,
    plot_paged_vs_contiguous,
    plot_pool,
    plot_slots,
    plot_token_pages,
    token_pages_html,
)
from pagedkv.viz.palette import DEFAULT_PALETTE, SEQUENCE_COLORS, SequencePalette, scenario_colors

# Colours a request could wrongly be drawn in: the palette's and matplotlib's default cycle.
CANDIDATES = {c.lower() for c in SEQUENCE_COLORS} | {to_hex(c["color"]) for c in rcParams["axes.prop_cycle"]}


def _ran(name: str, steps: int = 8) -> ScenarioRun:
    run = ScenarioRun(name)
    for _ in range(steps):
        if run.can_step:
            run.step()
    return run


def _expected(run: ScenarioRun, seq_ids) -> set[str]:
    palette = SequencePalette().restart(run.steps)
    return {palette.color(s).lower() for s in seq_ids}


def _figure_colors(fig) -> set[str]:
    """Request-like colours painted in a figure: patch faces and image pixels."""
    found = set()
    for patch in fig.findobj(Patch):
        if patch.get_fill() and patch.get_facecolor()[3] > 0:  # an outline paints no face
            found.add(to_hex(patch.get_facecolor()))
    for image in fig.findobj(AxesImage):
        pixels = np.asarray(image.get_array())
        if pixels.ndim == 3:
            for rgba in np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0):
                found.add(to_hex(tuple(float(v) for v in rgba)))
    return found & CANDIDATES


@pytest.fixture(autouse=True)
def _another_scenario_drawn_first():
    DEFAULT_PALETTE.clear()
    plot_block_tables(_ran("fill", 3).seqs.snapshot())  # colours fill's requests first
    yield
    DEFAULT_PALETTE.clear()


def test_no_request_id_has_two_colours_across_scenarios():
    for name in SCENARIOS:
        palette = SequencePalette().restart(SCENARIOS[name].steps())
        for seq_id, color in palette.items():
            assert scenario_colors()[seq_id] == color, (name, seq_id)


@pytest.mark.parametrize("name", ["walkthrough", "prefix", "eviction", "parallel", "preempt"])
def test_figures_colour_each_request_as_the_dashboard_does(name):
    run = _ran(name)
    snap = run.seqs.snapshot()
    live = set(snap.seq_ids)
    assert live, name
    want = _expected(run, live)
    for fig in (
        plot_block_tables(snap, events=run.events),
        plot_token_pages(snap, token_ids_of(run.seqs)),
        plot_slots(snap),
    ):
        assert _figure_colors(fig) == want, (name, fig)
    for html in (
        block_table_html(snap, None, run.events, token_ids=token_ids_of(run.seqs)),
        token_pages_html(snap, token_ids_of(run.seqs)),
    ):
        assert {c.lower() for c in re.findall(r"#[0-9A-Fa-f]{6}", html)} & CANDIDATES == want, name


def test_the_paged_vs_contiguous_figure_colours_requests_as_the_dashboard_does():
    fill = ScenarioRun("fill")
    while not fill.done:
        fill.step()
    DEFAULT_PALETTE.clear()
    plot_block_tables(_ran("walkthrough").seqs.snapshot())  # another scenario first
    fig = plot_paged_vs_contiguous(fill.snapshots, policy="max", step=10)
    assert _figure_colors(fig) == _expected(fill, fill.snapshots[10].seq_ids)


def _owner_pixels(heatmap: PoolHeatmap, snap) -> dict[str, set[str]]:
    image = np.asarray(Image.open(io.BytesIO(heatmap.png())).convert("RGB"))
    seen: dict[str, set[str]] = {}
    for page, owner in enumerate(snap.owner.tolist()):
        if owner < 0:
            continue
        x0, y0, x1, y1 = heatmap.cell_box("owner", page)
        rgb = image[(y0 + y1) // 2, x0 + 2] / 255
        seen.setdefault(str(snap.seq_ids[owner]), set()).add(to_hex(tuple(rgb)))
    return seen


@pytest.mark.parametrize("name", ["walkthrough", "eviction"])
def test_heatmaps_dashboard_and_prediction_agree_with_the_palette(name):
    run = _ran(name)
    snap = run.seqs.snapshot()
    palette = SequencePalette().restart(run.steps)
    want = {str(s): {to_hex(to_rgba(palette.color(s)))} for s in snap.seq_ids}
    pixels = _owner_pixels(plot_pool(snap, views=("owner",)), snap)
    assert pixels and all(pixels[s] == want[s] for s in pixels)
    dash = Dashboard(name)
    for _ in range(8):
        dash.step()
    assert {str(s): dash.palette.color(s).lower() for s in snap.seq_ids} == {
        k: next(iter(v)) for k, v in want.items()
    }
    main = dash._maps()[0]  # noqa: SLF001 - the heatmap the dashboard shows
    pixels = _owner_pixels(main, snap)
    assert pixels and all(pixels[s] == want[s] for s in pixels)


def test_beams_forked_at_run_time_each_keep_one_colour_of_their_own_everywhere():
    """beam.1 and beam.5 are forked by the model's choices, not named by the scenario's steps:
    each still gets a colour no other beam has, the same in a notebook's figure (drawn after
    another scenario) as on a dashboard that stepped there or jumped there."""
    beam = ScenarioRun("beam")
    while not beam.done:
        beam.step()
    snap = beam.seqs.snapshot()
    assert len(snap.seq_ids) == 3
    drawn = _figure_colors(plot_block_tables(snap, events=beam.events))
    stepped, jumped = Dashboard("beam"), Dashboard("beam")
    while stepped.run.can_step:
        stepped.step()
    jumped.goto(len(jumped.run.steps))
    for dash in (stepped, jumped):
        pixels = _owner_pixels(dash._maps()[0], snap)  # noqa: SLF001 - the heatmap it shows
        shown = {s: pixels[str(s)] for s in snap.seq_ids}
        assert all(len(c) == 1 for c in shown.values()), shown
        assert {next(iter(c)) for c in shown.values()} == drawn and len(drawn) == 3, (shown, drawn)


# ---- the notebooks' own plots -------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").rglob("*.ipynb"))
DRAWS = {"plot", "bar", "barh", "scatter", "fill_between", "stackplot", "hist", "pie", "errorbar", "stairs"}


def _uncoloured_draws(source: str) -> list[str]:
    """Matplotlib drawing calls in a cell that pass no colour: they take the default cycle."""
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    found = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in DRAWS:
            if not {k.arg for k in node.keywords} & {"color", "c", "colors", "facecolor"}:
                found.append(ast.unparse(node)[:80])
    return found


def test_the_draw_finder_finds_a_plot_in_the_default_colours():
    assert _uncoloured_draws("ax.plot(x, y)\nax.bar(x, y, color=c)\nrun.step()") == ["ax.plot(x, y)"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_notebook_draws_with_matplotlibs_default_colours(path):
    """A notebook draws requests through pagedkv.viz (the shared palette), never with a
    bare matplotlib call, whose colours come from the default cycle."""
    cells = json.loads(path.read_text())["cells"]
    found = [d for c in cells if c["cell_type"] == "code" for d in _uncoloured_draws("".join(c["source"]))]
    assert not found, found


# ---- colours that look different -------------------------------------------------------------

MIN_DELTA_E = 30.0  # CIE76 distance in CIELAB; the old rose and wine (beam.0, beam.5) were 28.6


def _lab(hex_colors) -> np.ndarray:
    """sRGB hex colours -> CIELAB (D65 white), by the textbook formulas."""
    rgb = np.array([to_rgba(c)[:3] for c in hex_colors])
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    to_xyz = np.array(
        [
            [0.4124564, 0.3575761, 0.1804375],
            [0.2126729, 0.7151522, 0.0721750],
            [0.0193339, 0.1191920, 0.9503041],
        ]
    )
    xyz = linear @ to_xyz.T / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.stack([116 * f[:, 1] - 16, 500 * (f[:, 0] - f[:, 1]), 200 * (f[:, 1] - f[:, 2])], axis=1)


def _closest_pair(colors: dict) -> tuple[float, tuple]:
    """The smallest CIE76 ΔE between two of `colors` ({name: hex}) and the two names."""
    names, lab = list(colors), _lab(list(colors.values()))
    gaps = np.linalg.norm(lab[:, None] - lab[None], axis=-1)
    np.fill_diagonal(gaps, np.inf)
    i, j = np.unravel_index(np.argmin(gaps), gaps.shape)
    return float(gaps[i, j]), (names[i], names[j])


def test_the_oracle_measures_known_distances():
    assert np.allclose(_lab(["#FFFFFF", "#000000"]), [[100, 0, 0], [0, 0, 0]], atol=0.01)
    assert abs(_closest_pair({"rose": "#CC6677", "wine": "#882255"})[0] - 28.6) < 0.1


def test_any_twelve_requests_of_one_run_get_clearly_different_colours():
    palette = SequencePalette()
    colors = {f"request {k}": palette.color(f"request {k}") for k in range(12)}
    gap, pair = _closest_pair(colors)
    assert gap >= MIN_DELTA_E, (gap, pair)


def test_notebook_04s_beams_get_clearly_different_colours():
    """04 draws its beam run with the shared palette (plot_block_tables(snap, events=...)):
    every beam the run names, forked at run time as beam.k, against every other."""
    run = ScenarioRun("beam")
    beams = set()
    while run.can_step:
        beams |= {e.seq_id for e in run.step().events if e.seq_id is not None}
    assert len(beams) >= 6  # beam.0 ... beam.5
    colors = {b: DEFAULT_PALETTE.color(b) for b in sorted(beams)}
    gap, pair = _closest_pair(colors)
    assert gap >= MIN_DELTA_E, (gap, pair)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_requests_of_every_scenario_get_clearly_different_colours(name):
    run = ScenarioRun(name)
    seq_ids = set()
    while run.can_step:
        seq_ids |= {e.seq_id for e in run.step().events if e.seq_id is not None}
    palette = SequencePalette().restart(run.steps)  # a dashboard's palette for this scenario
    colors = {s: palette.color(s) for s in seq_ids}
    if len(colors) > 1:
        gap, pair = _closest_pair(colors)
        assert gap >= MIN_DELTA_E, (gap, pair)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_your_request_and_your_fork_never_share_a_colour(name):
    """On a dashboard you add a request (yours1, which takes the first of YOURS_COLORS no
    sequence has) and then fork a scenario's sequence (`<id>.f1`, the next colour in order):
    the fork took yours1's cyan when the scenario had four sequences before it. Every
    sequence of the picture against every other, by the colour-distance oracle."""
    run = ScenarioRun(name)
    palette = SequencePalette().restart(run.steps)
    first = next(iter(dict(palette.items())))
    for seq_id in ("yours1", f"{first}.f1", "yours2", f"{first}.f2"):
        palette.color(seq_id)
    colors = dict(palette.items())
    if len(colors) <= len(SEQUENCE_COLORS):
        assert len(set(colors.values())) == len(colors), colors
        gap, pair = _closest_pair(colors)
        assert gap >= MIN_DELTA_E, (gap, pair)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_your_request_is_never_a_blue_like_the_active_pages(name):
    """05b's learner added a request on the `preempt` dashboard: yours1 took a light cyan that
    read as the ACTIVE blue of the page-state legend just above the owner map. Now yours1, in
    every scenario, is twice the colour-distance threshold from ACTIVE blue."""
    from pagedkv.core.page import PageState
    from pagedkv.viz.palette import STATE_COLORS

    palette = SequencePalette().restart(ScenarioRun(name).steps)
    gap, _ = _closest_pair({"yours1": palette.color("yours1"), "ACTIVE": STATE_COLORS[PageState.ACTIVE]})
    assert gap >= 1.8 * MIN_DELTA_E, (name, palette.color("yours1"), gap)


def test_a_fork_of_yours_after_a_fork_undone_stands_out_from_the_blue_greens():
    """04's dashboard: you fork sample.0, press Back, then fork sample.1 at step 5. The
    second fork once took dark teal, hard to tell from sample.2's teal and sample.3's green;
    now it is far from both (and from every other colour of the picture)."""
    palette = SequencePalette().restart(ScenarioRun("parallel").steps)
    for seq_id in ("sample.0.f1", "sample.1.f1"):  # Back keeps a colour once given
        palette.color(seq_id)
    colors = dict(palette.items())
    gap, pair = _closest_pair(colors)
    assert gap >= MIN_DELTA_E, (gap, pair)
    for other in ("sample.2", "sample.3"):
        near, _ = _closest_pair({"fork": colors["sample.1.f1"], other: colors[other]})
        assert near >= 2 * MIN_DELTA_E, (other, near)


def _seen_by(hex_colors, deficiency: str) -> list[str]:
    """The colours as a viewer with full deuteranopia or protanopia sees them (Machado, Oliveira
    and Fernandes 2009, severity 1, applied in linear sRGB)."""
    matrix = {
        "deuteranopia": [
            [0.367322, 0.860646, -0.227968],
            [0.280085, 0.672501, 0.047413],
            [-0.01182, 0.04294, 0.968881],
        ],
        "protanopia": [
            [0.152286, 1.052583, -0.204868],
            [0.114503, 0.786281, 0.099216],
            [-0.003882, -0.048116, 1.051998],
        ],
    }[deficiency]
    rgb = np.array([to_rgba(c)[:3] for c in hex_colors])
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    seen = np.clip(linear @ np.array(matrix).T, 0, 1)
    srgb = np.where(seen <= 0.0031308, 12.92 * seen, 1.055 * seen ** (1 / 2.4) - 0.055)
    return [to_hex(tuple(c)) for c in srgb]


def test_doc_c_and_doc_d_side_by_side_are_not_two_greens():
    """Notebook 03 draws doc_C (teal) beside doc_D, page 1 next to page 0; doc_D was a dark
    green, and a learner read the two as two greens. Their hues (CIELAB) now lie far apart, and
    they stay clearly different for a viewer with deuteranopia or protanopia."""
    colors = [scenario_colors()["doc_C"], scenario_colors()["doc_D"]]
    lab = _lab(colors)
    hues = np.degrees(np.arctan2(lab[:, 2], lab[:, 1]))
    apart = abs(hues[0] - hues[1]) % 360
    assert min(apart, 360 - apart) >= 60, colors
    for deficiency in ("deuteranopia", "protanopia"):
        gap, _ = _closest_pair(dict(zip("CD", _seen_by(colors, deficiency))))
        assert gap >= MIN_DELTA_E, (deficiency, gap)


def test_the_serving_systems_and_the_requests_beside_them_never_share_a_colour():
    # Notebook 11 draws the serving systems and, a screen later, the buddy arena's requests.
    from pagedkv.viz.palette import REQUEST_COLORS_BESIDE_SYSTEMS, SYSTEM_COLORS

    assert set(SYSTEM_COLORS.values()) <= set(SEQUENCE_COLORS)
    assert set(REQUEST_COLORS_BESIDE_SYSTEMS) <= set(SEQUENCE_COLORS)
    assert not set(REQUEST_COLORS_BESIDE_SYSTEMS) & set(SYSTEM_COLORS.values())
    assert _closest_pair(dict(enumerate(REQUEST_COLORS_BESIDE_SYSTEMS)))[0] >= MIN_DELTA_E


def test_the_requests_beside_the_serving_figure_take_no_colour_near_one_of_its_buckets():
    # The buddy arena's requests A, B, C are drawn a screen after the serving figure's buckets:
    # a learner read B (light blue) as "reserved" and C (navy) as "token states".
    from pagedkv.viz.palette import REQUEST_COLORS_BESIDE_SYSTEMS, SERVING_BUCKET_COLORS, SYSTEM_COLORS

    others = [*SERVING_BUCKET_COLORS, *SYSTEM_COLORS.values()]
    for request in REQUEST_COLORS_BESIDE_SYSTEMS:
        gaps = np.linalg.norm(_lab(others) - _lab([request])[0], axis=1)
        assert gaps.min() >= MIN_DELTA_E, (request, others[int(gaps.argmin())])


def test_no_serving_system_is_drawn_near_a_bucket_colour():
    # A learner read oracle's indigo line (#332288, 48.5 from the "token states" blue in CIELAB)
    # as linked to that bucket beside it: a system keeps at least 50 from every bucket.
    from pagedkv.viz.palette import SERVING_BUCKET_COLORS, SYSTEM_COLORS

    for system, colour in SYSTEM_COLORS.items():
        gaps = np.linalg.norm(_lab(list(SERVING_BUCKET_COLORS)) - _lab([colour])[0], axis=1)
        assert gaps.min() >= 50, (system, SERVING_BUCKET_COLORS[int(gaps.argmin())])
