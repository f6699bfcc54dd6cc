"""What the simulation needs to know about one arm model, whatever its make (Franka, ARX, ...).

A driver-independent description: the scene composer, controller, IK and the sim class only read these
fields, so a 6-DoF arm plugs in by providing another `ArmModel`.

Contract of `build()`: a fresh `MjSpec` of the arm alone, base at the world origin, with
- one torque actuator (motor, gear 1, ctrl = joint torque in N m, ctrlrange = the joint's torque limit, so
  MuJoCo clamps the controller's output) per arm joint, named in `motors`;
- a position actuator for the gripper whose ctrl is the opening, 0 (closed) .. `gripper_ctrl_open`;
- a site `tcp_site` in the canonical tool frame: z along the approach direction (out of the fingers),
  x along the direction in which the fingers close. Tasks rely on it: "tool pointing down, fingers
  closing along world x" is the quaternion (x, y, z, w) = (1, 0, 0, 0) for every arm.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import mujoco


@dataclass(frozen=True)
class ArmModel:
    """A simulated arm with a parallel gripper."""

    name: str  # model name announced in the robot descriptor, e.g. "franka_fr3_sim"
    build: Callable[[], mujoco.MjSpec]  # returns a fresh spec of the arm (see the module contract)
    joints: tuple[str, ...]  # arm joint names, base to tip
    motors: tuple[str, ...]  # torque actuator names, same order as `joints`
    torque_limits: tuple[float, ...]  # N m per joint, same order as `joints`
    home: tuple[float, ...]  # joint positions of the rest posture (also the null-space posture)
    tcp_site: str  # site in the canonical tool frame
    gripper_actuator: str  # position actuator of the gripper
    gripper_joints: tuple[str, ...]  # finger joints, each 0 (closed) .. `finger_travel`
    finger_travel: float  # m, travel of each finger joint from closed to open
    gripper_ctrl_open: float  # ctrl of `gripper_actuator` that opens the gripper fully
    finger_pad_offset: float  # m; an object of half-width h between the pads sets each finger joint to h - this
    wrist_camera_body: str  # body the wrist camera is mounted on
    wrist_camera_pos: tuple[float, float, float]  # camera position in that body's frame
    wrist_camera_quat: tuple[float, float, float, float]  # camera orientation (w, x, y, z) in that body's frame

    @property
    def dof(self) -> int:
        return len(self.joints)


def add_torque_motors(
    spec: mujoco.MjSpec, joints: tuple[str, ...], motors: tuple[str, ...], torque_limits: tuple[float, ...]
) -> None:
    """One torque motor per arm joint, its ctrl clamped to the joint's torque limit (see the module contract)."""
    for joint, motor, limit in zip(joints, motors, torque_limits, strict=True):
        act = spec.add_actuator(name=motor, target=joint, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        act.set_to_motor()
        act.ctrllimited = True
        act.ctrlrange = [-limit, limit]


def add_gripper_servo(
    spec: mujoco.MjSpec, name: str, tendon: str, *, kp: float, kv: float, travel: float, force: float
) -> None:
    """The gripper's position servo on its finger tendon: ctrl 0 (closed) .. `travel`, force within +-`force`."""
    grip = spec.add_actuator(name=name, target=tendon, trntype=mujoco.mjtTrn.mjTRN_TENDON)
    grip.set_to_position(kp=kp, kv=kv)
    grip.ctrllimited = True
    grip.ctrlrange = [0.0, travel]
    grip.forcelimited = True
    grip.forcerange = [-force, force]
