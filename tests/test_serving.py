"""The serving run: Poisson arrivals, memory shares and latency on the cost model's clock."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from pagedkv import bench, cli
from pagedkv.bench import serving as bench_serving
from pagedkv.labs import costs, serving
from pagedkv.labs.workloads import Request, generate
from pagedkv.viz.palette import SYSTEM_COLORS


def test_poisson_arrivals_have_the_rate_asked_for():
    times = serving.poisson_arrivals(20_000, 4.0, seed=1)
    assert np.all(np.diff(times) >= 0)
    assert np.mean(np.diff(times)) == pytest.approx(0.25, rel=0.03)


def test_a_lone_request_takes_one_prefill_and_its_decode_steps():
    r = Request("a", list(range(100)), 5)
    out = serving.serve([r], "paged", arrival_rate=1.0)
    # Hand count: the prefill step (100 prompt tokens, no decode K/V read) then 4 decode steps
    # reading 101..104 tokens of K/V.
    steps = [costs.step_seconds("OPT-13B", "A100-40GB", 100, 0, prefill_lens=[100])]
    steps += [costs.step_seconds("OPT-13B", "A100-40GB", 1, 100 + k) for k in range(1, 5)]
    assert out["normalized_latency"] == pytest.approx(sum(steps) / 5)
    contiguous = serving.serve([r], "oracle", arrival_rate=1.0)
    assert contiguous["normalized_latency"] == pytest.approx(out["normalized_latency"], rel=0.01)


def test_at_a_rate_every_system_keeps_up_with_they_hold_the_same_tokens():
    # Little's law: the same requests in flight, whatever the allocator, when nobody queues.
    reqs = generate("sharegpt", 200, seed=2)
    shares = [serving.serve(reqs, s, arrival_rate=0.5)["run_token_states"] for s in ("oracle", "paged")]
    assert shares[0] == pytest.approx(shares[1], abs=1.0)


@pytest.fixture(scope="module")
def quick_report():
    return bench_serving.run(quick=True)


@pytest.mark.slow
def test_quick_bench_orders_the_systems_like_the_paper(quick_report):
    data, top = quick_report.data["systems"], str(quick_report.data["top_rate"])
    under_load = [data[s][top]["token_states"] for s in serving.SYSTEMS]
    assert under_load == sorted(under_load) and under_load[-1] > 90  # max < pow2 < oracle < paged
    for s in serving.SYSTEMS:
        total = sum(data[s][top][c] for c in serving.CATEGORIES)
        assert total == pytest.approx(100.0)
        latency = [data[s][str(r)]["normalized_latency"] for r in quick_report.data["rates"]]
        assert latency == sorted(latency)  # more load, longer waits
    at4 = {s: data[s]["4.0"]["normalized_latency"] for s in serving.SYSTEMS}
    assert at4["paged"] < at4["oracle"] < at4["pow2"] < at4["max"]
    assert quick_report.figure() is not None


@pytest.mark.slow
def test_bench_memory_arrival_rate_prints_the_serving_run(tmp_path, capsys):
    path = tmp_path / "memory.json"
    argv = [
        "bench",
        "memory",
        "--quick",
        "--arrival-rate",
        "2",
        "--workloads",
        "sharegpt",
        "--json",
        str(path),
    ]
    assert cli.main(argv) == 0
    assert "Poisson arrivals" in capsys.readouterr().out
    assert json.loads(path.read_text())["data"]["arrival_rate"] == 2.0


@pytest.mark.parametrize(
    "call, word",
    [
        (lambda: serving.poisson_arrivals(3, -1.0), "arrival_rate"),
        (lambda: bench_serving.run(quick=True, arrival_rate=-2.0), "arrival_rate"),
        (lambda: serving.serve([Request("a", [1], 2)], "buddy", arrival_rate=1.0), "system"),
        (lambda: serving.serve([Request("a", [1], 2)], "paged", arrival_rate=1.0, gpu="V100"), "gpu"),
        (lambda: serving.serve([Request("a", [1], 2)], "paged", arrival_rate=1.0, model="x"), "model"),
    ],
)
def test_bad_input_names_the_argument(call, word):
    with pytest.raises(ValueError, match=word):
        call()


def test_sustainable_rate_interpolates_the_crossing():
    # Hand count: 0.5 lies 1/3 of the way from 0.3 (at 2/s) to 0.9 (at 3/s).
    assert bench_serving.sustainable_rate([1, 2, 3], [0.1, 0.3, 0.9], 0.5) == pytest.approx(2 + 1 / 3)
    assert bench_serving.sustainable_rate([1, 2], [0.1, 0.2], 0.5) == 2  # never reached: the top
    assert bench_serving.sustainable_rate([1, 2], [0.7, 0.9], 0.5) == 1  # above from the start


@pytest.mark.slow
def test_crossing_brackets_the_bound_and_interpolates():
    trace = generate("sharegpt", 120, 0)
    rate = bench_serving.crossing(trace, "max", 1.5, {"seed": 0})
    below, above = (
        serving.serve(trace, "max", arrival_rate=r)["normalized_latency"] for r in (rate - 0.15, rate + 0.15)
    )
    assert below < bench_serving.LATENCY_BOUND <= above


def test_the_length_study_prints_a_row_per_length_and_seed(monkeypatch):
    monkeypatch.setattr(
        bench_serving, "crossing", lambda trace, system, start, options: start * len(trace) / 100
    )
    report = bench_serving.run(lengths="100,200", seeds="0,1")
    assert [row[:2] for row in report.rows] == [[100, 0], [100, 1], [200, 0], [200, 1]]
    assert report.rows[0][2:] == [0.7, 1.3, 3.0, round(3.0 / 1.3, 2), round(3.0 / 0.7, 2)]
    assert report.notes == [
        "100 -> 200 requests, mean over seeds: max +100.0 %, oracle +100.0 %, paged +100.0 %"
    ]


@pytest.mark.parametrize("policy", ["max", "pow2", "oracle"])
def test_contiguous_shares_are_the_accounting(policy):
    from pagedkv.labs.contiguous import ContiguousKVCache

    arena = ContiguousKVCache(15_728, policy, 2048, allocator="buddy", pow2_of="output")
    for i, (prompt, final) in enumerate([(100, 300), (5, 900), (700, 701), (20, 40)]):
        arena.add(f"r{i}", prompt, final)
    arena.append_all()  # r2 now holds its final 701 tokens
    arena.append("r0"), arena.append("r3"), arena.free("r1")
    with pytest.raises(ValueError, match="'r2' already holds its final_len = 701"):
        arena.append_all()
    assert {r.req_id: r.used for r in arena.accounting().reservations} == {"r0": 102, "r2": 701, "r3": 22}
    for final, prompt in [(64, 10), (2048, 1000), (300, 299)]:
        want = arena.accounting(final, prompt).as_dict()
        assert arena.shares(final, prompt) == want


def test_memory_off_gives_the_same_latencies():
    requests = generate("sharegpt", 80, 0)
    for system in serving.SYSTEMS:
        full = serving.serve(requests, system, arrival_rate=3.0)
        fast = serving.serve(requests, system, arrival_rate=3.0, memory=False)
        assert "token_states" not in fast and all(full[k] == v for k, v in fast.items())


def test_the_grid_in_worker_processes_is_the_grid_in_one():
    requests = generate("sharegpt", 60, 3)
    one = serving.serve_grid(requests, [1.0, 4.0], {"seed": 1}, workers=1)
    two = serving.serve_grid(requests, [1.0, 4.0], {"seed": 1}, workers=2)
    assert one == two and [list(d) for d in two.values()] == [[1.0, 4.0]] * len(serving.SYSTEMS)
    assert one["oracle"][4.0] == serving.serve(requests, "oracle", arrival_rate=4.0, seed=1)


def _same(saved, fresh, where="report"):
    """saved == fresh, floats within 1e-9 relative (the last digit of a sum may depend on the
    machine; everything printed is rounded far above it), JSON's lists for tuples."""
    if isinstance(fresh, float):
        assert saved == pytest.approx(fresh, rel=1e-9, abs=1e-12), where
    elif isinstance(fresh, dict):
        assert list(saved) == [str(k) for k in fresh], where
        for k, v in fresh.items():
            _same(saved[str(k)], v, f"{where}[{k!r}]")
    elif isinstance(fresh, (list, tuple)):
        assert len(saved) == len(fresh), where
        for i, (a, b) in enumerate(zip(saved, fresh)):
            _same(a, b, f"{where}[{i}]")
    else:
        assert saved == fresh, where


@pytest.mark.slow
def test_the_recorded_quick_run_is_what_the_quick_run_computes(quick_report):
    # Notebook 11 draws the recorded run (no wait); it must be today's run, number for number.
    saved = bench.recorded("serving")
    for name in ("title", "columns", "rows", "notes", "data"):
        _same(getattr(saved, name), getattr(quick_report, name), name)
    assert saved.table() == quick_report.table()
    assert saved.figure() is not None


def test_the_printed_ratios_follow_from_the_printed_rates():
    # A reader divides the rates the line prints: the ratios beside them must be those quotients.
    notes = bench.recorded("serving").notes
    [at] = [i for i, n in enumerate(notes) if n.startswith("sustainable rate")]
    line = notes[at] + notes[at + 1]  # the rates, then the ratios
    rates = {s: float(r) for s, r in re.findall(r"(\w+) (\d+\.\d{3})/s", line)}
    assert set(rates) == set(serving.SYSTEMS)
    ratios = re.findall(r"paged / (\w+) ([\d.]+)x", line)
    assert [other for other, _ in ratios] == ["oracle", "max"]
    for other, ratio in ratios:
        assert ratio == f"{rates['paged'] / rates[other]:.2f}"


def test_the_latency_axis_labels_stand_apart_at_notebook_width():
    # Shown 848 px wide (78 % of its 1,100 px), each tick label keeps a clear gap to the next.
    fig = bench.recorded("serving").figure()
    renderer = fig.canvas.get_renderer()
    lat = fig.axes[0]
    boxes = sorted(
        (t.get_window_extent(renderer) for t in lat.get_yticklabels() if t.get_text()), key=lambda b: b.y0
    )
    scale = 848 / (fig.get_figwidth() * fig.dpi)
    assert len(boxes) == 8
    assert all((upper.y0 - lower.y1) * scale >= 6 for lower, upper in zip(boxes, boxes[1:]))


def test_every_rate_is_a_tick_and_paged_thin_slices_are_named_with_their_shares():
    # 0.5 requests/s has its own tick; the thin top of paged's bar (a few % each) gets a
    # callout whose numbers are the record's shares, computed here from the record itself.
    report = bench.recorded("serving")
    fig = report.figure()
    fig.canvas.draw()
    lat, bars = fig.axes
    rates = report.data["rates"]
    assert [float(t.get_text()) for t in lat.get_xticklabels()] == [float(r) for r in rates]
    top = report.data["systems"]["paged"][str(report.data["top_rate"])]
    (callout,) = [t for t in bars.texts if "thin top" in t.get_text()]
    for key in ("internal_fragmentation", "free"):
        assert f"{top[key]:.1f}%" in callout.get_text()
    assert callout.get_window_extent().x0 >= lat.get_window_extent().x1  # clear of the left panel


def test_the_latency_legend_names_each_system_as_the_tables_do():
    # The tables and the text call the systems max, pow2, oracle, paged: the legend too, each
    # name in the colour of its own line.
    fig = bench.recorded("serving").figure()
    lat = fig.axes[0]
    legend = lat.get_legend()
    names = [t.get_text() for t in legend.get_texts()]
    assert (
        names[: len(bench_serving.SYSTEMS)]
        == list(bench_serving.SYSTEMS)
        == ["max", "pow2", "oracle", "paged"]
    )
    lines = {line.get_label(): line.get_color() for line in lat.get_lines()}
    assert [lines[s] for s in bench_serving.SYSTEMS] == [SYSTEM_COLORS[s] for s in bench_serving.SYSTEMS]


def test_each_drawn_latency_line_crosses_the_bound_at_the_printed_sustainable_rate():
    # On the log latency axis matplotlib joins a line's points straight on screen. Read where
    # each drawn line crosses the dashed bound there, as a reader reads the picture: it must be
    # the sustainable rate the report prints, and the cross on the bound must sit at it. (Straight
    # screen segments between the measured rates alone cross oracle's near 1.71/s, not 1.375/s.)
    report = bench.recorded("serving")
    notes = " ".join(report.notes)
    printed = {s: float(r) for s, r in re.findall(r"(\w+) (\d+\.\d{3})/s", notes)}
    assert set(printed) == set(serving.SYSTEMS)
    fig = report.figure()
    fig.canvas.draw()
    lat = fig.axes[0]
    to_screen, bound = lat.transData, serving.LATENCY_BOUND
    bound_y = to_screen.transform((1.0, bound))[1]
    lines = {line.get_label(): line for line in lat.get_lines()}
    for system in serving.SYSTEMS:
        xy = to_screen.transform(np.column_stack(lines[system].get_data()))
        i = next(k for k in range(1, len(xy)) if xy[k - 1, 1] < bound_y <= xy[k, 1])
        (x0, y0), (x1, y1) = xy[i - 1], xy[i]
        screen_x = x0 + (x1 - x0) * (bound_y - y0) / (y1 - y0)
        drawn = to_screen.inverted().transform((screen_x, bound_y))[0]
        assert drawn == pytest.approx(printed[system], abs=6e-4), system
    marks = [line for line in lat.get_lines() if line.get_marker() == "X" and len(line.get_xdata())]
    assert sorted((line.get_color(), round(line.get_xdata()[0], 3)) for line in marks) == sorted(
        (SYSTEM_COLORS[s], printed[s]) for s in serving.SYSTEMS
    )
    assert all(list(line.get_ydata()) == [bound] for line in marks)


def test_the_latency_curve_is_the_line_the_sustainable_rate_reads():
    # Between measured rates the curve is linear in the rate; it passes through the measured
    # points and holds the crossing as a point of its own (worked by hand: 1 + 0.2 / 0.4 = 1.5).
    xs, ys = serving.latency_curve([1.0, 2.0, 3.0], [0.3, 0.7, 0.9], steps=4)
    assert xs[0] == 1.0 and 2.0 in xs and xs[-1] == 3.0
    assert ys[xs.index(2.0)] == 0.7 and ys[xs.index(1.5)] == pytest.approx(0.5)
    assert all(a < b for a, b in zip(xs, xs[1:]))
    for x, y in zip(xs, ys):
        assert y == pytest.approx(float(np.interp(x, [1.0, 2.0, 3.0], [0.3, 0.7, 0.9])))
    assert serving.sustainable_rate([1.0, 2.0, 3.0], [0.3, 0.7, 0.9]) == pytest.approx(1.5)
