"""GymRobot on Pendulum-v1: scaling to the env's bounds, seeding, holding without stepping the env; the env's own
episode limit; gymnasium's MuJoCo envs out of the box; an env whose module is missing."""

from __future__ import annotations

import numpy as np
import pytest

from user.robots.base import NotConnectedError, RobotError
from user.robots.gym_robot import GymRobot, GymState, rescale

gymnasium = pytest.importorskip("gymnasium")


@pytest.fixture
def pendulum() -> GymRobot:
    robot = GymRobot("Pendulum-v1", robot_id="pend", clock_ns=lambda: 42)
    robot.connect()
    robot.reset(seed=0)
    return robot


def a(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def test_descriptor_and_action_space() -> None:
    robot = GymRobot("Pendulum-v1")
    assert robot.descriptor.model == "gym:Pendulum-v1"
    assert robot.descriptor.robot_id == "gym_Pendulum-v1"
    assert robot.descriptor.dof == 1
    assert robot.descriptor.control_rate_hz == pytest.approx(20.0)  # 1 / dt
    assert robot.action_space.shape == (1,)
    assert robot.action_space.low.tolist() == [-1.0] and robot.action_space.high.tolist() == [1.0]
    assert GymRobot("Pendulum-v1", control_rate_hz=5.0).descriptor.control_rate_hz == 5.0


def test_rescale_maps_the_unit_box_onto_the_bounds() -> None:
    low, high = np.array([-2.0, 0.0, 10.0]), np.array([2.0, 1.0, 30.0])
    np.testing.assert_allclose(rescale(np.array([-1.0, -1.0, -1.0]), low, high), low)
    np.testing.assert_allclose(rescale(np.array([1.0, 1.0, 1.0]), low, high), high)
    np.testing.assert_allclose(rescale(np.array([0.0, 0.5, -0.5]), low, high), [0.0, 0.75, 15.0])


@pytest.mark.parametrize(("unit", "torque"), [(0.5, 1.0), (-1.0, -2.0), (0.0, 0.0), (1.0, 2.0)])
def test_actions_are_scaled_to_the_env_bounds(pendulum: GymRobot, unit: float, torque: float) -> None:
    result = pendulum.step(a(unit))
    assert not result.held and not result.clipped
    assert pendulum.env.unwrapped.last_u == pytest.approx(torque)
    np.testing.assert_array_equal(result.applied, a(unit))


def test_out_of_range_actions_are_clipped_and_reported(pendulum: GymRobot) -> None:
    result = pendulum.step(a(3.0))
    assert result.clipped and not result.held
    assert result.applied.tolist() == [1.0]
    assert result.reasons == ("a0 +3 is outside [-1, 1], clipped",)
    assert pendulum.env.unwrapped.last_u == pytest.approx(2.0)


def test_the_state_is_the_observation(pendulum: GymRobot) -> None:
    state = pendulum.reset(seed=5)
    obs, _ = pendulum.env.reset(seed=5)
    assert isinstance(state, GymState)
    np.testing.assert_allclose(state.joint_positions, obs)
    np.testing.assert_array_equal(state.vector(), obs)
    assert state.vector().dtype == np.float32
    assert state.stamp_ns == 42
    assert pendulum.state() is state


def test_reward_and_episode_flags_are_exposed(pendulum: GymRobot) -> None:
    result = pendulum.step(a(0.2))
    assert pendulum.last_reward < 0.0  # Pendulum's reward is minus a cost
    assert not pendulum.last_terminated and not pendulum.last_truncated
    assert isinstance(pendulum.last_info, dict)
    assert result.state is pendulum.state()


def test_same_seed_same_trajectory_different_seed_different_start() -> None:
    def rollout(seed: int) -> np.ndarray:
        robot = GymRobot("Pendulum-v1")
        robot.connect()
        states = [robot.reset(seed=seed).joint_positions]
        for u in np.linspace(-1.0, 1.0, 15, dtype=np.float32):
            states.append(robot.step(a(float(u))).state.joint_positions)
        robot.close()
        return np.stack(states)

    np.testing.assert_array_equal(rollout(7), rollout(7))
    assert not np.allclose(rollout(7)[0], rollout(8)[0])


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (a(float("nan")), "non-finite values (a0=nan)"),
        (a(float("inf")), "non-finite"),
        (a(0.1, 0.2), "shape (2,)"),
        (np.zeros(1, np.int32), "dtype int32"),
        ([0.5], "numpy array"),
    ],
)
def test_bad_actions_hold_without_stepping_the_env(pendulum: GymRobot, bad: object, message: str) -> None:
    physics = pendulum.env.unwrapped.state.copy()
    before = pendulum.state()
    elapsed = pendulum.env._elapsed_steps
    result = pendulum.step(bad)  # type: ignore[arg-type]
    assert result.held and message in result.reasons[0]
    assert result.applied.tolist() == [0.0]
    assert result.state is before
    np.testing.assert_array_equal(pendulum.env.unwrapped.state, physics)
    assert pendulum.env._elapsed_steps == elapsed


def test_hold_does_not_step_the_env(pendulum: GymRobot) -> None:
    physics = pendulum.env.unwrapped.state.copy()
    result = pendulum.hold("no fresh action for 120 ms")
    assert result.held and result.reasons == ("no fresh action for 120 ms",)
    np.testing.assert_array_equal(pendulum.env.unwrapped.state, physics)


def test_after_truncation_steps_hold_until_reset(pendulum: GymRobot) -> None:
    for _ in range(200):  # Pendulum-v1 is truncated at 200 steps
        pendulum.step(a(0.0))
    assert pendulum.last_truncated and pendulum.episode_over
    result = pendulum.step(a(0.0))
    assert result.held and "episode is over" in result.reasons[0]
    pendulum.reset(seed=1)
    assert not pendulum.step(a(0.0)).held


def test_use_before_connect_or_reset_is_an_error() -> None:
    robot = GymRobot("Pendulum-v1")
    with pytest.raises(NotConnectedError):
        robot.step(a(0.0))
    robot.connect()
    with pytest.raises(RobotError, match="call reset"):
        robot.step(a(0.0))
    robot.close()
    robot.close()
    robot.connect()  # the env is made again
    robot.reset(seed=0)
    assert not robot.step(a(0.0)).held


@pytest.mark.parametrize(("env_id", "message"), [("CartPole-v1", "Discrete"), ("NoSuchEnv-v0", "cannot make")])
def test_envs_that_cannot_be_robots_are_refused(env_id: str, message: str) -> None:
    with pytest.raises(RobotError, match=message):
        GymRobot(env_id)


def test_the_env_s_own_episode_limit_is_known() -> None:
    assert GymRobot("Pendulum-v1").max_episode_steps == 200  # its registered TimeLimit
    unlimited = "UserTest/PendulumWithoutLimit-v0"
    if unlimited not in gymnasium.registry:
        gymnasium.register(unlimited, entry_point="gymnasium.envs.classic_control.pendulum:PendulumEnv")
    robot = GymRobot(unlimited)
    assert robot.max_episode_steps is None
    robot.connect()
    robot.close()
    assert robot.max_episode_steps is None and GymRobot("Pendulum-v1").max_episode_steps == 200


@pytest.mark.parametrize("env_id", ["InvertedPendulum-v5", "InvertedPendulum-v4", "Hopper-v5"])
def test_mujoco_envs_start_and_step_out_of_the_box(env_id: str) -> None:
    pytest.importorskip("mujoco")  # gymnasium's MuJoCo envs also import imageio: a main dependency
    robot = GymRobot(env_id)
    robot.connect()
    try:
        start = robot.reset(seed=0).vector()
        result = robot.step(np.full(robot.action_space.shape, 0.5, np.float32))
        assert not result.held and not result.clipped
        assert not np.array_equal(result.state.vector(), start)  # the simulation moved
        assert robot.max_episode_steps == 1000  # their own limit, not the driver's fallback of 200
    finally:
        robot.close()


def test_an_env_whose_module_is_missing_is_refused_naming_the_module() -> None:
    env_id = "UserTest/NeedsAMissingModule-v0"
    if env_id not in gymnasium.registry:
        gymnasium.register(env_id, entry_point="user_test_module_that_is_not_installed:Env")
    with pytest.raises(RobotError, match=r"needs the Python module 'user_test_module_that_is_not_installed'"):
        GymRobot(env_id)
