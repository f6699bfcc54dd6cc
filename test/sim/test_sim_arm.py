"""`FrankaSim`, the physics layer: control period, impedance tracking, state, clock, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from user.sim.arm_sim import ArmSimConfig
from user.sim.errors import IkError, SimError, SimUnstableError
from user.sim.franka_sim import FrankaSim
from user.tasks.base import TOOL_DOWN, TaskStart
from user.tasks.peg_insertion import PegInsertion


@pytest.fixture(scope="module")
def sim() -> FrankaSim:
    return FrankaSim()


def test_one_control_period_is_fifty_physics_steps_at_500_hz(sim: FrankaSim) -> None:
    assert sim.model.opt.timestep == pytest.approx(0.002)
    assert sim.substeps == 50
    assert sim.period_s == pytest.approx(0.1)


def test_zero_motion_command_holds_the_pose_against_gravity(sim: FrankaSim) -> None:
    start = sim.reset(0)
    sim.command(start.tcp_pose, start.gripper)
    sim.advance(10)
    assert np.linalg.norm(sim.read_state().tcp_pose[:3] - start.tcp_pose[:3]) < 1e-3


def test_impedance_controller_reaches_a_target_pose(sim: FrankaSim) -> None:
    start = sim.reset(0)
    target = start.tcp_pose.copy()
    target[:3] += [0.05, -0.08, -0.1]
    sim.command(target, 1.0)
    sim.advance(10)  # one second
    state = sim.read_state()
    assert np.linalg.norm(state.tcp_pose[:3] - target[:3]) < 2e-3
    assert min(np.linalg.norm(state.tcp_pose[3:] - target[3:]), np.linalg.norm(state.tcp_pose[3:] + target[3:])) < 0.02
    assert np.linalg.norm(state.tcp_velocity) < 0.05


def test_gripper_opens_and_closes(sim: FrankaSim) -> None:
    start = sim.reset(0)
    sim.command(start.tcp_pose, 0.0)
    sim.advance(5)
    assert sim.read_state().gripper < 0.05
    sim.command(start.tcp_pose, 1.0)
    sim.advance(5)
    assert sim.read_state().gripper > 0.95


def test_state_has_the_documented_shapes(sim: FrankaSim) -> None:
    state = sim.reset(1)
    assert state.tcp_pose.shape == (7,) and state.tcp_velocity.shape == (6,)
    assert state.joint_positions.shape == (7,) and state.joint_velocities.shape == (7,)
    assert np.linalg.norm(state.tcp_pose[3:]) == pytest.approx(1.0)
    assert 0.0 <= state.gripper <= 1.0
    assert state.vector().dtype == np.float32


def test_sim_clock_advances_per_period_and_never_goes_back_across_resets(sim: FrankaSim) -> None:
    a = sim.reset(0).stamp_ns
    sim.advance()
    b = sim.read_state().stamp_ns
    assert b - a == 100_000_000
    c = sim.reset(0).stamp_ns
    assert c > b


def test_reset_puts_the_tool_at_the_tasks_start_with_the_peg_in_hand() -> None:
    task = PegInsertion()
    sim = FrankaSim(task)
    state = sim.reset(5)
    start = task.sample_start(np.random.default_rng(5))
    assert np.linalg.norm(state.tcp_pose[:3] - start.tcp_pose[:3]) < 2e-3
    peg = sim.task_state().objects["peg"].pose
    assert np.linalg.norm(peg[:3] - state.tcp_pose[:3]) < task.config.peg_length / 2  # between the fingers
    assert 0.05 < state.gripper < 0.5  # closed on the 2 cm peg, not empty


def test_unreachable_start_is_an_ik_error() -> None:
    class FarTask(PegInsertion):
        def sample_start(self, rng: np.random.Generator) -> TaskStart:
            return TaskStart(np.concatenate([[2.0, 0.0, 0.3], TOOL_DOWN]), gripper=1.0)

    with pytest.raises(IkError, match="out of reach"):
        FrankaSim(FarTask())


def test_bad_command_is_refused(sim: FrankaSim) -> None:
    sim.reset(0)
    with pytest.raises(SimError):
        sim.command(np.full(7, np.nan), 0.5)


def test_diverging_physics_raises_instead_of_silently_resetting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # should MuJoCo still write its log file, it lands here
    sim = FrankaSim(config=ArmSimConfig())
    sim.data.qvel[:] = 1e12
    with pytest.raises(SimUnstableError, match="reset the episode"):
        sim.advance()
