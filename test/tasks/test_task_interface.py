"""Task construction, observation extras, rewards, success and failure tests."""

from __future__ import annotations

import numpy as np
import pytest

from user.config import ConfigError
from user.sim.robot import SimFrankaRobot
from user.tasks import (
    TASKS,
    ButtonPress,
    ButtonPressConfig,
    PegInsertion,
    PegInsertionConfig,
    PickPlace,
    PickPlaceConfig,
    TaskError,
    make_task,
)
from user.tasks.button_press import COLOURS


def test_registry_knows_the_three_tasks() -> None:
    assert set(TASKS) == {"peg_insertion", "pick_place", "button_press"}
    assert isinstance(make_task("peg_insertion"), PegInsertion)
    assert isinstance(make_task("pick_place"), PickPlace)
    assert isinstance(make_task("button_press"), ButtonPress)


def test_unknown_task_and_unknown_setting_are_errors() -> None:
    with pytest.raises(TaskError, match="known tasks"):
        make_task("stack_blocks")
    with pytest.raises(ConfigError, match="unknown key 'clearence'"):
        make_task("peg_insertion", {"clearence": 0.001})
    with pytest.raises(ConfigError, match="below the minimum"):
        make_task("peg_insertion", {"clearance": -0.001})


def test_settings_reach_the_task() -> None:
    task = make_task("peg_insertion", {"clearance": 0.001, "max_steps": 50})
    assert isinstance(task, PegInsertion)
    assert task.config.clearance == 0.001 and task.max_steps == 50
    config = PickPlaceConfig(cube_side=0.03)
    built = make_task("pick_place", config)  # a parsed config (the robot node's task_params) is taken as it is
    assert isinstance(built, PickPlace) and built.config is config
    with pytest.raises(TaskError, match="task peg_insertion: expected a PegInsertionConfig or its settings"):
        make_task("peg_insertion", config)
    assert [TASKS.settings_class(name) for name in TASKS] == [PegInsertionConfig, PickPlaceConfig, ButtonPressConfig]


@pytest.mark.parametrize("task", ["peg_insertion", "pick_place", "button_press"])
def test_start_is_not_a_success_and_reward_is_bounded(task: str, robots: dict[str, SimFrankaRobot]) -> None:
    robot = robots[task]
    assert robot.task is not None
    for seed in range(3):
        arm = robot.reset(seed)
        state = robot.task_state()
        assert not robot.task.success(arm, state)
        assert not robot.task.failure(arm, state)
        assert -1.0 < robot.task.reward(arm, state) <= 0.0  # every task's is a cost in (-1, 0]
        for value in robot.task.observation_extras(state).values():
            assert value.dtype == np.float32 and np.all(np.isfinite(value))


@pytest.mark.parametrize("task", ["peg_insertion", "pick_place", "button_press"])
def test_ending_the_episode_by_succeeding_is_always_best(task: str, robots: dict[str, SimFrankaRobot]) -> None:
    """A cost at every step of the expert's way (a positive reward paid a learned button presser to hover over the
    cap for the whole episode rather than press it and end)."""
    robot = robots[task]
    assert robot.task is not None
    arm = robot.reset(5)
    for _ in range(robot.task.max_steps):
        state = robot.task_state()
        assert robot.task.reward(arm, state) <= 0.0
        if robot.task.success(arm, state):
            break
        arm = robot.step(robot.task.scripted_expert(arm, state)).state
    else:
        pytest.fail(f"{task}: the expert did not succeed within {robot.task.max_steps} steps")


@pytest.mark.parametrize("task", ["peg_insertion", "pick_place", "button_press"])
def test_expert_raises_the_reward(task: str, robots: dict[str, SimFrankaRobot]) -> None:
    robot = robots[task]
    assert robot.task is not None
    arm = robot.reset(21)
    first = robot.task.reward(arm, robot.task_state())
    best = first
    for _ in range(robot.task.max_steps):
        state = robot.task_state()
        if robot.task.success(arm, state):
            break
        arm = robot.step(robot.task.scripted_expert(arm, state)).state
        best = max(best, robot.task.reward(arm, robot.task_state()))
    assert best > first + 0.2


def test_button_target_is_a_one_hot_that_varies_with_the_seed(robots: dict[str, SimFrankaRobot]) -> None:
    robot = robots["button_press"]
    seen = set()
    for seed in range(12):
        robot.reset(seed)
        onehot = robot.observation_extras()["target_color"]
        assert onehot.shape == (len(COLOURS),) and onehot.sum() == 1.0
        seen.add(int(np.argmax(onehot)))
    assert seen == {0, 1, 2}


def test_pressing_the_wrong_button_fails_the_episode(robots: dict[str, SimFrankaRobot]) -> None:
    robot = robots["button_press"]
    task = robot.task
    assert isinstance(task, ButtonPress)
    arm = robot.reset(0)
    state = robot.task_state()
    right = int(np.argmax(state.values["target_onehot"]))
    wrong = (right + 1) % len(COLOURS)
    cap = np.asarray(state.values["caps"])[wrong]
    decoy = ButtonPress(task.config, task.scale)  # an expert aimed at the other colour
    for _ in range(task.max_steps):
        state = robot.task_state()
        if task.failure(arm, state) or task.success(arm, state):
            break
        onehot = np.eye(len(COLOURS))[wrong]
        fake = type(state)(objects=state.objects, values={**state.values, "target_onehot": onehot})
        arm = robot.step(decoy.scripted_expert(arm, fake)).state
    assert task.failure(arm, robot.task_state()) and not task.success(arm, robot.task_state())
    assert np.linalg.norm(arm.tcp_pose[:2] - cap[:2]) < 0.01


def test_peg_success_needs_depth(robots: dict[str, SimFrankaRobot]) -> None:
    robot = robots["peg_insertion"]
    task = robot.task
    assert isinstance(task, PegInsertion)
    arm = robot.reset(0)
    state = robot.task_state()
    hole = np.asarray(state.values["hole_top"])
    shallow = type(state)(objects=state.objects, values={**state.values, "peg_tip": hole - [0.0, 0.0, 0.01]})
    deep = type(state)(objects=state.objects, values={**state.values, "peg_tip": hole - [0.0, 0.0, 0.035]})
    beside = type(state)(objects=state.objects, values={**state.values, "peg_tip": hole - [0.02, 0.0, 0.035]})
    assert not task.success(arm, shallow)
    assert task.success(arm, deep)
    assert not task.success(arm, beside)


def test_peg_reward_is_a_cost_and_extras_give_the_scaled_tool_to_hole_offset(
    robots: dict[str, SimFrankaRobot],
) -> None:
    robot = robots["peg_insertion"]
    task = robot.task
    assert isinstance(task, PegInsertion)
    arm = robot.reset(3)
    state = robot.task_state()
    assert -1.0 < task.reward(arm, state) < 0.0  # never positive: success ends the episode, so finishing pays
    extras = task.observation_extras(state)
    assert list(extras) == ["tool_to_hole"]
    expected = (np.asarray(state.values["hole_top"]) - arm.tcp_pose[:3]) * task.config.observation_scale
    np.testing.assert_allclose(extras["tool_to_hole"], expected, atol=1e-4)


def test_button_press_tells_a_state_policy_where_its_target_is(robots: dict[str, SimFrankaRobot]) -> None:
    """Without the target's place a policy from state cannot know where the drawn row is (it never learned)."""
    robot = robots["button_press"]
    task = robot.task
    assert isinstance(task, ButtonPress)
    arm = robot.reset(3)
    state = robot.task_state()
    cap = np.asarray(state.values["caps"])[int(np.argmax(state.values["target_onehot"]))]
    offset = robot.observation_extras()["tool_to_target"]
    np.testing.assert_allclose(offset, (cap - arm.tcp_pose[:3]) * task.config.observation_scale, atol=1e-4)
    start = float(np.linalg.norm(offset))
    for _ in range(15):
        arm = robot.step(task.scripted_expert(arm, robot.task_state())).state
    assert float(np.linalg.norm(robot.observation_extras()["tool_to_target"])) < 0.5 * start
