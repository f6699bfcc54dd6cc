"""ArmRobot on a tiny kinematic point-mass driver: target accumulation, hold, e-stop, watchdog, clipping."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import pytest

from test.robots.driving import drive_once, watchdog_for_rate
from user.robots import rotations as rot
from user.robots.arm import ArmRobot, EStopError
from user.robots.base import ArmState, NotConnectedError, RobotDescriptor, RobotError
from user.robots.safety import SafetyConfig
from user.robots.watchdog import ActionWatchdog

DOWN = rot.from_euler(math.pi, 0.0, 0.0)
START = np.concatenate([[0.5, 0.0, 0.3], DOWN])
RATE_HZ = 10.0
PERIOD_S = 1.0 / RATE_HZ
STEP_M = 0.02
SENSOR_BIAS = np.array([0.003, -0.002, 0.001])  # what the "encoders" get wrong, constantly


class PointMassArm(ArmRobot):
    """Test double: the TCP covers half the way to its set-point each period; readings carry a bias."""

    def __init__(self, safety: SafetyConfig | None = None) -> None:
        super().__init__(
            RobotDescriptor(robot_id="pm", model="point_mass_test", dof=0, control_rate_hz=RATE_HZ),
            safety or SafetyConfig(max_translation_per_step_m=STEP_M),
        )
        self.pose = START.copy()
        self.gripper = 1.0
        self.setpoint: tuple[npt.NDArray[np.float64], float] | None = None
        self.commands: list[tuple[npt.NDArray[np.float64], float]] = []
        self.periods = 0
        self.opened = False
        self.fail_commands = False

    def _connect(self) -> None:
        self.opened = True

    def _close(self) -> None:
        self.opened = False

    def _reset(self, seed: int | None) -> ArmState:
        self.pose = START.copy()
        if seed is not None:  # a seeded reset randomises x and y; an unseeded one starts exactly at START
            self.pose[:2] += np.random.default_rng(seed).uniform(-0.05, 0.05, size=2)
        self.setpoint = None
        return self._read_state()

    def _read_state(self) -> ArmState:
        measured = self.pose.copy()
        measured[:3] += SENSOR_BIAS
        return ArmState(
            stamp_ns=int(self.periods * PERIOD_S * 1e9),
            tcp_pose=measured,
            tcp_velocity=np.zeros(6),
            joint_positions=np.zeros(0),
            joint_velocities=np.zeros(0),
            gripper=self.gripper,
        )

    def _command(self, target_pose: npt.NDArray[np.float64], gripper: float) -> None:
        if self.fail_commands:
            raise RobotError("controller refused the set-point (reflex)")
        self.setpoint = (target_pose.copy(), gripper)
        self.commands.append(self.setpoint)

    def _wait_period(self) -> None:
        self.periods += 1
        if self.setpoint is not None:
            target, gripper = self.setpoint
            self.pose[:3] += 0.5 * (target[:3] - self.pose[:3])
            self.pose[3:] = target[3:]
            self.gripper = gripper


def act(*values: float) -> np.ndarray:
    a = np.zeros(7, np.float32)
    a[: len(values)] = values
    a[6] = 1.0  # keep the gripper open
    return a


def target_of(robot: ArmRobot) -> npt.NDArray[np.float64]:
    target = robot.target_pose
    assert target is not None
    return target


@pytest.fixture
def arm() -> PointMassArm:
    robot = PointMassArm()
    robot.connect()
    robot.reset(seed=0)
    return robot


def test_calls_before_connect_raise_not_connected() -> None:
    robot = PointMassArm()
    for call in (lambda: robot.step(act()), lambda: robot.hold("x"), robot.reset, robot.state):
        with pytest.raises(NotConnectedError, match="'pm' is not connected"):
            call()


def test_connect_and_close_are_idempotent() -> None:
    robot = PointMassArm()
    robot.connect()
    robot.connect()
    assert robot.connected and robot.opened
    robot.close()
    robot.close()
    assert not robot.connected and not robot.opened
    assert robot.target_pose is None


def test_action_space_is_the_normalised_cartesian_delta() -> None:
    space = PointMassArm().action_space
    assert space.shape == (7,)
    assert space.names == ("dx", "dy", "dz", "droll", "dpitch", "dyaw", "gripper")
    assert space.contains(np.ones(7, np.float32)) and not space.contains(np.full(7, 1.5, np.float32))


def test_reset_takes_the_measured_pose_as_target(arm: PointMassArm) -> None:
    state = arm.reset(seed=3)
    target = target_of(arm)
    np.testing.assert_allclose(target, state.tcp_pose)
    assert arm.gripper_target == 1.0


def test_steps_accumulate_on_the_commanded_target_not_the_measured_pose(arm: PointMassArm) -> None:
    start = target_of(arm)
    for _ in range(3):
        result = arm.step(act(1.0, -0.5))
        assert not result.held and not result.clipped
        np.testing.assert_array_equal(result.applied, act(1.0, -0.5))
    target = target_of(arm)
    np.testing.assert_allclose(target[:3], start[:3] + np.array([3 * STEP_M, -1.5 * STEP_M, 0.0]))
    measured = arm.state().tcp_pose
    assert not np.allclose(measured[:3], target[:3], atol=1e-3)  # lag + bias: the measurement is elsewhere
    np.testing.assert_allclose(arm.commands[-1][0], target)


def test_hold_keeps_the_last_target(arm: PointMassArm) -> None:
    arm.step(act(1.0))
    target = target_of(arm)
    result = arm.hold("operator pause")
    assert result.held and result.reasons == ("operator pause",)
    np.testing.assert_array_equal(result.applied, np.zeros(7, np.float32))
    np.testing.assert_array_equal(arm.target_pose, target)
    np.testing.assert_array_equal(arm.commands[-1][0], target)
    for _ in range(10):
        arm.hold("operator pause")
    np.testing.assert_allclose(arm.pose[:3], target[:3], atol=1e-5)


@pytest.mark.parametrize("bad", [act(float("nan")), np.zeros(6, np.float32), act(0, 0, float("inf"))])
def test_bad_actions_hold_without_motion(arm: PointMassArm, bad: np.ndarray) -> None:
    target = target_of(arm)
    for _ in range(5):
        result = arm.step(bad)
        assert result.held and "action rejected" in result.reasons[0]
        np.testing.assert_array_equal(result.applied, np.zeros(7, np.float32))
    np.testing.assert_array_equal(arm.target_pose, target)
    assert all(np.array_equal(cmd[0], target) for cmd in arm.commands)
    twin = PointMassArm()
    twin.connect()
    twin.reset(seed=0)
    for _ in range(5):
        twin.hold("reference")
    np.testing.assert_array_equal(arm.pose, twin.pose)  # exactly where holding alone leaves it


def test_clipped_flag_and_reasons_reach_the_step_result() -> None:
    arm = PointMassArm(SafetyConfig(max_translation_per_step_m=STEP_M, workspace_max=(0.51, 0.35, 0.55)))
    arm.connect()
    arm.reset(seed=None)  # target = START + SENSOR_BIAS, x = 0.503
    target = target_of(arm)
    result = arm.step(act(1.0, 2.0))
    assert result.clipped and not result.held
    assert any(r.startswith("dy ") for r in result.reasons)
    assert any(r.startswith("x target") and "workspace" in r for r in result.reasons)
    assert result.applied[1] == 1.0
    assert result.applied[0] == pytest.approx((0.51 - target[0]) / STEP_M, abs=1e-5)
    assert target_of(arm)[0] == pytest.approx(0.51)


def test_estop_latches_until_cleared(arm: PointMassArm) -> None:
    arm.step(act(1.0))
    target = target_of(arm)
    arm.estop("light curtain broken")
    assert arm.estopped and arm.estop_reason == "light curtain broken"
    for _ in range(5):
        result = arm.step(act(1.0, 1.0, 1.0))
        assert result.held
        assert result.reasons == ("e-stop latched: light curtain broken",)
    np.testing.assert_array_equal(arm.target_pose, target)
    with pytest.raises(EStopError, match="light curtain broken"):
        arm.reset(seed=1)
    held = arm.hold("watchdog")
    assert held.reasons == ("watchdog", "e-stop latched: light curtain broken")
    arm.estop("second reason")
    assert arm.estop_reason == "light curtain broken"  # the first cause is kept
    arm.clear_estop()
    assert not arm.estopped
    measured = arm.state().tcp_pose
    np.testing.assert_allclose(arm.target_pose, measured)
    moved = arm.step(act(1.0))
    assert not moved.held
    assert target_of(arm)[0] == pytest.approx(measured[0] + STEP_M)


def test_a_driver_failure_latches_the_estop(arm: PointMassArm) -> None:
    arm.fail_commands = True
    with pytest.raises(RobotError, match="reflex"):
        arm.step(act(1.0))
    assert arm.estopped and "sending the target failed" in (arm.estop_reason or "")
    arm.fail_commands = False
    assert arm.step(act(1.0)).held


def test_step_without_reset_starts_from_the_measured_pose() -> None:
    robot = PointMassArm()
    robot.connect()
    result = robot.step(act(0.0, 0.0, 1.0))
    assert not result.held
    expected = START[:3] + SENSOR_BIAS + np.array([0.0, 0.0, STEP_M])
    np.testing.assert_allclose(target_of(robot)[:3], expected)


def test_an_invalid_measured_pose_is_refused() -> None:
    robot = PointMassArm()
    robot.connect()
    robot.pose[0] = np.nan
    with pytest.raises(RobotError, match="invalid TCP pose"):
        robot.step(act())
    assert robot.estopped


def test_watchdog_makes_the_arm_hold_within_two_control_periods(arm: PointMassArm) -> None:
    now = [0.0]
    watchdog = watchdog_for_rate(RATE_HZ, clock=lambda: now[0])
    start = target_of(arm)
    steps = 0
    last_fed = 0.0
    held_at: float | None = None
    for tick in range(40):
        t = tick * PERIOD_S
        now[0] = t
        result = drive_once(arm, watchdog, t)
        if tick < 20:
            assert not result.held or tick == 0
        elif result.held and held_at is None:
            held_at = t
            assert "no fresh action for" in result.reasons[0]
        if held_at is not None:
            assert result.held  # and it stays held
        steps += not result.held
        if tick < 20:  # the policy publishes a bit after each tick, then stalls
            last_fed = t + 0.37 * PERIOD_S
            now[0] = last_fed
            watchdog.feed(act(0.1))
    assert held_at is not None
    assert held_at - last_fed <= 2 * PERIOD_S
    assert steps == 20  # ticks 1..20 used fresh actions; tick 0 had none yet
    assert target_of(arm)[0] == pytest.approx(start[0] + steps * 0.1 * STEP_M)


def test_watchdog_holds_before_the_first_action(arm: PointMassArm) -> None:
    watchdog = ActionWatchdog(0.1, clock=lambda: 0.0)
    result = drive_once(arm, watchdog)
    assert result.held and result.reasons == ("no action received yet",)
