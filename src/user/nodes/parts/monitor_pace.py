"""Whether the learner holds its set update-to-data ratio: what the monitor says when it falls behind and when
it catches up again, once each, never every period.

The ratio is the gradient steps the learner made per transition it stored over the latest `window` stored
transitions (from the counters of its stats messages: `updates`, `buffer_transitions`). Stored, not received:
the learner may train on an episode only once it is stored whole, as its rate limiter counts. Its training on a
just stored episode still lags behind by up to an episode of every robot, so a window is many episodes long
(the monitor's `pace_window`). A window is judged only once the learner had trained before it began: the
warm-up before `pacing.min_transitions` is not falling behind. The learner is behind below BEHIND_BELOW of the
set ratio and has caught up again from CAUGHT_UP_AT of it; the gap keeps a learner near the edge from saying so
at every line. A learner that restarted (its counters went back) starts a new window.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

BEHIND_BELOW = 0.9  # of the set ratio: falling behind below this
CAUGHT_UP_AT = 0.97  # of the set ratio: caught up again from this
MAX_SAMPLES = 100_000  # counters kept while a window fills (one per stats message: a day of slow robots)


@dataclass(frozen=True)
class PaceChange:
    """The learner just fell behind (`behind`) or caught up, at `ratio` over the latest `transitions`."""

    behind: bool
    ratio: float  # gradient steps per transition over the window
    set_ratio: float  # pacing.updates_per_step
    transitions: int  # transitions stored over the window

    def text(self) -> str:
        state = "behind" if self.behind else "caught up"
        share = 100.0 * self.ratio / self.set_ratio
        return (
            f"learner {state}: {self.ratio:.1f} gradient steps per transition over the last {self.transitions} "
            f"transitions, {self.set_ratio:.1f} set ({share:.0f} %)"
        )


class PaceWatch:
    """Counters in (`add`, from each stats message); `check` says when the learner falls behind or catches up."""

    def __init__(self, window: int) -> None:
        if window < 1:
            raise ValueError(f"window: {window} transitions; it must be at least 1")
        self.window = window
        self.behind = False
        self._samples: deque[tuple[int, int]] = deque(maxlen=MAX_SAMPLES)  # (gradient steps, transitions)

    def add(self, gradient_steps: int, transitions: int) -> None:
        """The learner's gradient steps and stored transitions so far."""
        samples = self._samples
        if samples and (gradient_steps < samples[-1][0] or transitions < samples[-1][1]):
            samples.clear()  # the learner restarted from an older checkpoint: its counters went back
        if samples and transitions == samples[-1][1] and len(samples) > 1:
            samples[-1] = (gradient_steps, transitions)  # no transition since: only the newest count matters
        else:
            samples.append((gradient_steps, transitions))
        while len(samples) > 1 and samples[1][1] <= transitions - self.window:
            samples.popleft()  # the oldest kept is the newest at or before the window's start

    def ratio(self) -> tuple[float, int] | None:
        """Gradient steps per transition over the latest window and the transitions in it; None before a full
        window since training began."""
        if len(self._samples) < 2:
            return None
        (steps0, stored0), (steps1, stored1) = self._samples[0], self._samples[-1]
        if steps0 <= 0 or stored1 - stored0 < self.window:
            return None
        return (steps1 - steps0) / (stored1 - stored0), stored1 - stored0

    def check(self, set_ratio: float) -> PaceChange | None:
        """The change to report when the learner just fell behind `set_ratio` or caught up; None otherwise."""
        measured = self.ratio()
        if measured is None or set_ratio <= 0.0:
            return None
        ratio, transitions = measured
        if self.behind == (ratio < set_ratio * (CAUGHT_UP_AT if self.behind else BEHIND_BELOW)):
            return None
        self.behind = not self.behind
        return PaceChange(self.behind, ratio, set_ratio, transitions)
