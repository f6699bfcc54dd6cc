"""`ArxSdkRobot`: an ARX L5 / X5 arm through the vendor's `arx5_interface` (arx5-sdk) Cartesian controller.

The SDK runs its own joint PD loop with gravity compensation in a background thread (500 Hz over
SocketCAN) and interpolates toward each end-effector command; this driver sends one Cartesian target per
policy step (`control_rate_hz`, 10 Hz by default) with a preview time of one control period, so the SDK
reaches it just as the next one arrives.

Frames: the SDK's `pose_6d` is the URDF's `eef_link` (x along the approach direction, fingers closing
along y) as xyz + fixed-axis roll/pitch/yaw. The project's canonical tool frame has z along the approach
and x along the closing direction, so tool = eef rotated by `TOOL_IN_EEF` (a 120-degree turn about
(1, 1, 1)); the same convention as the simulated ARX (`user.sim.arx_model`). The gripper's
opening in metres (0 .. `gripper_width`) maps to 0 .. 1.

`arx5_interface` is imported lazily in `connect()` (it loads the vendor's C++ libraries); before opening
the controller the CAN interface is checked in /sys/class/net so a missing SocketCAN adapter is a clean
`ArxConnectionError` naming the interface, not a C++ exception. `reset()` calls the SDK's
`reset_to_home()`, which blocks inside the SDK (its own ~2 s trajectory); there is no seeded start pose.
"""

from __future__ import annotations

import importlib
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from user.config import setting
from user.robots import embodiments, rotations
from user.robots.arm import ArmRobot
from user.robots.base import ArmState, NotConnectedError, RobotDescriptor, RobotError
from user.robots.pacing import DeadlinePacer
from user.robots.safety import SafetyConfig

Vec = npt.NDArray[np.float64]
_log = logging.getLogger(__name__)
TOOL_IN_EEF: Vec = np.array([0.5, 0.5, 0.5, 0.5])  # xyzw: tool x = eef y, tool y = eef z, tool z = eef x
SYS_NET = Path("/sys/class/net")


class ArxError(RobotError):
    """Something in the ARX arm or its SDK went wrong."""


class ArxConnectionError(ArxError):
    """The ARX arm could not be reached (SDK missing, CAN interface absent or down, arm unpowered)."""


@dataclass(frozen=True)
class ArxSdkConfig:
    """An ARX arm on a SocketCAN interface, driven by Cartesian targets."""

    robot_id: str = setting("arx", "unique robot name in the deployment")
    site: str = setting("local", "where the robot is (hardware registry)")
    model: str = setting("L5", "arm model as the SDK names it", choices=("L5", "X5"))
    interface: str = setting("can0", "SocketCAN interface the arm is on (ip link show)")
    control_rate_hz: float = setting(10.0, "policy rate: one Cartesian target per period", min=0.5, max=100.0)
    safety: SafetyConfig = setting(SafetyConfig(), "workspace box and per-step action limits")


def eef_to_tool(pose_6d: npt.ArrayLike) -> Vec:
    """SDK `pose_6d` (xyz, roll, pitch, yaw of eef_link) -> tool pose (xyz + xyzw, canonical tool frame)."""
    p = np.asarray(pose_6d, dtype=np.float64).reshape(6)
    eef = rotations.from_euler(float(p[3]), float(p[4]), float(p[5]))
    return np.concatenate([p[:3], rotations.normalize(rotations.multiply(eef, TOOL_IN_EEF))])


def tool_to_eef(pose: npt.ArrayLike) -> Vec:
    """Tool pose (xyz + xyzw) -> SDK `pose_6d` (xyz + fixed-axis roll, pitch, yaw of eef_link)."""
    p = np.asarray(pose, dtype=np.float64).reshape(7)
    eef = rotations.multiply(rotations.normalize(p[3:]), rotations.conjugate(TOOL_IN_EEF))
    return np.concatenate([p[:3], _quat_to_rpy(eef)])


def _quat_to_rpy(q: Vec) -> Vec:
    x, y, z, w = rotations.normalize(q)
    roll = math.atan2(2.0 * (w * x + y * z), 1.0 - 2.0 * (x * x + y * y))
    pitch = math.asin(max(-1.0, min(1.0, 2.0 * (w * y - z * x))))
    yaw = math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    return np.array([roll, pitch, yaw])


def load_sdk() -> Any:
    """The `arx5_interface` module (loads the vendor's C++ libraries; needs no hardware)."""
    try:
        return importlib.import_module("arx5_interface")
    except ImportError as exc:
        raise ArxConnectionError(f"the ARX SDK is not installed (pip install arx5-interface): {exc}") from exc


class ArxSdkRobot(ArmRobot):
    """An ARX arm behind the shared `ArmRobot` (safety filter, hold, e-stop); Cartesian targets via the SDK."""

    def __init__(self, config: ArxSdkConfig | None = None, sdk_loader: Callable[[], Any] = load_sdk) -> None:
        """`sdk_loader` returns the `arx5_interface` module (tests pass a stand-in with the same names)."""
        cfg = config or ArxSdkConfig()
        descriptor = RobotDescriptor(
            robot_id=cfg.robot_id,
            model=f"arx_{cfg.model.lower()}",
            embodiment_id=embodiments.ARX,
            dof=6,
            control_rate_hz=cfg.control_rate_hz,
            site=cfg.site,
        )
        super().__init__(descriptor, cfg.safety)
        self.config = cfg
        self._load_sdk = sdk_loader
        self._sdk_module: Any = None
        self._ctrl: Any = None
        self._gripper_width = 0.088
        self._pacer = DeadlinePacer(1.0 / cfg.control_rate_hz)
        self._last: tuple[float, Vec] | None = None  # (SDK time s, tool pose) of the previous read

    def _sdk(self) -> Any:
        if self._ctrl is None:
            raise NotConnectedError(f"robot {self.descriptor.robot_id!r} is not connected; call connect() first")
        return self._ctrl

    def _connect(self) -> None:
        iface = self.config.interface
        if not (SYS_NET / iface).exists():
            raise ArxConnectionError(
                f"CAN interface {iface!r} not found: plug in the USB-CAN adapter and bring it up "
                f"(sudo ip link set {iface} up type can bitrate 1000000), or set `interface`"
            )
        sdk = self._load_sdk()
        try:
            ctrl = sdk.Arx5CartesianController(self.config.model, iface)  # starts the SDK's control thread
        except Exception as exc:  # the SDK raises RuntimeError with its own message
            raise ArxConnectionError(
                f"cannot open the ARX {self.config.model} on CAN interface {iface!r}: {exc}"
            ) from exc
        self._sdk_module, self._ctrl = sdk, ctrl
        try:
            self._gripper_width = float(ctrl.get_robot_config().gripper_width)
        except Exception as exc:
            self._ctrl = None
            raise ArxConnectionError(f"the ARX SDK on {iface!r} gave no robot config: {exc}") from exc
        self._pacer.restart()

    def _close(self) -> None:
        ctrl, self._ctrl = self._ctrl, None
        if ctrl is not None:
            try:
                ctrl.set_to_damping()
            except Exception as exc:
                _log.warning("ARX %s: could not switch to damping on close: %s", self.descriptor.robot_id, exc)

    def _reset(self, seed: int | None) -> ArmState:
        if seed is not None:
            _log.debug("ARX %s: seed %s ignored, the real arm always starts at home", self.descriptor.robot_id, seed)
        self._sdk().reset_to_home()
        self._last = None
        self._pacer.restart()
        return self._read_state()

    def _read_state(self) -> ArmState:
        ctrl = self._sdk()
        eef, joints = ctrl.get_eef_state(), ctrl.get_joint_state()
        now = float(ctrl.get_timestamp())
        pose = eef_to_tool(eef.pose_6d())
        velocity = np.zeros(6)
        if self._last is not None and now > self._last[0]:  # the SDK reports no Cartesian velocity
            dt = now - self._last[0]
            velocity[:3] = (pose[:3] - self._last[1][:3]) / dt
            turn = rotations.multiply(pose[3:], rotations.conjugate(self._last[1][3:]))
            velocity[3:] = rotations.to_rotvec(turn) / dt
        self._last = (now, pose)
        return ArmState(
            stamp_ns=round(now * 1e9),
            tcp_pose=pose,
            tcp_velocity=velocity,
            joint_positions=np.asarray(joints.pos(), dtype=np.float64).copy(),
            joint_velocities=np.asarray(joints.vel(), dtype=np.float64).copy(),
            gripper=min(max(float(eef.gripper_pos) / self._gripper_width, 0.0), 1.0),
        )

    def _command(self, target_pose: Vec, gripper: float) -> None:
        ctrl = self._sdk()
        width = min(max(gripper, 0.0), 1.0) * self._gripper_width
        cmd = self._sdk_module.EEFState(tool_to_eef(target_pose), width)
        cmd.timestamp = float(ctrl.get_timestamp()) + self._pacer.period_s  # arrive as the next target comes
        ctrl.set_eef_cmd(cmd)

    def _wait_period(self) -> None:
        self._pacer.wait()
