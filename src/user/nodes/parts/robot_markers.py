"""Markers and camera geometry of `RobotView`: the workspace box, the task's points and success region, a status
line (episode, step, reward, intervention or hold), the simulated cameras' poses and pinhole intrinsics."""

from __future__ import annotations

import math
from typing import Any

import mujoco
import numpy as np
import numpy.typing as npt

from user.robot_loop.control_loop import TickResult
from user.sim.urdf import OPTICAL_FROM_MUJOCO_CAMERA

Vec = npt.NDArray[np.float64]
WORKSPACE, POINTS, LABELS, REGION, STATUS = "workspace", "task_points", "task_labels", "success_region", "status"
_GREY, _GREEN, _BLUE = (0.7, 0.7, 0.7, 0.8), (0.1, 0.8, 0.2, 0.35), (0.2, 0.4, 1.0, 1.0)
_WHITE, _ORANGE, _RED = (1.0, 1.0, 1.0, 1.0), (1.0, 0.55, 0.0, 1.0), (1.0, 0.1, 0.1, 1.0)


def box_edges(low: npt.ArrayLike, high: npt.ArrayLike) -> list[tuple[float, float, float]]:
    """The 12 edges of an axis-aligned box as 24 points (a LINE_LIST)."""
    lo, hi = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
    corners = [np.where([i & 1, i & 2, i & 4], hi, lo) for i in range(8)]
    out: list[tuple[float, float, float]] = []
    for a in range(8):
        for bit in (1, 2, 4):
            if not a & bit:
                out.extend((tuple(corners[a]), tuple(corners[a | bit])))
    return out


class MarkerBuilder:
    """The MarkerArray of one robot for one control period, in its root link's frame."""

    def __init__(self, codec: Any, frame: str, robot: Any, sim: Any) -> None:
        self.codec, self.frame, self.robot, self.sim = codec, frame, robot, sim
        self.robot_id = robot.descriptor.robot_id
        safety = getattr(robot, "safety", None)
        config = getattr(safety, "config", None)
        self.workspace = (config.workspace_min, config.workspace_max) if config is not None else None

    def markers(self, result: TickResult, stamp: int) -> Any:
        c = self.codec
        out = []
        if self.workspace is not None:
            out.append(
                self._marker(
                    stamp, WORKSPACE, 0, "LINE_LIST", rgba=_GREY, scale=(0.004, 0, 0), points=box_edges(*self.workspace)
                )
            )
        state = self.robot.task_state() if self.sim is not None else None
        if state is not None:
            for i, (name, value) in enumerate(sorted(state.values.items())):
                v = np.asarray(value, dtype=np.float64)
                if v.shape != (3,) or "_to_" in name:  # offsets are not places
                    continue
                out.append(self._marker(stamp, POINTS, i, "SPHERE", rgba=_BLUE, scale=(0.015,) * 3, position=v))
                out.append(
                    self._marker(
                        stamp,
                        LABELS,
                        i,
                        "TEXT_VIEW_FACING",
                        rgba=_WHITE,
                        scale=(0, 0, 0.025),
                        position=v + np.array([0.0, 0.0, 0.03]),
                        text=name,
                    )
                )
            region = self.robot.task.success_region(state)
            if region is not None:
                centre, half = region
                out.append(
                    self._marker(
                        stamp, REGION, 0, "CUBE", rgba=_GREEN, scale=tuple(2 * np.asarray(half)), position=centre
                    )
                )
        out.append(self._status(result, stamp))
        return c.msg_class("visualization_msgs/msg/MarkerArray")(markers=out)

    def _status(self, result: TickResult, stamp: int) -> Any:
        obs, t = result.observation, result.transition
        text = f"{self.robot_id}  episode {obs.episode_id}  step {obs.step}"
        colour = _WHITE
        if t is not None:
            text += f"  reward {t.reward:+.3f}"
            if t.action.intervened:
                text, colour = text + "  HUMAN INTERVENING", _ORANGE
        if getattr(self.robot, "estopped", False):
            text, colour = text + f"  E-STOP: {self.robot.estop_reason}", _RED
        elif result.held:
            text, colour = text + "  HOLDING", _ORANGE
        return self._marker(
            stamp, STATUS, 0, "TEXT_VIEW_FACING", rgba=colour, scale=(0, 0, 0.05), position=[0.0, 0.0, 1.1], text=text
        )

    def _marker(
        self,
        stamp: int,
        ns: str,
        index: int,
        kind: str,
        *,
        rgba: tuple[float, ...],
        scale: tuple[float, ...],
        position: Any = (0.0, 0.0, 0.0),
        points: list[tuple[float, float, float]] | None = None,
        text: str = "",
    ) -> Any:
        from user.interfaces.stamps import header

        c = self.codec
        cls = c.msg_class("visualization_msgs/msg/Marker")
        point, vector = c.msg_class("geometry_msgs/msg/Point"), c.msg_class("geometry_msgs/msg/Vector3")
        return cls(
            header=header(stamp, self.frame, c),
            ns=f"{self.robot_id}/{ns}",
            id=index,
            type=getattr(cls, kind),
            action=cls.ADD,
            pose=c.msg_class("geometry_msgs/msg/Pose")(
                position=point(*(float(x) for x in position)),
                orientation=c.msg_class("geometry_msgs/msg/Quaternion")(0.0, 0.0, 0.0, 1.0),
            ),
            scale=vector(*(float(x) for x in scale)),
            color=c.msg_class("std_msgs/msg/ColorRGBA")(*rgba),
            lifetime=c.msg_class("builtin_interfaces/msg/Duration")(sec=0, nanosec=0),
            frame_locked=False,
            points=[point(*p) for p in points or []],
            colors=[],
            texture_resource="",
            texture=c.msg_class("sensor_msgs/msg/CompressedImage")(
                header=header(0, "", c), format="", data=np.zeros(0, np.uint8)
            ),
            uv_coordinates=[],
            text=text,
            mesh_resource="",
            mesh_file=c.msg_class("visualization_msgs/msg/MeshFile")(filename="", data=np.zeros(0, np.uint8)),
            mesh_use_embedded_materials=False,
        )


def scene_camera_poses(sim: Any, cameras: tuple[str, ...]) -> dict[str, tuple[Vec, Vec]]:
    """Each scene camera but the wrist's (it is a URDF link): (position, quaternion xyzw) of its optical frame
    in the arm's root link frame, from the simulation's current state."""
    m, d = sim.model, sim.data
    root = 1  # the arm's root body (the arm is the scene's first body)
    inverse = np.zeros(4)
    mujoco.mju_negQuat(inverse, d.xquat[root])
    out: dict[str, tuple[Vec, Vec]] = {}
    for name in cameras:
        cam = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_CAMERA, name)
        if cam < 0 or name == "wrist":
            continue
        world_quat, pos, quat, optical = np.zeros(4), np.zeros(3), np.zeros(4), np.zeros(4)
        mujoco.mju_mat2Quat(world_quat, d.cam_xmat[cam])
        mujoco.mju_rotVecQuat(pos, d.cam_xpos[cam] - d.xpos[root], inverse)
        mujoco.mju_mulQuat(quat, inverse, world_quat)
        mujoco.mju_mulQuat(optical, quat, OPTICAL_FROM_MUJOCO_CAMERA)
        out[name] = (pos, np.array([optical[1], optical[2], optical[3], optical[0]]))
    return out


def pinhole(sim: Any, config: Any, camera: str) -> tuple[tuple[int, int], Vec] | None:
    """((width, height), K as 9 row-major values) of a simulated camera: square pixels, the centre as principal
    point, the focal length from the vertical field of view (what MuJoCo renders)."""
    cam = mujoco.mj_name2id(sim.model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
    if cam < 0:
        return None
    width, height = int(config.width), int(config.height)
    focal = 0.5 * height / math.tan(math.radians(float(sim.model.cam_fovy[cam])) / 2)
    return (width, height), np.array([focal, 0.0, width / 2, 0.0, focal, height / 2, 0.0, 0.0, 1.0])
