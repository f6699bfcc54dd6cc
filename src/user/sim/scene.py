"""Scene composition with `MjSpec`: an arm (base at the origin, on the table top z = 0), the table, light,
a fixed front camera, a wrist camera, and whatever a task adds."""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from user.config import setting
from user.sim.arm_model import ArmModel
from user.sim.errors import SimError
from user.tasks.base import Task

FRONT_CAMERA = "front"
WRIST_CAMERA = "wrist"


@dataclass(frozen=True)
class SceneConfig:
    """Physics options and fixed scenery of a simulated work cell."""

    timestep: float = setting(
        0.002, "physics and controller step, s (0.002 s = 500 Hz, the slowest allowed)", min=1e-4, max=0.002
    )
    elliptic_cones: bool = setting(
        True, "elliptic friction cones (better grasps, a little slower) instead of pyramidal"
    )
    impratio: float = setting(10.0, "frictional-to-normal constraint impedance ratio (higher: less slip)", min=1.0)
    joint_friction_scale: float = setting(
        0.1,
        "fraction of the model's dry joint friction kept: the real arm's joint torque control compensates most "
        "of it; 1 keeps it all (then the tool sticks within ~1 mm of its target)",
        min=0.0,
        max=1.0,
    )
    table_size: tuple[float, float] = setting((1.2, 1.2), "table top extent along x and y, m (centred at x = 0.35)")
    front_camera_position: tuple[float, float, float] = setting((1.3, 0.0, 0.5), "front camera position, m, base frame")
    front_camera_target: tuple[float, float, float] = setting(
        (0.5, 0.0, 0.12), "point the front camera looks at, m, base frame"
    )
    front_camera_fovy: float = setting(50.0, "front camera vertical field of view, degrees", min=1.0, max=170.0)
    wrist_camera_fovy: float = setting(75.0, "wrist camera vertical field of view, degrees", min=1.0, max=170.0)


def look_at_quat(position: np.ndarray, target: np.ndarray) -> np.ndarray:
    """(w, x, y, z) orientation of a MuJoCo camera at `position` looking at `target`, image up ~ world +z."""
    forward = target - position
    norm = float(np.linalg.norm(forward))
    if norm < 1e-9:
        raise SimError("a camera cannot look at its own position")
    forward /= norm
    up = np.array([0.0, 0.0, 1.0]) if abs(forward[2]) < 0.99 else np.array([1.0, 0.0, 0.0])
    right = np.cross(forward, up)
    right /= np.linalg.norm(right)
    mat = np.column_stack([right, np.cross(right, forward), -forward])  # camera looks along its -z
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, mat.reshape(-1))
    return quat


def compose_scene(arm: ArmModel, task: Task | None, config: SceneConfig) -> mujoco.MjModel:
    """Compile the work cell; raises `SimError` when the task's additions do not compile."""
    spec = arm.build()
    spec.option.timestep = config.timestep
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC if config.elliptic_cones else mujoco.mjtCone.mjCONE_PYRAMIDAL
    spec.option.impratio = config.impratio
    spec.visual.headlight.ambient = [0.35, 0.35, 0.35]
    spec.visual.headlight.diffuse = [0.4, 0.4, 0.4]
    for name in arm.joints:
        joint = spec.joint(name)
        joint.frictionloss = joint.frictionloss * config.joint_friction_scale
    world = spec.worldbody
    sx, sy = config.table_size
    world.add_geom(
        name="table",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[sx / 2, sy / 2, 0.025],
        pos=[0.35, 0.0, -0.025],
        rgba=[0.55, 0.45, 0.35, 1.0],
    )
    world.add_light(name="sun", pos=[0.5, 0.0, 2.0], dir=[0.0, 0.0, -1.0], castshadow=False, diffuse=[0.6, 0.6, 0.6])
    front_pos = np.array(config.front_camera_position, dtype=np.float64)
    world.add_camera(
        name=FRONT_CAMERA,
        pos=front_pos.tolist(),
        quat=look_at_quat(front_pos, np.array(config.front_camera_target, dtype=np.float64)).tolist(),
        fovy=config.front_camera_fovy,
    )
    spec.body(arm.wrist_camera_body).add_camera(
        name=WRIST_CAMERA,
        pos=list(arm.wrist_camera_pos),
        quat=list(arm.wrist_camera_quat),
        fovy=config.wrist_camera_fovy,
    )
    if task is not None:
        task.build(world)
    try:
        return spec.compile()
    except ValueError as exc:
        raise SimError(f"the scene for task {getattr(task, 'name', None)!r} does not compile: {exc}") from exc
