"""What the report draws and tabulates, computed from a run's typed rows (no plotting here).

- the learning curves: the run log's (`user.learner.run_log.curves`, the same as learning_curve.png's);
- per robot: success and intervention rates of its online episodes;
- the intervened steps of each online episode in the order they were stored (HG-DAgger's measure of progress: a
  person corrects the policy less and less as it learns);
- the learner's pipeline over time: gradient steps per second, idle fraction, policy version, from progress.csv.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from user.learner.run_log import EpisodeRow, ProgressRow


@dataclass(frozen=True)
class RobotRates:
    """One robot's episodes; the rates are over its online (policy-acted) episodes."""

    robot_id: str
    demo_episodes: int
    online_episodes: int
    online_successes: int
    online_steps: int
    intervened_steps: int  # online steps in which a human overrode the policy
    intervened_episodes: int  # online episodes with at least one intervened step

    @property
    def success_rate(self) -> float | None:
        return self.online_successes / self.online_episodes if self.online_episodes else None

    @property
    def intervention_rate(self) -> float | None:
        """Intervened steps / online steps."""
        return self.intervened_steps / self.online_steps if self.online_steps else None


@dataclass(frozen=True)
class Interventions:
    """Each online episode's intervened steps, in the order the learner stored the episodes (all robots)."""

    robot_ids: list[str]  # whose episode each one is
    steps: list[int]  # intervened steps of each

    def first_and_last(self, n: int) -> tuple[float, float] | None:
        """Mean intervened steps per episode of the first `n` and of the last `n` online episodes; None with fewer
        than `n` episodes."""
        if n < 1 or len(self.steps) < n:
            return None
        return sum(self.steps[:n]) / n, sum(self.steps[-n:]) / n

    def moving_mean(self, n: int) -> list[float]:
        """Mean of each episode's intervened steps and those of up to `n` - 1 episodes before it."""
        out: list[float] = []
        total = 0
        for i, v in enumerate(self.steps):
            total += v - (self.steps[i - n] if i >= n else 0)
            out.append(total / min(i + 1, n))
        return out


@dataclass
class Timing:
    """The learner's figures at each progress row; `seconds` from the run's start."""

    seconds: list[float] = field(default_factory=list)
    env_steps: list[int] = field(default_factory=list)
    gradient_steps_per_s: list[float] = field(default_factory=list)
    idle_fraction: list[float | None] = field(default_factory=list)  # None: not recorded in that row
    policy_version: list[int] = field(default_factory=list)
    gradient_steps: list[int] = field(default_factory=list)
    buffer_transitions: list[int] = field(default_factory=list)

    @property
    def idle_recorded(self) -> list[tuple[float, float]]:
        """(seconds, idle fraction) of the rows that have it."""
        return [(s, f) for s, f in zip(self.seconds, self.idle_fraction, strict=True) if f is not None]

    @property
    def updates_per_step(self) -> float | None:
        """Gradient steps per received transition at the last row (the update-to-data ratio reached)."""
        if not self.env_steps or self.env_steps[-1] == 0:
            return None
        return self.gradient_steps[-1] / self.env_steps[-1]


def robot_rates(episodes: Sequence[EpisodeRow]) -> list[RobotRates]:
    """Per robot (by id), its demonstrations counted apart from its online episodes."""
    counts: dict[str, list[int]] = {}
    for row in episodes:
        c = counts.setdefault(row.robot_id, [0] * 6)
        if row.is_demo:
            c[0] += 1
            continue
        c[1] += 1
        c[2] += int(row.success)
        c[3] += row.steps
        c[4] += row.interventions
        c[5] += int(row.interventions > 0)
    return [RobotRates(robot, *c) for robot, c in sorted(counts.items())]


def interventions(episodes: Sequence[EpisodeRow]) -> Interventions:
    """The online episodes' intervened steps, in stored order (demonstrations left out)."""
    online = [row for row in episodes if not row.is_demo]
    return Interventions([row.robot_id for row in online], [row.interventions for row in online])


def timing(progress: Sequence[ProgressRow], run_start: float | None) -> Timing:
    """The progress rows as series; their times from `run_start` (the first row's when None)."""
    t = Timing()
    if not progress:
        return t
    start = run_start if run_start is not None else progress[0].wall_time
    for row in progress:
        t.seconds.append(row.wall_time - start)
        t.env_steps.append(row.env_steps)
        t.gradient_steps_per_s.append(row.gradient_steps_per_s)
        t.idle_fraction.append(row.idle_fraction)
        t.policy_version.append(row.policy_version)
        t.gradient_steps.append(row.gradient_steps)
        t.buffer_transitions.append(row.buffer_transitions)
    return t
