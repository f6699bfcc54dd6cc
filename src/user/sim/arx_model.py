"""The ARX L5 / X5 6-DoF arms, built from the URDFs that arx5-interface ships, prepared as an `ArmModel`.

The URDF gives the kinematics (joint origins and axes) and the links' inertias; its STL meshes are not
shipped, so every link gets simple geometry instead: a capsule from its joint to the next joint (sized
from the joint offsets) and a parallel gripper of box fingers on link6. The URDF's joint limits are
placeholders (+-10 rad); the real ones, the torque limits and the gripper width come from the SDK's robot
config (`arx5_interface.RobotConfigFactory`, same for L5 and X5) and are copied below.

Motors carry an armature (reflected rotor inertia of the geared joint motors), which the URDF lacks;
without it the light wrist links could not be held by a 200 Hz joint PD loop.

Tool frame (the `ArmModel` contract): the URDF's `eef_link` lies 0.155 m along link6's x axis, which is
the approach direction; the fingers close along link6's y axis (horizontal at the zero posture). So tool
z = link6 x, tool x = link6 y, and "tool down, fingers closing along base x" needs joint6 near +pi/2 - joint1:
with joint6 limited to +-2 rad that orientation is reachable for joint1 >~ -0.43 rad, i.e. on the -y side and
a band of +y near the front (tasks are laid out there, see `arx_sim.ARX_TASK_PARAMS`).

Tool-down reach (measured with the IK): z <= ~0.16 m (joint4's -1.6 rad limit stops the wrist from bending
further), x from ~0.15 m to ~0.45 m at table height.
"""

from __future__ import annotations

import importlib.util
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np
import numpy.typing as npt

from user.sim.arm_model import ArmModel, add_gripper_servo, add_torque_motors
from user.sim.errors import SimAssetError

Vec = npt.NDArray[np.float64]
VARIANTS = ("L5", "X5")
JOINTS = tuple(f"joint{i}" for i in range(1, 7))
MOTORS = tuple(f"arx_motor{i}" for i in range(1, 7))
# From arx5_interface's RobotConfig for L5 and X5 (joint_pos_min / joint_pos_max / joint_torque_max).
JOINT_MIN = (-3.14, -0.05, -0.1, -1.6, -1.57, -2.0)
JOINT_MAX = (2.618, 3.5, 3.2, 1.55, 1.57, 2.0)
TORQUE_LIMITS = (30.0, 40.0, 30.0, 15.0, 10.0, 10.0)  # N m
ARMATURE = (0.03, 0.03, 0.03, 0.01, 0.01, 0.01)  # kg m^2, reflected motor inertia (not in the URDF)
JOINT_DAMPING = 0.05  # N m s/rad of viscous joint friction
HOME = (0.0, 1.676, 1.459, -1.353, 0.0, 1.571)  # tool down, fingers closing along x, at (0.3, 0, 0.12) m
GRIPPER_WIDTH = 0.088  # m, full opening (RobotConfig.gripper_width)
FINGER_TRAVEL = GRIPPER_WIDTH / 2  # m per finger
TCP_OFFSET = 0.155  # m along link6 x (the URDF's eef_link)
PAD_GAP = 0.002  # m from the tool axis to a pad's inner face when the fingers are closed
PAD_HALF = (0.018, 0.004, 0.012)  # m: pad half extents along link6 x (approach), y (closing), z
GRIPPER_KP = 2000.0  # N/m on the finger tendon
GRIPPER_KV = 40.0  # N s/m
GRIPPER_FORCE = 100.0  # N on the tendon
LINK_RADIUS = (0.035, 0.03, 0.03, 0.027, 0.025, 0.025, 0.022)  # capsule radius of base_link, link1..link6
ARM_CONTYPE = 2  # arm geoms collide with the world and objects (contype 1) but not with each other
VISUAL_GROUP = 2
_TOOL_IN_LINK6 = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])  # columns: tool x, y, z


@dataclass(frozen=True)
class _Joint:
    name: str
    parent: str
    child: str
    xyz: Vec
    rpy: Vec
    axis: Vec


@dataclass(frozen=True)
class _Inertial:
    pos: Vec
    mass: float
    full: tuple[float, float, float, float, float, float]  # ixx, iyy, izz, ixy, ixz, iyz


def arx_urdf(variant: str = "L5") -> Path:
    """The URDF of an ARX arm variant, from the installed arx5-interface package (not imported: no SDK load)."""
    if variant not in VARIANTS:
        raise ValueError(f"ARX variant must be one of {VARIANTS}, got {variant!r}")
    found = importlib.util.find_spec("arx5_interface")
    if found is None or not found.submodule_search_locations:
        raise SimAssetError("the ARX models come from the arx5-interface package, which is not installed")
    path = Path(next(iter(found.submodule_search_locations))) / "models" / f"{variant}.urdf"
    if not path.is_file():
        raise SimAssetError(f"arx5-interface is installed but lacks {path}; reinstall arx5-interface")
    return path


def rpy_to_quat(rpy: Vec) -> Vec:
    """(w, x, y, z) of the URDF's fixed-axis roll-pitch-yaw, R = Rz(yaw) Ry(pitch) Rx(roll)."""
    quat = np.zeros(4)
    qz, qy, qx = np.zeros(4), np.zeros(4), np.zeros(4)
    mujoco.mju_axisAngle2Quat(qx, np.array([1.0, 0.0, 0.0]), float(rpy[0]))
    mujoco.mju_axisAngle2Quat(qy, np.array([0.0, 1.0, 0.0]), float(rpy[1]))
    mujoco.mju_axisAngle2Quat(qz, np.array([0.0, 0.0, 1.0]), float(rpy[2]))
    mujoco.mju_mulQuat(quat, qz, qy)
    mujoco.mju_mulQuat(quat, quat.copy(), qx)
    return quat


def _vec(text: str | None, default: str = "0 0 0") -> Vec:
    return np.array([float(v) for v in (text or default).split()], dtype=np.float64)


def parse_urdf(path: Path) -> tuple[list[_Joint], dict[str, _Inertial]]:
    """The serial chain's joints (base to tip) and each link's inertial block."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as exc:
        raise SimAssetError(f"cannot read the ARX URDF {path}: {exc}") from exc
    inertials: dict[str, _Inertial] = {}
    for link in root.iter("link"):
        block = link.find("inertial")
        if block is None:
            continue
        origin, mass, inertia = block.find("origin"), block.find("mass"), block.find("inertia")
        if mass is None or inertia is None:
            continue
        full = tuple(float(inertia.get(k, "0")) for k in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz"))
        pos = _vec(origin.get("xyz") if origin is not None else None)
        inertials[link.get("name", "")] = _Inertial(pos, float(mass.get("value", "0")), full)  # type: ignore[arg-type]
    joints: list[_Joint] = []
    for joint in root.iter("joint"):
        origin, axis = joint.find("origin"), joint.find("axis")
        parent, child = joint.find("parent"), joint.find("child")
        if parent is None or child is None:
            raise SimAssetError(f"{path}: joint {joint.get('name')!r} lacks a parent or child link")
        joints.append(
            _Joint(
                name=joint.get("name", ""),
                parent=parent.get("link", ""),
                child=child.get("link", ""),
                xyz=_vec(origin.get("xyz") if origin is not None else None),
                rpy=_vec(origin.get("rpy") if origin is not None else None),
                axis=_vec(axis.get("xyz") if axis is not None else None, "1 0 0"),
            )
        )
    missing = [j for j in JOINTS if j not in {jt.name for jt in joints}]
    if missing:
        raise SimAssetError(f"{path}: the ARX URDF lacks joints {missing}")
    return joints, inertials


def load_arx_spec(variant: str = "L5") -> mujoco.MjSpec:
    """A fresh spec of the ARX arm + gripper with torque motors, a gripper servo and the canonical `tcp` site."""
    joints, inertials = parse_urdf(arx_urdf(variant))
    spec = mujoco.MjSpec()
    spec.modelname = f"arx_{variant.lower()}_scene"
    spec.compiler.balanceinertia = True  # a few of the exported inertias miss the triangle inequality
    spec.compiler.degree = False  # joint ranges below are in radians
    bodies: dict[str, mujoco.MjsBody] = {"base_link": spec.worldbody.add_body(name="base_link")}
    _set_inertial(bodies["base_link"], inertials.get("base_link"))
    by_parent = {j.parent: j for j in joints}
    link_names = ["base_link"]
    for joint in joints:
        parent = bodies.get(joint.parent)
        if parent is None:
            raise SimAssetError(f"ARX URDF joint {joint.name!r} has parent {joint.parent!r} before it is defined")
        body = parent.add_body(name=joint.child, pos=joint.xyz.tolist(), quat=rpy_to_quat(joint.rpy).tolist())
        bodies[joint.child] = body
        _set_inertial(body, inertials.get(joint.child))
        if joint.name in JOINTS:
            k = JOINTS.index(joint.name)
            body.add_joint(
                name=joint.name,
                type=mujoco.mjtJoint.mjJNT_HINGE,
                axis=joint.axis.tolist(),
                range=[JOINT_MIN[k], JOINT_MAX[k]],
                armature=ARMATURE[k],
                damping=JOINT_DAMPING,
            )
            link_names.append(joint.child)
    for i, name in enumerate(link_names):
        nxt = by_parent.get(name)
        end = nxt.xyz if nxt is not None and nxt.name in JOINTS else np.array([0.06, 0.0, 0.0])
        _add_link_geom(bodies[name], end, LINK_RADIUS[i])
    _add_gripper(spec, bodies["link6"])
    _add_actuators(spec)
    return spec


def _set_inertial(body: mujoco.MjsBody, inertial: _Inertial | None) -> None:
    if inertial is None or inertial.mass <= 0.0:
        return
    body.explicitinertial = True
    body.mass = inertial.mass
    body.ipos = inertial.pos.tolist()
    body.fullinertia = list(inertial.full)


def _add_link_geom(body: mujoco.MjsBody, end: Vec, radius: float) -> None:
    """A massless capsule from the body origin to `end` (the next joint), or a sphere when they coincide."""
    common = {"contype": ARM_CONTYPE, "conaffinity": 1, "group": VISUAL_GROUP, "mass": 0.0}
    colour = [0.82, 0.84, 0.86, 1.0]
    if float(np.linalg.norm(end)) < 1e-3:
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[radius, 0.0, 0.0], rgba=colour, **common)
        return
    fromto = [0.0, 0.0, 0.0, *end.tolist()]
    body.add_geom(type=mujoco.mjtGeom.mjGEOM_CAPSULE, fromto=fromto, size=[radius, 0, 0], rgba=colour, **common)


def _add_finger(link6: mujoco.MjsBody, side: str, sign: float, pad_x: float, colour: list[float]) -> None:
    """One sliding finger of the gripper: its joint, its pad and the bar that holds the pad."""
    finger = link6.add_body(name=f"arx_{side}_finger", pos=[0.0, 0.0, 0.0])
    finger.add_joint(
        name=f"arx_{side}_finger_joint",
        type=mujoco.mjtJoint.mjJNT_SLIDE,
        axis=[0.0, sign, 0.0],
        range=[0.0, FINGER_TRAVEL],
        armature=0.01,
        damping=2.0,
    )
    y = sign * (PAD_GAP + PAD_HALF[1])
    finger.add_geom(
        name=f"arx_{side}_pad",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=list(PAD_HALF),
        pos=[pad_x, y, 0.0],
        rgba=colour,
        mass=0.05,
        friction=[1.5, 0.01, 0.0001],
        condim=4,
        contype=ARM_CONTYPE,
        conaffinity=1,
        group=VISUAL_GROUP,
    )
    finger.add_geom(
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[(pad_x - PAD_HALF[0] - 0.11) / 2, PAD_HALF[1], PAD_HALF[2]],
        pos=[(pad_x - PAD_HALF[0] + 0.11) / 2, y, 0.0],
        rgba=colour,
        mass=0.02,
        contype=ARM_CONTYPE,
        conaffinity=1,
        group=VISUAL_GROUP,
    )


def _add_gripper(spec: mujoco.MjSpec, link6: mujoco.MjsBody) -> None:
    dark = [0.18, 0.18, 0.2, 1.0]
    link6.add_geom(
        name="arx_palm",
        type=mujoco.mjtGeom.mjGEOM_BOX,
        size=[0.02, FINGER_TRAVEL + PAD_GAP + 2 * PAD_HALF[1], 0.02],
        pos=[0.09, 0.0, 0.0],
        rgba=dark,
        contype=ARM_CONTYPE,
        conaffinity=1,
        group=VISUAL_GROUP,
        mass=0.0,
    )
    pad_x = TCP_OFFSET - PAD_HALF[0] + 0.005  # pads reach 5 mm past the TCP
    for side, sign in (("left", 1.0), ("right", -1.0)):
        _add_finger(link6, side, sign, pad_x, dark)
    tcp_quat = np.zeros(4)
    mujoco.mju_mat2Quat(tcp_quat, _TOOL_IN_LINK6.reshape(-1))
    link6.add_site(name="tcp", pos=[TCP_OFFSET, 0.0, 0.0], quat=tcp_quat.tolist(), size=[0.005, 0.0, 0.0])
    tendon = spec.add_tendon(name="arx_split")
    tendon.wrap_joint("arx_left_finger_joint", 0.5)
    tendon.wrap_joint("arx_right_finger_joint", 0.5)
    spec.add_equality(
        type=mujoco.mjtEq.mjEQ_JOINT,
        name1="arx_left_finger_joint",
        name2="arx_right_finger_joint",
        data=[0.0, 1.0, 0.0, 0.0, 0.0] + [0.0] * 7,
        solref=[0.005, 1.0],
    )


def _add_actuators(spec: mujoco.MjSpec) -> None:
    add_torque_motors(spec, JOINTS, MOTORS, TORQUE_LIMITS)
    add_gripper_servo(
        spec, "arx_gripper", "arx_split", kp=GRIPPER_KP, kv=GRIPPER_KV, travel=FINGER_TRAVEL, force=GRIPPER_FORCE
    )


def _wrist_camera_quat() -> tuple[float, float, float, float]:
    """Camera on link6 above the gripper (link6 +z = tool y), looking at a point 5 cm past the TCP."""
    pos, target = np.array([0.07, 0.0, 0.07]), np.array([TCP_OFFSET + 0.05, 0.0, 0.0])
    forward = (target - pos) / np.linalg.norm(target - pos)
    up = np.array([0.0, 0.0, 1.0])
    right = np.cross(forward, up)
    right /= np.linalg.norm(right)
    mat = np.column_stack([right, np.cross(right, forward), -forward])
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, mat.reshape(-1))
    return (float(quat[0]), float(quat[1]), float(quat[2]), float(quat[3]))


def arx_model(variant: str = "L5") -> ArmModel:
    """An ARX arm (`variant` "L5" or "X5") as an `ArmModel`."""
    arx_urdf(variant)  # fail early, here, with the installation hint
    return ArmModel(
        name=f"arx_{variant.lower()}_sim",
        build=lambda: load_arx_spec(variant),
        joints=JOINTS,
        motors=MOTORS,
        torque_limits=TORQUE_LIMITS,
        home=HOME,
        tcp_site="tcp",
        gripper_actuator="arx_gripper",
        gripper_joints=("arx_left_finger_joint", "arx_right_finger_joint"),
        finger_travel=FINGER_TRAVEL,
        gripper_ctrl_open=FINGER_TRAVEL,
        finger_pad_offset=PAD_GAP,
        wrist_camera_body="link6",
        wrist_camera_pos=(0.07, 0.0, 0.07),
        wrist_camera_quat=_wrist_camera_quat(),
    )
