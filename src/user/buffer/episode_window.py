"""Episode outcomes and the recent window over them: one definition of "how well is the policy doing" for every
place a user looks (`user buffer info`, the learner's progress.csv, TensorBoard and learning curve, the
monitor's line).

The window holds the latest `window` episodes a policy acted in, per robot, per task (one policy trained on
several tasks) and pooled over all robots.
Demonstrations (episodes whose every step is a demo) are left out: they show what the expert does, not what
was learned. Over the window: the mean return, the last episode's return, the mean length in steps, the
success rate and the mean number of steps in which a human intervened.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from user.buffer.index import Index
from user.buffer.rows import EpisodeRow

RECENT_EPISODES = 20  # the window every figure of recent episodes is taken over


@dataclass(frozen=True)
class EpisodeOutcome:
    """How one episode went."""

    robot_id: str
    episode_id: int  # the robot's episode number
    steps: int  # transitions in the episode
    episode_return: float  # sum of its rewards
    success: bool  # the task was achieved in it
    interventions: int  # steps in which a human overrode the policy
    is_demo: bool  # a demonstration (scripted expert or replayed demo), not acted by the policy
    task: str = ""  # the task it was an episode of ("": not known, e.g. a row of an older episodes.csv)


@dataclass(frozen=True)
class WindowStats:
    """A window of online episodes summarised (never empty: no episodes, no stats)."""

    episodes: int  # episodes in the window
    mean_return: float
    last_return: float  # the newest episode's return
    mean_length: float  # steps
    success_rate: float  # successful episodes / episodes
    mean_interventions: float  # intervened steps per episode


def summarise(outcomes: Sequence[EpisodeOutcome]) -> WindowStats | None:
    """`outcomes` (oldest first) summarised; None when there are none."""
    if not outcomes:
        return None
    n = len(outcomes)
    return WindowStats(
        episodes=n,
        mean_return=sum(o.episode_return for o in outcomes) / n,
        last_return=outcomes[-1].episode_return,
        mean_length=sum(o.steps for o in outcomes) / n,
        success_rate=sum(1 for o in outcomes if o.success) / n,
        mean_interventions=sum(o.interventions for o in outcomes) / n,
    )


class RecentEpisodes:
    """The latest `window` online episodes, per robot, per task and pooled; demonstrations are not added."""

    def __init__(self, window: int = RECENT_EPISODES, outcomes: Iterable[EpisodeOutcome] = ()) -> None:
        if window < 1:
            raise ValueError(f"window: {window} episodes; it must be at least 1")
        self.window = window
        self._pooled: deque[EpisodeOutcome] = deque(maxlen=window)
        self._robots: dict[str, deque[EpisodeOutcome]] = {}
        self._tasks: dict[str, deque[EpisodeOutcome]] = {}
        for outcome in outcomes:
            self.add(outcome)

    def add(self, outcome: EpisodeOutcome) -> bool:
        """Take one finished episode (oldest first); False (and nothing kept) for a demonstration."""
        if outcome.is_demo:
            return False
        self._pooled.append(outcome)
        self._robots.setdefault(outcome.robot_id, deque(maxlen=self.window)).append(outcome)
        self._tasks.setdefault(outcome.task, deque(maxlen=self.window)).append(outcome)
        return True

    def pooled(self) -> WindowStats | None:
        """The latest `window` online episodes of all robots; None before the first."""
        return summarise(list(self._pooled))

    def robots(self) -> dict[str, WindowStats]:
        """Each robot's latest `window` online episodes, by robot id."""
        return _summarised(self._robots)

    def tasks(self) -> dict[str, WindowStats]:
        """Each task's latest `window` online episodes (all its robots'), by task name."""
        return _summarised(self._tasks)


def _summarised(windows: dict[str, deque[EpisodeOutcome]]) -> dict[str, WindowStats]:
    out = {key: summarise(list(q)) for key, q in sorted(windows.items())}
    return {key: stats for key, stats in out.items() if stats is not None}


def outcome(episode: EpisodeRow) -> EpisodeOutcome:
    """How stored `episode` went."""
    e = episode
    return EpisodeOutcome(
        e.robot_id, e.episode_id, e.steps, e.episode_return, e.success, e.interventions, e.is_demo, e.task
    )


def recent_outcomes(index: Index, window: int = RECENT_EPISODES) -> list[EpisodeOutcome]:
    """Each robot's and each task's latest `window` online episodes, oldest first. Fed to `RecentEpisodes(window)`
    they fill every window exactly: an episode among the latest `window` of all robots is among its robot's latest,
    and what else is fed to a robot's or a task's window is older than its latest `window` (pushed out by them)."""
    return [outcome(row) for row in index.recent_episodes(window)]


def latest_outcome(index: Index) -> EpisodeOutcome | None:
    """How the buffer's newest stored episode went; None when it holds none."""
    row = index.last_episode()
    return outcome(row) if row is not None else None


def stored_tasks(index: Index) -> set[str]:
    """The tasks of the buffer's stored episodes, demonstrations included."""
    return set(index.task_episodes())


def episode_counts(index: Index) -> dict[str, tuple[int, int]]:
    """Each robot's stored episodes: (online, demonstrations), by robot id."""
    return {r.robot_id: (r.episodes - r.demo_episodes, r.demo_episodes) for r in index.robot_episodes()}
