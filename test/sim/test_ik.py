"""The simulation's one IK (`user.sim.ik`), on both arms: a start pose is reached exactly, inside the joint limits
and near the home posture, or refused with an `IkError` naming it; `PriorityIk` itself never raises and returns
its best iterate with the residuals. (How the ARX controller uses it per target: test_arx_control.py.)"""

from __future__ import annotations

from dataclasses import dataclass, replace

import mujoco
import numpy as np
import pytest

from user.sim.arm_model import ArmModel
from user.sim.arx_model import arx_model
from user.sim.errors import IkError
from user.sim.franka_model import fr3_model
from user.sim.ik import START_POSE, IkSettings, PriorityIk, solve_ik

# Joint offsets from home (base to tip) to targets every arm reaches; the FR3 uses all seven.
OFFSETS = [
    (0.15, -0.1, 0.1, -0.2, 0.1, 0.15, -0.1),
    (-0.2, 0.15, -0.1, 0.1, -0.15, -0.1, 0.2),
]


@dataclass
class Arm:
    model: mujoco.MjModel
    site: int
    qpos: np.ndarray
    dofs: np.ndarray
    home: np.ndarray
    low: np.ndarray
    high: np.ndarray

    def pose(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Tool position and (w, x, y, z) orientation at joint positions `q`."""
        data = mujoco.MjData(self.model)
        data.qpos[self.qpos] = q
        mujoco.mj_kinematics(self.model, data)
        quat = np.zeros(4)
        mujoco.mju_mat2Quat(quat, data.site_xmat[self.site])
        return data.site_xpos[self.site].copy(), quat

    def start(self, position: np.ndarray, quat: np.ndarray) -> np.ndarray:
        """`solve_ik` from home."""
        return solve_ik(
            self.model,
            site_id=self.site,
            qpos_ids=self.qpos,
            dof_ids=self.dofs,
            seed=self.home,
            position=position,
            quat_wxyz=quat,
        )

    def solver(self, settings: IkSettings = START_POSE) -> PriorityIk:
        return PriorityIk(self.model, settings, site_id=self.site, qpos_ids=self.qpos, dof_ids=self.dofs)


def _arm(model_of: ArmModel) -> Arm:
    model = model_of.build().compile()
    joints = [model.joint(name) for name in model_of.joints]
    qpos = np.array([model.jnt_qposadr[j.id] for j in joints], dtype=np.int64)
    dofs = np.array([model.jnt_dofadr[j.id] for j in joints], dtype=np.int64)
    limits = np.array([model.jnt_range[j.id] for j in joints])
    site = int(model.site(model_of.tcp_site).id)
    return Arm(model, site, qpos, dofs, np.array(model_of.home), limits[:, 0], limits[:, 1])


@pytest.fixture(scope="module", params=["fr3", "arx_l5"])
def arm(request: pytest.FixtureRequest) -> Arm:
    return _arm(fr3_model() if request.param == "fr3" else arx_model())


def _angle(a: np.ndarray, b: np.ndarray) -> float:
    return float(2.0 * np.arccos(min(1.0, abs(float(a @ b)))))


@pytest.mark.parametrize("offset", OFFSETS)
def test_a_start_pose_is_reached_inside_the_limits_near_home(arm: Arm, offset: tuple[float, ...]) -> None:
    goal = np.clip(arm.home + np.array(offset[: len(arm.home)]), arm.low, arm.high)
    position, quat = arm.pose(goal)
    q = arm.start(position, quat)
    got_position, got_quat = arm.pose(q)
    assert np.linalg.norm(got_position - position) < 1e-5
    assert _angle(got_quat, quat) < 1e-4  # 1e-5 rad of axis-angle error, less rounding of the arccos
    assert np.all(q >= arm.low) and np.all(q <= arm.high)
    assert np.max(np.abs(q - arm.home)) < 1.0


def test_the_home_pose_solves_to_home(arm: Arm) -> None:
    position, quat = arm.pose(arm.home)
    q = arm.start(position, quat)
    np.testing.assert_allclose(q, arm.home, atol=1e-9)


def test_an_unreachable_start_pose_is_an_ik_error_naming_it(arm: Arm) -> None:
    _, quat = arm.pose(arm.home)
    with pytest.raises(IkError, match=r"the start pose \[2\.0, 0\.0, 0\.3\] .* is out of reach of the arm"):
        arm.start(np.array([2.0, 0.0, 0.3]), quat)


def test_the_solver_never_raises_and_returns_its_best_iterate(arm: Arm) -> None:
    ik = arm.solver()
    _, quat = arm.pose(arm.home)
    result = ik.solve(arm.home, np.array([2.0, 0.0, 0.3]), quat)
    assert not result.within(START_POSE.tolerance)
    assert result.position_error > 1.0  # the arm reaches about 1 m at most
    reached, _ = arm.pose(result.q)
    assert result.position_error == pytest.approx(float(np.linalg.norm(np.array([2.0, 0.0, 0.3]) - reached)))
    assert np.all(result.q >= arm.low) and np.all(result.q <= arm.high)


def test_the_posture_pull_keeps_the_redundant_arm_nearer_its_seed() -> None:
    arm = _arm(fr3_model())
    pull, free = arm.solver(), arm.solver(replace(START_POSE, posture_gain=0.0))
    for offset in OFFSETS:
        position, quat = arm.pose(np.clip(arm.home + np.array(offset), arm.low, arm.high))
        with_pull, without = pull.solve(arm.home, position, quat), free.solve(arm.home, position, quat)
        assert with_pull.within(START_POSE.tolerance) and without.within(START_POSE.tolerance)
        assert np.linalg.norm(with_pull.q - arm.home) <= np.linalg.norm(without.q - arm.home) + 1e-9
