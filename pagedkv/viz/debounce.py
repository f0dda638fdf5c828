"""Run a slider's callback once, after its value has stopped changing.

A slider moved with the arrow keys sends one value a key press. Replaying the story for each
of them made the dashboard lag behind the keys, so the Jump and Pool size sliders wait until
no key has come for `DELAY_S` seconds and then replay once, to the last value. This is the
debouncing that ipywidgets' documentation shows ("Widget Events"): a timer on the kernel's
asyncio loop, cancelled by each newer value. Outside a running loop (tests, plain Python)
the callback runs at once, so code that sets a slider sees its effect immediately."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["DELAY_S", "Debounced"]

DELAY_S = 0.3  # seconds without a new value before the callback runs


class Debounced:
    """`Debounced(action, waiting)(change)` calls `action(change)` once the changes stop:
    `waiting()` is called at the first change of a burst (to show a busy sign), and only the
    last change of the burst reaches `action`."""

    def __init__(self, action: Callable[[dict], None], waiting: Callable[[], None] | None = None,
                 delay: float = DELAY_S) -> None:  # fmt: skip
        self.action, self.waiting, self.delay = action, waiting, delay
        self._timer: asyncio.TimerHandle | None = None

    def __call__(self, change: dict) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop running: no keys to wait for
            self.action(change)
            return
        if self._timer is not None:
            self._timer.cancel()
        elif self.waiting is not None:
            self.waiting()
        self._timer = loop.call_later(self.delay, self._fire, change)

    def _fire(self, change: dict) -> None:
        self._timer = None
        self.action(change)

    @property
    def pending(self) -> bool:
        """Whether a change waits for the keys to stop."""
        return self._timer is not None
