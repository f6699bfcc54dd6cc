"""The scripted corrector (issue 35, item 4): its path geometry, its hysteresis, and on the simulated arm: the
expert itself stays on its own path (the corrector never takes over from it), while a policy that drifts away is
taken over, brought back and handed back, and the episode still succeeds."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from test.tasks.runner import run_episode
from user.robots.base import ArmState
from user.sim.robot import SimFrankaRobot
from user.tasks.base import ExpertPath, Task, TaskError, TaskState
from user.tasks.corrector import Corrector, CorrectorConfig, distance_to_path
from user.tasks.registry import make_task

TASKS = ("button_press", "peg_insertion", "pick_place")
SEEDS = (0, 1, 2)
HOVER_AFTER = 8  # steps the hovering policy acts as the expert before it holds still
DRIFT_STEPS = 15  # steps the drifting policy pushes sideways before it acts as the expert


def test_distance_to_a_polyline_is_to_its_nearest_segment() -> None:
    path = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 0.0]])
    assert distance_to_path(np.array([0.5, 0.2, 0.0]), path) == pytest.approx(0.2)
    assert distance_to_path(np.array([1.3, 0.5, 0.0]), path) == pytest.approx(0.3)
    assert distance_to_path(np.array([-0.3, 0.0, 0.4]), path) == pytest.approx(0.5)  # before the start: to its end
    assert distance_to_path(np.array([0.0, 0.0, 2.0]), path[:1]) == pytest.approx(2.0)  # one point
    with pytest.raises(TaskError, match="finite"):
        distance_to_path(np.array([np.nan, 0.0, 0.0]), path)
    with pytest.raises(TaskError, match=r"\(N, 3\) path"):
        distance_to_path(np.zeros(3), np.zeros((0, 3)))


def test_it_takes_over_beyond_one_distance_and_hands_back_within_the_other() -> None:
    corrector = Corrector(CorrectorConfig(takeover_m=0.03, handback_m=0.01))
    ahead = np.array([[0.0, 0.0, -1.0]])  # the path: straight down from where the point starts

    def at(episode: int, x: float) -> bool:
        return corrector.decide(episode, ExpertPath(np.array([x, 0.0, 0.0]), ahead))[0]

    assert not at(1, 0.0)  # anchors the path
    assert not at(1, 0.02)  # between the two distances: still the policy's
    assert at(1, 0.04)  # beyond take-over
    assert at(1, 0.02)  # still beyond hand-back: stays in control
    assert not at(1, 0.005)  # handed back
    assert not at(1, 0.02)
    assert corrector.takeovers >= 1
    assert at(1, 0.05)
    assert not at(2, 0.05)  # a new episode anchors anew where the point is, and starts handed back
    assert corrector.takeovers == 2


def test_it_takes_over_from_a_point_that_stalls_on_the_path_until_it_is_further_along() -> None:
    corrector = Corrector(CorrectorConfig(stall_steps=5, stall_progress_m=0.005, resume_m=0.02))
    ahead = np.array([[0.0, 0.0, -1.0]])

    def at(step: int, z: float) -> bool:
        return corrector.decide(1, ExpertPath(np.array([0.0, 0.0, z]), ahead), step)[0]

    assert not any(at(i, -0.01 * i) for i in range(5))  # 1 cm a step along the path
    assert not at(5, -0.05)
    assert not any(at(6, -0.0501) for _ in range(10))  # one step seen again and again (a holding robot) is one
    assert not any(at(i, -0.051) for i in range(7, 9))
    assert at(9, -0.052)  # five steps with 2 mm of progress: stalled
    assert corrector.stalls == 1 and corrector.stalled_now
    assert at(10, -0.06)  # on the path but not 2 cm further along yet
    assert not at(11, -0.075)  # 2 cm further along: handed back
    assert corrector.takeovers == 1 and not corrector.stalled_now


def test_handback_must_be_nearer_than_takeover() -> None:
    with pytest.raises(TaskError, match="handback_m"):
        CorrectorConfig(takeover_m=0.02, handback_m=0.02)


@pytest.mark.parametrize("task", TASKS)
def test_the_expert_never_strays_from_its_own_path(task: str, robots: dict[str, SimFrankaRobot]) -> None:
    robot = robots[task]
    t = make_task(task)
    worst: list[float] = []

    def expert(arm: ArmState, state: TaskState) -> npt.NDArray[np.float32]:
        path = t.expert_path(arm, state)
        if not worst:
            worst.append(0.0)
            anchor.append(np.asarray(path.point))
        line = np.vstack([anchor[0][None, :], path.waypoints])
        worst[0] = max(worst[0], distance_to_path(path.point, line))
        return t.scripted_expert(arm, state)

    for seed in SEEDS:
        worst.clear()
        anchor: list[npt.NDArray[np.float64]] = []
        result = run_episode(robot, t, expert, seed)
        assert result.success, f"{task} seed {seed}: the expert failed"
        assert worst[0] < CorrectorConfig().takeover_m, f"{task} seed {seed}: {worst[0]:.3f} m off its own path"


@pytest.mark.parametrize("task", TASKS)
def test_a_drifting_policy_is_taken_over_and_handed_back(task: str, robots: dict[str, SimFrankaRobot]) -> None:
    """The 'policy' starts badly (sideways for its first DRIFT_STEPS steps, the gripper as the expert's), then acts
    as the expert would; the corrector takes over with the expert's action once the arm has strayed, hands back when
    it is near the path again, and the episode succeeds."""
    robot = robots[task]
    t = make_task(task)
    corrector = Corrector(CorrectorConfig())
    intervened: list[int] = []

    def gated(arm: ArmState, state: TaskState) -> npt.NDArray[np.float32]:
        step = len(intervened)
        acting, _ = corrector.decide(0, t.expert_path(arm, state), step)
        intervened.append(int(acting))
        action = t.scripted_expert(arm, state)
        if not acting and step < DRIFT_STEPS:
            action[:6] = 0.0
            action[1] = 0.5  # sideways at half the largest unit speed; the gripper as the expert holds it
        return action

    result = run_episode(robot, t, gated, 0)
    assert corrector.takeovers >= 1
    first = intervened.index(1)
    assert 0 < first < DRIFT_STEPS, "it did not take over while the arm drifted"
    assert not corrector.in_control and intervened[-1] == 0, "it never handed back"
    assert result.success, f"{task}: {sum(intervened)} of {result.steps} steps corrected, no success"


@pytest.mark.parametrize("task", TASKS)
def test_a_policy_that_stops_short_is_taken_over_and_the_task_done(
    task: str, robots: dict[str, SimFrankaRobot]
) -> None:
    """The 'policy' acts as the expert for its first HOVER_AFTER steps, then holds still (as a policy that learned to
    reach but not to finish); the corrector takes over for the stall and the episode succeeds."""
    robot = robots[task]
    t = make_task(task)
    corrector = Corrector(CorrectorConfig())
    steps: list[int] = []

    def hovering(arm: ArmState, state: TaskState) -> npt.NDArray[np.float32]:
        acting, _ = corrector.decide(0, t.expert_path(arm, state), len(steps))
        steps.append(int(acting))
        action = t.scripted_expert(arm, state)
        if not acting and len(steps) > HOVER_AFTER:
            action[:6] = 0.0  # still, the gripper as the expert holds it
        return action

    result = run_episode(robot, t, hovering, 0)
    assert corrector.stalls >= 1 and sum(steps) > 0
    assert result.success, f"{task}: {sum(steps)} of {result.steps} steps corrected, no success"


def test_a_task_without_a_path_says_so() -> None:
    z = np.zeros(7)
    arm = ArmState(0, np.array([0.0, 0.0, 0.3, 1.0, 0.0, 0.0, 0.0]), z[:6], z, z, gripper=1.0)
    with pytest.raises(TaskError, match="'button_press' has no expert path"):
        Task.expert_path(make_task("button_press"), arm, TaskState())  # the base class's: what a new task inherits
