"""The lifecycle table against what the pool does.

Oracle: the pool's snapshots. A seeded random run of add / append / fork / free / reset is
snapshotted after every operation; every page's state change between consecutive snapshots
must be a transition of `pagedkv.core.observe.lifecycle.TRANSITIONS`, and `step_transitions` (read from
events) must name a transition for each change it sees. The diagram must draw every row.
"""

from __future__ import annotations

import numpy as np
import pytest

from pagedkv import OutOfPagesError, PageState
from pagedkv.core.observe.lifecycle import ALLOWED, BY_NAME, TRANSITIONS, is_allowed, step_transitions
from pagedkv.scenarios import ScenarioRun
from pagedkv.viz import glossary_markdown, plot_lifecycle

from .pools import make


def _random_run(seed: int, num_pages: int = 8, page_size: int = 2, steps: int = 400):
    """Yield (before, after, events, op) for every operation of a random run."""
    rng = np.random.default_rng(seed)
    pool, mgr = make(num_pages, page_size, caching=True)
    events = []
    pool.add_listener(events.append)
    live, next_id, draining = [], 0, False
    for _ in range(steps):
        before = mgr.snapshot()
        events.clear()
        op = rng.choice(["add", "add", "append", "append", "append", "fork", "free", "free"])
        draining = draining or rng.random() < 0.03
        op = "reset" if draining else op
        try:
            if op == "add" or not (live or draining):
                op, next_id = "add", next_id + 1
                mgr.add(f"s{next_id}", rng.integers(0, 2, int(rng.integers(1, 7))).tolist())
                live.append(f"s{next_id}")
            elif op == "append":
                mgr.append_slot(live[int(rng.integers(len(live)))], int(rng.integers(0, 2)))
            elif op == "fork":
                next_id += 1
                mgr.fork(live[int(rng.integers(len(live)))], f"s{next_id}")
                live.append(f"s{next_id}")
            elif op == "free":
                mgr.free(live.pop(int(rng.integers(len(live)))))
            elif live:  # draining: every sequence finishes, one per operation
                mgr.free(live.pop())
            else:
                pool.reset_prefix_cache()
                draining = False
        except OutOfPagesError:
            pass
        mgr.check_invariants()
        yield before, mgr.snapshot(), list(events), op


@pytest.mark.parametrize("seed", range(4))
def test_every_observed_state_change_is_a_transition_of_the_table(seed):
    for before, after, events, _ in _random_run(seed):
        changed = before.state != after.state
        pairs = set(zip(before.state[changed].tolist(), after.state[changed].tolist(), strict=True))
        for source, target in pairs:
            assert is_allowed(source, target), (PageState(source).name, PageState(target).name)
        names = step_transitions(before, after, events)
        said = {(BY_NAME[n].source, BY_NAME[n].target) for n in names}
        assert {(PageState(s), PageState(t)) for s, t in pairs} <= said, names


def test_the_random_runs_cover_every_transition_but_preemption():
    seen = set()
    for seed in range(4):
        for before, after, events, _ in _random_run(seed):
            seen |= set(step_transitions(before, after, events))
    assert seen == {t.name for t in TRANSITIONS if not t.name.startswith("preempt")}


def test_a_preempting_scheduler_takes_the_preempt_transitions():
    run = ScenarioRun("preempt")
    seen = set()
    while not run.done:
        run.step()
        seen |= set(step_transitions(run.snapshots[-2], run.snapshots[-1], run.records[-1].events))
    assert {"preempt → CACHED", "preempt → FREE"} <= seen


def test_what_the_table_forbids():
    assert not is_allowed(PageState.FREE, PageState.CACHED)  # a page fills while ACTIVE
    assert (PageState.CACHED, PageState.FREE) in ALLOWED  # only reset_prefix_cache
    assert is_allowed(PageState.ACTIVE, PageState.ACTIVE)


def test_the_diagram_and_glossary_name_every_transition():
    texts = [t.get_text() for t in plot_lifecycle().axes[0].texts]
    glossary = glossary_markdown()
    for t in TRANSITIONS:
        assert t.name in texts and t.name in glossary
    with pytest.raises(ValueError, match="highlight"):
        plot_lifecycle(["teleport"])


@pytest.mark.parametrize("aspect", [0.5, 0.4])  # the dashboard's layout, notebook 00's wide one
@pytest.mark.parametrize("highlight", [(), ("allocate", "share", "evict", "reset")])
def test_no_text_of_the_diagram_overlaps_another_or_leaves_the_picture(highlight, aspect):
    """Every label, box and key line of the diagram, as drawn: their rectangles do not meet,
    and each lies inside the figure (a label on a header or on the key would read as one).
    Two labels of one straight arrow, rotated along it either side of the line, have
    rectangles that meet at the line's slope: such a pair is not compared."""
    fig = plot_lifecycle(highlight, aspect=aspect)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    width, height = fig.canvas.get_width_height()
    boxes = []
    for text in fig.axes[0].texts:
        box = (text.get_bbox_patch() or text).get_window_extent(renderer)
        assert 0 <= box.x0 and box.x1 <= width and 0 <= box.y0 and box.y1 <= height, text.get_text()
        boxes.append((text.get_text(), box, text.get_rotation()))
    for i, (a, box_a, turn_a) in enumerate(boxes):
        for b, box_b, turn_b in boxes[i + 1 :]:
            if turn_a == turn_b != 0:  # the two rows of one rotated label
                continue
            side = box_a.x1 <= box_b.x0 or box_b.x1 <= box_a.x0
            assert side or box_a.y1 <= box_b.y0 or box_b.y1 <= box_a.y0, (a, b)


def test_the_key_says_what_orange_and_reset_mean():
    plain = [t.get_text() for t in plot_lifecycle().axes[0].texts]
    lit = [t.get_text() for t in plot_lifecycle(["evict"]).axes[0].texts]
    assert any("arrows" in t for t in plain) and not any("orange" in t for t in plain)
    assert any("orange" in t for t in lit)
    assert any("reset_prefix_cache" in t for t in plain)


def test_a_prompt_prefilled_in_chunks_allocates_its_first_chunk_and_appends_the_next():
    """The Page life diagram names the log's `allocate` lines of a chunked prefill: the first
    chunk is a new prompt's allocation, each later chunk finds the last page full, and the
    glossary says a prompt's rest is appended too."""
    run = ScenarioRun("chunked")
    taken = {}  # chunk number of `long` -> transitions of that step
    while run.can_step:
        run.step()
        lines = run.records[-1].lines()
        if any(line.startswith("scheduler: prefill long") for line in lines):
            taken[len(taken)] = step_transitions(run.snapshots[-2], run.snapshots[-1], run.records[-1].events)
    assert taken[0] == ["allocate"] and taken[1] == taken[2] == ["append past a full page"]
    assert "rest of its prompt" in BY_NAME["append past a full page"].says


def test_reset_is_drawn_dashed_and_lighter_unless_lit_and_no_notebook_calls_it():
    """The reset arrow (CACHED -> FREE) is the one dashed arrow, lighter than the others, and
    the key says no notebook uses it; lit (a step took it), it is solid orange like any other.
    Oracle for "no notebook uses it": no code cell of any notebook calls reset_prefix_cache."""
    import json
    from pathlib import Path

    from matplotlib.colors import to_hex
    from matplotlib.patches import FancyArrowPatch

    def arrows(highlight=()):
        fig = plot_lifecycle(highlight)
        return [p for p in fig.axes[0].patches if isinstance(p, FancyArrowPatch)], fig

    plain, fig = arrows()
    dashed = [a for a in plain if a.get_linestyle() not in ("-", "solid")]
    assert len(dashed) == 1 and len(plain) == 6
    (reset,) = dashed
    assert to_hex(reset.get_edgecolor()) != to_hex(plain[0].get_edgecolor())
    assert any("no notebook uses it" in t.get_text() for t in fig.axes[0].texts)
    lit, _ = arrows(["reset"])
    assert all(a.get_linestyle() in ("-", "solid") for a in lit)
    root = Path(__file__).resolve().parents[1] / "notebooks"
    for path in root.rglob("*.ipynb"):
        cells = json.loads(path.read_text())["cells"]
        code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        assert not any("reset_prefix_cache(" in source for source in code), path.name


def test_beside_the_lit_label_the_arrows_other_labels_are_greyed():
    """A copy-on-write lights the FREE -> ACTIVE arrow, which also carries allocate and append
    into a full page: those two are greyed, so the arrow does not read as theirs (a learner
    took it for "append past a full page"); labels on other arrows keep their dark grey."""
    from matplotlib.colors import to_hex

    colors = {t.get_text(): to_hex(t.get_color()) for t in plot_lifecycle(["copy-on-write"]).axes[0].texts}
    assert colors["allocate"] == colors["append past a full page"] != colors["release → FREE"]
    assert colors["release → FREE"] == "#222222" and colors["copy-on-write"] != colors["allocate"]
