"""The live dashboard between two ticks: keys move the selection, redraws are capped.

`dfctl watch` on a terminal runs `for _ in w.ticks(wait=screen.wait): w.tick(); ...`, so
the watch's clock (watch/tick.ticks_every) paces the ticks and LiveScreen.wait is what
fills the time between them: it reads keys until the next tick is due (q/Esc quits: the
wait answers "stop"), and redraws what changed at most `max_hz` times a second (a key
held down does not redraw on every repeat).
"""

from __future__ import annotations

import time
from typing import Any, Callable

QUIT_KEYS = ("q", "Q", "\x1b")
NEXT_KEYS = ("j", "\t", "\x1b[B", "n")
PREVIOUS_KEYS = ("k", "\x1b[A", "p")

KeyWait = Callable[[float], "str | None"]
"""wait_key(timeout_s): the key pressed within timeout_s, else None."""


class LiveScreen:
    """What the dashboard shows (the selected run) and when it is drawn."""

    def __init__(self, draw: Callable[[int], Any], runs: int, wait_key: KeyWait, max_hz: float, *,
                 clock: Callable[[], float] = time.monotonic):
        self._draw, self.runs, self.wait_key, self.clock = draw, runs, wait_key, clock
        self.frame_s = 1.0 / max_hz
        self.selected = 0
        self.last_draw = float("-inf")
        self.dirty = False
        self.quit = False

    def changed(self) -> None:
        """Something to show (a tick, a key): drawn now if the frame cap allows, else soon."""
        self.dirty = True
        if self.clock() - self.last_draw >= self.frame_s:
            self.draw()

    def draw(self) -> None:
        self._draw(self.selected)
        self.last_draw, self.dirty = self.clock(), False

    def wait(self, timeout_s: float) -> bool:
        """Watch.ticks()'s wait: keys until timeout_s is over; True (stop) on a quit key."""
        end = self.clock() + timeout_s
        while True:
            now = self.clock()
            if self.dirty and now - self.last_draw >= self.frame_s:
                self.draw()
            left = end - now
            if left <= 0:
                return False
            wake = min(left, self.last_draw + self.frame_s - now) if self.dirty else left
            key = self.wait_key(max(0.0, wake))
            if key is None:
                continue
            if key in QUIT_KEYS:
                self.quit = True
                return True
            if key in NEXT_KEYS and self.runs:
                self.selected = (self.selected + 1) % self.runs
                self.dirty = True
            elif key in PREVIOUS_KEYS and self.runs:
                self.selected = (self.selected - 1) % self.runs
                self.dirty = True
