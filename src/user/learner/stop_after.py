"""`StopAfter`: when a run is complete. The learner checks it with every stats report; the first condition met
ends the run: the learner first does the update calls the update-to-data ratio still owes for the transitions
stored by then (`RunEnding`, at most `catch_up_s`), then saves its final checkpoint and exits with the
run-complete code, on which `user bringup` and the ROS launch file stop every other node as on Ctrl-C and exit 0.
Every condition at 0: run until stopped."""

from __future__ import annotations

import math
from dataclasses import dataclass

from user.buffer.rate_limiter import RateLimiter
from user.config.strict import setting


@dataclass(frozen=True)
class StopAfter:
    """The first condition met ends the run; 0 turns a condition off."""

    env_steps: int = setting(0, "transitions received from the robots (demonstrations included)", min=0)
    episodes: int = setting(0, "episodes stored (demonstrations included)", min=0)
    wall_time_s: float = setting(
        0.0, "seconds since the learner started (a resumed run counts from its restart)", min=0.0
    )
    success_rate: float = setting(
        0.0, "success rate of the recent online episodes (the monitor's window), 0..1", min=0.0, max=1.0
    )
    success_episodes: int = setting(
        20, "success_rate: only once at least this many online episodes are in the window", min=1
    )
    catch_up_s: float = setting(
        120.0,
        "once a condition is met, seconds the learner may go on training to do the update calls the "
        "update-to-data ratio still owes for the transitions stored by then (0: end at once)",
        min=0.0,
    )

    @property
    def active(self) -> bool:
        return any((self.env_steps, self.episodes, self.wall_time_s, self.success_rate))

    def reached(
        self, env_steps: int, episodes: int, elapsed_s: float, success: float | None = None, window: int = 0
    ) -> str | None:
        """Why the run is complete now (one line), or None. `success`: the recent online success rate over
        `window` episodes (None before any)."""
        if self.env_steps and env_steps >= self.env_steps:
            return f"{env_steps} transitions received (stop_after.env_steps {self.env_steps})"
        if self.episodes and episodes >= self.episodes:
            return f"{episodes} episodes stored (stop_after.episodes {self.episodes})"
        if self.wall_time_s and elapsed_s >= self.wall_time_s:
            return f"{elapsed_s:.0f} s since the start (stop_after.wall_time_s {self.wall_time_s:g})"
        if (
            self.success_rate
            and success is not None
            and window >= self.success_episodes
            and success >= self.success_rate
        ):
            return (
                f"success rate {success:.0%} over the last {window} online episodes "
                f"(stop_after.success_rate {self.success_rate:g})"
            )
        return None


@dataclass(frozen=True)
class RunEnding:
    """A run whose `stop_after` condition was met: it ends once the learner has sampled `target` transitions
    (what the ratio allows for the transitions inserted when the condition was met, without the limiter's error
    buffer) or at `deadline` (monotonic seconds), whichever comes first. Transitions inserted later are stored
    but owe nothing."""

    why: str  # the condition met, one line (`StopAfter.reached`)
    target: float  # transitions sampled by the learner at which nothing is owed any more
    deadline: float  # monotonic time at which the run ends whatever is still owed

    @classmethod
    def begin(cls, why: str, limiter: RateLimiter, now: float, catch_up_s: float) -> RunEnding:
        # no ratio (sync mode) or still warming up: a budget of 0 or less, none owed
        return cls(why, limiter.budget(), now + catch_up_s)

    def owed(self, limiter: RateLimiter, batch_size: int) -> int:
        """Update calls (batches of `batch_size` rows) still owed."""
        return max(0, math.ceil((self.target - limiter.counts().sampled) / max(1, batch_size)))

    def due(self, limiter: RateLimiter, now: float) -> bool:
        """The run ends now: nothing owed any more, or the deadline passed."""
        return limiter.counts().sampled >= self.target or now >= self.deadline
