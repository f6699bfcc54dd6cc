"""Sync mode's training phases: every stored episode queues one, and one thread runs them in order.

A phase trains for the update calls its episode's transitions are worth at the configured ratio (`SyncSchedule`,
fractions carried over), then publishes; the rollout waits for that version before the robot's next episode.
What a phase does is the session's (`user.learner.session`); here are its size and its thread.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

POLL_S = 0.2  # how often the phase thread checks for shutdown while no episode arrives

Episode = tuple[str, int]  # (robot id, episode id)
Phase = Callable[[int, Episode], None]  # one phase: (env steps of the episode, the episode)


@dataclass
class SyncSchedule:
    """The update calls each stored episode is worth at the configured ratio; fractions carry over."""

    updates_per_step: float  # gradient steps per transition
    gradient_steps_per_update: int  # gradient steps one update call takes
    owed: float = 0.0  # update calls earned but not yet run (always < 1 after `calls_for`)

    def calls_for(self, steps: int) -> int:
        self.owed += self.updates_per_step * steps / self.gradient_steps_per_update
        calls = int(self.owed)
        self.owed -= calls
        return calls


class SyncPhases:
    """A queue of phases and the thread that runs them, one at a time, until `stop` is set."""

    def __init__(self, phase: Phase, stop: threading.Event) -> None:
        self._phase = phase
        self._stop = stop
        self._work: queue.Queue[tuple[int, Episode]] = queue.Queue()
        self._thread: threading.Thread | None = None

    def put(self, steps: int, episode: Episode) -> None:
        """Queue the phase of a stored episode of `steps` env steps."""
        self._work.put((steps, episode))

    def waiting(self) -> bool:
        """Phases are queued that have not started yet."""
        return not self._work.empty()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="learner-sync", daemon=True)
        self._thread.start()

    def join(self, timeout_s: float) -> None:
        """Wait up to `timeout_s` for the thread to end (after `stop` is set)."""
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                steps, episode = self._work.get(timeout=POLL_S)
            except queue.Empty:
                continue
            self._phase(steps, episode)
