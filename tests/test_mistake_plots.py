"""pagedkv.labs.mistake_plots.room: the options it sets are the ones read back from the axes,
and no text of the figure is below its type size (measured by viz.projector's own ruler)."""

from __future__ import annotations

from pagedkv.labs.mistake_costs import system_prompt_requests
from pagedkv.labs.mistake_plots import room
from pagedkv.viz import plot_query_outputs, plot_series
from pagedkv.viz.projector import min_font_pt


def test_room_sets_ticks_range_and_type_size() -> None:
    fig = room(
        plot_series({"a": [1, 2, 3], "b": [3, 2, 1]}, "x", "y"),
        xticks=[1, 3],
        ylim=(0, 4),
        yticks=[0, 2, 4],
        legend_loc="center right",
        min_pt=17,
    )
    ax = fig.axes[0]
    assert list(ax.get_xticks()) == [1, 3] and ax.get_ylim() == (0, 4)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0", "2", "4"]
    fig.canvas.draw()  # "center right": the legend's box hugs the axes' right edge, centred
    box, frame = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert frame.x1 - 20 < box.x1 < frame.x1 and abs((box.y0 + box.y1) - (frame.y0 + frame.y1)) < 2
    assert min_font_pt(fig) >= 17


def test_room_log_axis_labels_counts() -> None:
    fig = room(plot_series({"a": [8, 4000]}, "x", "y"), yticks=[8, 1000, 4000], log_y=True)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log" and not ax.yaxis.get_minor_ticks()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["8", "1,000", "4,000"]


def test_room_raises_every_panel() -> None:
    fig = room(plot_query_outputs({"p": [[1.0, 2.0]], "q": [[2.0, 1.0]]}, "t"), min_pt=16)
    assert min_font_pt(fig) >= 16


def test_system_prompt_requests() -> None:
    system, requests = system_prompt_requests()
    assert len(system) == 32 and len(requests) == 40
    assert all(r[:32] == system and len(r) == 40 and all(97 <= t < 123 for t in r[32:]) for r in requests)
    assert system_prompt_requests()[1] == requests  # seeded: the same every call


def test_room_markers_only_drops_lines_and_keeps_markers() -> None:
    fig = room(
        plot_query_outputs({"p": [[1.0, 2.0], [2.0, 1.0]], "q": [[0.0, 1.0], [1.0, 0.0]]}, "t"),
        markers_only=True,
        xlabel="element",
        height_in=4.5,
    )
    assert [ax.get_xlabel() for ax in fig.axes] == ["element", "element"]
    assert fig.get_size_inches()[1] == 4.5
    drawn = [line for line in fig.axes[0].get_lines() if line.get_label().startswith("query")]
    assert len(drawn) == 2 and all(line.get_linestyle() == "None" for line in drawn)
    assert {line.get_marker() for line in drawn} == {"o", "x"}
    keys = fig.legends[0].get_lines()  # the legend's keys match the picture
    assert keys and all(key.get_linestyle() == "None" for key in keys)
    kept = room(plot_query_outputs({"p": [[1.0, 2.0]]}, "t"))  # the default keeps the lines
    queries = [line for line in kept.axes[0].get_lines() if line.get_label().startswith("query")]
    assert [line.get_linestyle() for line in queries] == ["-"]
