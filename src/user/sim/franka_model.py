"""The Franka FR3 with its hand, loaded from the MJCF that franky-sim ships, prepared as an `ArmModel`.

franky-sim's `fr3.xml` names `meshdir="assets"` while the meshes lie in `assets/meshes`, so the spec's
meshdir is set here. Its joint position servos are replaced by torque motors (the operational-space
controller drives them) and its weak gripper servo by a stiffer position servo on the finger tendon.

Two visual levels: "full" keeps the ~240k-triangle visual meshes (about 35 ms per 128x128 frame in
software rendering on a 2-core machine); "lowpoly" drops them and shows the convex collision meshes
(~2.8k triangles, about 1 ms per frame) with flat colours. Dynamics are identical in both.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import mujoco

from user.sim.arm_model import ArmModel, add_gripper_servo, add_torque_motors
from user.sim.errors import SimAssetError

JOINTS = tuple(f"fr3_joint{i}" for i in range(1, 8))
MOTORS = tuple(f"fr3_motor{i}" for i in range(1, 8))
TORQUE_LIMITS = (87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0)  # N m, FR3 datasheet
HOME = (0.0, -0.3, 0.0, -2.2, 0.0, 1.9, -math.pi / 4)
FINGER_TRAVEL = 0.04  # m per finger
GRIPPER_KP = 4000.0  # N/m on the finger tendon
GRIPPER_KV = 60.0  # N s/m
GRIPPER_FORCE = 140.0  # N on the tendon (70 N per finger, the Franka hand's continuous force)
TCP_OFFSET = 0.1034  # m from the hand flange frame to the centre of the finger pads
VISUAL_GROUP = 2  # geom group shown by the default render options
_LINK_COLOURS = {  # low-poly colours by body name prefix
    "fr3_link": (0.92, 0.92, 0.92, 1.0),
    "hand": (0.25, 0.25, 0.27, 1.0),
    "left_finger": (0.15, 0.15, 0.15, 1.0),
    "right_finger": (0.15, 0.15, 0.15, 1.0),
}


def franky_assets_dir() -> Path:
    """The folder holding franky-sim's `fr3.xml` and `meshes/`."""
    found = importlib.util.find_spec("franky_sim")
    if found is None or not found.submodule_search_locations:
        raise SimAssetError(
            "the FR3 model comes from the franky-sim package, which is not installed (pip install franky-sim)"
        )
    assets = Path(next(iter(found.submodule_search_locations))) / "assets"
    if not (assets / "fr3.xml").is_file() or not (assets / "meshes").is_dir():
        raise SimAssetError(f"franky-sim is installed but {assets} lacks fr3.xml or meshes/; reinstall franky-sim")
    return assets


def load_fr3_spec(visual: str = "lowpoly") -> mujoco.MjSpec:
    """A fresh spec of the FR3 + hand with torque motors, a gripper servo and the canonical `tcp` site."""
    if visual not in ("lowpoly", "full"):
        raise ValueError(f"visual must be 'lowpoly' or 'full', got {visual!r}")
    assets = franky_assets_dir()
    try:
        spec = mujoco.MjSpec.from_file(str(assets / "fr3.xml"))
    except Exception as exc:  # mujoco raises ValueError with the parser message
        raise SimAssetError(f"cannot parse {assets / 'fr3.xml'}: {exc}") from exc
    spec.meshdir = str(assets / "meshes")
    spec.modelname = "fr3_scene"
    for key in list(spec.keys):  # its keyframe would not match once task objects add joints
        spec.delete(key)
    if visual == "lowpoly":
        _use_collision_meshes_as_visuals(spec)
    _replace_actuators(spec)
    hand = spec.body("hand")
    half = math.sqrt(0.5)  # rotate 90 deg about the hand's z: tool x = hand y (the finger closing axis)
    hand.add_site(name="tcp", pos=[0.0, 0.0, TCP_OFFSET], quat=[half, 0.0, 0.0, half], size=[0.005, 0.0, 0.0])
    return spec


def _use_collision_meshes_as_visuals(spec: mujoco.MjSpec) -> None:
    for geom in list(spec.geoms):
        if geom.group == VISUAL_GROUP:
            spec.delete(geom)
    for geom in spec.geoms:
        if geom.type == mujoco.mjtGeom.mjGEOM_MESH:
            geom.group = VISUAL_GROUP
            body_name = geom.parent.name if geom.parent is not None else ""
            geom.rgba = next((c for p, c in _LINK_COLOURS.items() if body_name.startswith(p)), (0.8, 0.8, 0.8, 1.0))
    used = {g.meshname for g in spec.geoms if g.type == mujoco.mjtGeom.mjGEOM_MESH}
    for mesh in list(spec.meshes):
        if mesh.name not in used:
            spec.delete(mesh)


def _replace_actuators(spec: mujoco.MjSpec) -> None:
    for act in list(spec.actuators):
        spec.delete(act)
    add_torque_motors(spec, JOINTS, MOTORS, TORQUE_LIMITS)
    add_gripper_servo(spec, "gripper", "split", kp=GRIPPER_KP, kv=GRIPPER_KV, travel=FINGER_TRAVEL, force=GRIPPER_FORCE)


def fr3_model(visual: str = "lowpoly") -> ArmModel:
    """The FR3 as an `ArmModel`; `visual` is "lowpoly" (fast software rendering) or "full"."""
    franky_assets_dir()  # fail early, here, with the installation hint
    return ArmModel(
        name="franka_fr3_sim",
        build=lambda: load_fr3_spec(visual),
        joints=JOINTS,
        motors=MOTORS,
        torque_limits=TORQUE_LIMITS,
        home=HOME,
        tcp_site="tcp",
        gripper_actuator="gripper",
        gripper_joints=("finger_joint1", "finger_joint2"),
        finger_travel=FINGER_TRAVEL,
        gripper_ctrl_open=FINGER_TRAVEL,
        finger_pad_offset=0.0015,
        wrist_camera_body="hand",
        wrist_camera_pos=(0.065, 0.0, 0.03),  # beside the hand, off the fingers' travel
        wrist_camera_quat=(0.1525, 0.6905, 0.6905, 0.1525),  # looks 25 deg inward, at a point 7 cm past the TCP
    )
