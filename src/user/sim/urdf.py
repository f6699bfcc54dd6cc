"""`arm_urdf`: the URDF of a simulated arm (`robot_description`), made from the same MuJoCo model the simulator
steps, so rviz and Foxglove draw the arm the policy acts on, with the joint names `joint_states` carries (the FR3's
are franka_description's `fr3_joint1..7`).

Every body of the arm is a link, every hinge a revolute joint (its range as the limits; `effort` the arm's torque
limit where the model gives one; `velocity` 0: the model holds no velocity limits), every slide (finger) a
prismatic joint, every body without a joint a fixed one. Visuals are the model's geoms: boxes, spheres and
cylinders as they are, a capsule as a cylinder of its full length, a mesh as the box that bounds it (rviz
needs no mesh files then). Two more fixed links: `tcp` (the canonical tool frame, the TF chain's end) and
`wrist_camera_optical` (the wrist camera in the optical convention: z forward, x right, y down).
"""

from __future__ import annotations

import math
from xml.etree import ElementTree as ET

import mujoco
import numpy as np
import numpy.typing as npt

from user.sim.arm_model import ArmModel

TCP_LINK = "tcp"
WRIST_OPTICAL_LINK = "wrist_camera_optical"
# A MuJoCo camera looks along its -z with y up; an optical frame looks along +z with y down: a half turn about x.
OPTICAL_FROM_MUJOCO_CAMERA = np.array([0.0, 1.0, 0.0, 0.0])  # w, x, y, z


def quat_to_rpy(quat_wxyz: npt.ArrayLike) -> tuple[float, float, float]:
    """Roll, pitch, yaw (URDF's fixed-axis x-y-z convention) of a unit quaternion (w, x, y, z)."""
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, np.asarray(quat_wxyz, dtype=np.float64))
    r = mat.reshape(3, 3)
    pitch = math.asin(max(-1.0, min(1.0, -r[2, 0])))
    if abs(r[2, 0]) < 1.0 - 1e-9:
        return math.atan2(r[2, 1], r[2, 2]), pitch, math.atan2(r[1, 0], r[0, 0])
    return 0.0, pitch, math.atan2(-r[0, 1], r[1, 1])  # gimbal lock: the yaw takes the whole turn


def _fmt(values: npt.ArrayLike) -> str:
    return " ".join(f"{float(v):.6g}" for v in np.asarray(values, dtype=np.float64).ravel())


def _origin(parent: ET.Element, pos: npt.ArrayLike, quat_wxyz: npt.ArrayLike) -> None:
    ET.SubElement(parent, "origin", xyz=_fmt(pos), rpy=_fmt(quat_to_rpy(quat_wxyz)))


def _name(model: mujoco.MjModel, kind: mujoco.mjtObj, index: int) -> str:
    name = mujoco.mj_id2name(model, kind, index)
    if not name:
        raise ValueError(f"the arm model has an unnamed {kind.name} (index {index}): URDF needs every name")
    return str(name)


def _geometry(model: mujoco.MjModel, g: int) -> ET.Element:
    geometry = ET.Element("geometry")
    size, kind = model.geom_size[g], model.geom_type[g]
    if kind == mujoco.mjtGeom.mjGEOM_BOX:
        ET.SubElement(geometry, "box", size=_fmt(2 * size))
    elif kind == mujoco.mjtGeom.mjGEOM_SPHERE:
        ET.SubElement(geometry, "sphere", radius=_fmt(size[0]))
    elif kind == mujoco.mjtGeom.mjGEOM_CYLINDER:
        ET.SubElement(geometry, "cylinder", radius=_fmt(size[0]), length=_fmt(2 * size[1]))
    elif kind == mujoco.mjtGeom.mjGEOM_CAPSULE:
        ET.SubElement(geometry, "cylinder", radius=_fmt(size[0]), length=_fmt(2 * (size[1] + size[0])))
    else:  # a mesh (or an ellipsoid): the box that bounds it, centred where MuJoCo's bounding box is
        ET.SubElement(geometry, "box", size=_fmt(2 * model.geom_aabb[g][3:]))
    return geometry


def _visual(link: ET.Element, model: mujoco.MjModel, g: int) -> None:
    visual = ET.SubElement(link, "visual")
    pos = model.geom_pos[g]
    if model.geom_type[g] not in (
        mujoco.mjtGeom.mjGEOM_BOX,
        mujoco.mjtGeom.mjGEOM_SPHERE,
        mujoco.mjtGeom.mjGEOM_CYLINDER,
        mujoco.mjtGeom.mjGEOM_CAPSULE,
    ):  # the bounding box's centre, in the geom's frame, moved into the body's frame
        offset = np.zeros(3)
        mujoco.mju_rotVecQuat(offset, model.geom_aabb[g][:3], model.geom_quat[g])
        pos = pos + offset
    _origin(visual, pos, model.geom_quat[g])
    visual.append(_geometry(model, g))
    colour = ET.SubElement(visual, "material", name=f"geom{g}")
    ET.SubElement(colour, "color", rgba=_fmt(model.geom_rgba[g]))


def _joint(robot: ET.Element, model: mujoco.MjModel, body: int, link: tuple[str, str], effort: float) -> None:
    parent, child = link
    count = int(model.body_jntnum[body])
    if count > 1:
        raise ValueError(f"body {child!r} has {count} joints: URDF allows one per link")
    if count == 0:
        joint = ET.SubElement(robot, "joint", name=f"{parent}_to_{child}", type="fixed")
    else:
        j = int(model.body_jntadr[body])
        kinds = {int(mujoco.mjtJoint.mjJNT_HINGE): "revolute", int(mujoco.mjtJoint.mjJNT_SLIDE): "prismatic"}
        kind = kinds.get(int(model.jnt_type[j]))
        if kind is None:
            raise ValueError(f"joint {_name(model, mujoco.mjtObj.mjOBJ_JOINT, j)!r} is neither a hinge nor a slide")
        if kind == "revolute" and not model.jnt_limited[j]:
            kind = "continuous"
        joint = ET.SubElement(robot, "joint", name=_name(model, mujoco.mjtObj.mjOBJ_JOINT, j), type=kind)
    ET.SubElement(joint, "parent", link=parent)
    ET.SubElement(joint, "child", link=child)
    _origin(joint, model.body_pos[body], model.body_quat[body])
    if count == 1:
        j = int(model.body_jntadr[body])
        ET.SubElement(joint, "axis", xyz=_fmt(model.jnt_axis[j]))
        if joint.get("type") != "continuous":
            low, high = model.jnt_range[j]
            ET.SubElement(joint, "limit", lower=_fmt(low), upper=_fmt(high), effort=_fmt(effort), velocity="0")


def _fixed_link(robot: ET.Element, parent: str, child: str, pos: npt.ArrayLike, quat: npt.ArrayLike) -> None:
    ET.SubElement(robot, "link", name=child)
    joint = ET.SubElement(robot, "joint", name=f"{parent}_to_{child}", type="fixed")
    ET.SubElement(joint, "parent", link=parent)
    ET.SubElement(joint, "child", link=child)
    _origin(joint, pos, quat)


def arm_urdf(arm: ArmModel) -> str:
    """The URDF of `arm` (link names as the model's bodies; the root is the model's first body)."""
    model = arm.build().compile()
    robot = ET.Element("robot", name=arm.name)
    efforts = dict(zip(arm.joints, arm.torque_limits, strict=True))
    for body in range(1, model.nbody):
        child = _name(model, mujoco.mjtObj.mjOBJ_BODY, body)
        link = ET.SubElement(robot, "link", name=child)
        for g in range(model.body_geomadr[body], model.body_geomadr[body] + model.body_geomnum[body]):
            _visual(link, model, g)
        parent_id = int(model.body_parentid[body])
        if parent_id == 0:
            continue  # the root link
        joint_name = (
            mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, int(model.body_jntadr[body]))
            if model.body_jntnum[body]
            else None
        )
        parent = _name(model, mujoco.mjtObj.mjOBJ_BODY, parent_id)
        _joint(robot, model, body, (parent, child), efforts.get(joint_name or "", 0.0))
    site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, arm.tcp_site)
    if site < 0:
        raise ValueError(f"the arm model has no site {arm.tcp_site!r} (its tool frame)")
    tcp_body = _name(model, mujoco.mjtObj.mjOBJ_BODY, int(model.site_bodyid[site]))
    _fixed_link(robot, tcp_body, TCP_LINK, model.site_pos[site], model.site_quat[site])
    optical = np.zeros(4)
    mujoco.mju_mulQuat(optical, np.asarray(arm.wrist_camera_quat, dtype=np.float64), OPTICAL_FROM_MUJOCO_CAMERA)
    _fixed_link(robot, arm.wrist_camera_body, WRIST_OPTICAL_LINK, arm.wrist_camera_pos, optical)
    ET.indent(robot)
    return ET.tostring(robot, encoding="unicode")
