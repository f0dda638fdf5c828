"""Sliders moved with the arrow keys replay the story once, after the last key (`Debounced`)."""

import asyncio

from pagedkv.viz.debounce import Debounced


def test_without_a_running_loop_each_change_runs_at_once():
    seen: list[int] = []
    waits: list[int] = []
    act = Debounced(lambda change: seen.append(change["new"]), lambda: waits.append(1))
    for value in (1, 2, 3):
        act({"new": value})
    assert seen == [1, 2, 3] and waits == [] and not act.pending


def test_a_burst_of_changes_runs_the_action_once_with_the_last_value():
    seen: list[int] = []
    waits: list[int] = []

    async def keys() -> None:
        act = Debounced(lambda change: seen.append(change["new"]), lambda: waits.append(1), delay=0.05)
        for value in range(1, 8):  # seven arrow presses with no yield between them: the loop
            act({"new": value})  # cannot run the timer in between, however loaded the machine
        assert seen == [] and act.pending and waits == [1]  # busy from the first key on
        await asyncio.sleep(0.2)
        assert seen == [7] and not act.pending
        act({"new": 9})  # a new burst: busy again, one more run
        await asyncio.sleep(0.2)
        assert seen == [7, 9] and waits == [1, 1]

    asyncio.run(keys())


def test_the_jump_slider_shows_drawing_while_keys_come_and_jumps_once():
    from pagedkv.viz import Dashboard

    async def keys() -> None:
        dash = Dashboard("walkthrough")
        rendered: list[int] = []
        dash.step_counter.observe(lambda change: rendered.append(dash.run.cursor), names="value")
        for value in range(1, 6):
            dash.step_slider.value = value
        assert dash.run.cursor == 0 and "drawing" in dash.busy_note.value
        await asyncio.sleep(0.6)
        assert dash.run.cursor == 5 and rendered == [5] and dash.busy_note.value == ""

    asyncio.run(keys())
