"""`ArxSdkRobot`: an ARX L5 / X5 arm through the vendor's `arx5_interface` (arx5-sdk) Cartesian controller.

The SDK runs its own joint PD loop with gravity compensation in a background thread (500 Hz over
SocketCAN) and interpolates toward each end-effector command; this driver sends one Cartesian target per
policy step (`control_rate_hz`, 10 Hz by default) with a preview time of one control period, so the SDK
reaches it just as the next one arrives.

The SDK lives in its own process (`user.robots.arx_link` / `arx_process`): its emergency state is an endless
loop that never gives the GIL back, in the constructor or in its background thread. Every call has a deadline
(`connect_timeout_s`, `reset_timeout_s`, `call_timeout_s`); a call that passes it, or a process that died, is an
`ArxSdkError`, so `ArmRobot` latches its e-stop and holds, and the operator reads one line with the SDK's own
reason. The position gain is read back with every state and command: kp 0 after `reset()` means the SDK went
into its emergency state (the arm is limp), an `ArxEmergencyError`, never a recorded step. A target the SDK's IK
cannot reach is an `ArxIkError` and is not sent (the SDK itself would only log it and send clipped joints).

Frames: the SDK's `pose_6d` is the URDF's `eef_link` (x along the approach direction, fingers closing
along y) as xyz + fixed-axis roll/pitch/yaw. The project's canonical tool frame has z along the approach
and x along the closing direction, so tool = eef rotated by `TOOL_IN_EEF` (a 120-degree turn about
(1, 1, 1)); the same convention as the simulated ARX (`user.sim.arx_model`). The gripper's
opening in metres (0 .. `gripper_width`) maps to 0 .. 1.

Before the SDK starts, the CAN interface is checked in /sys/class/net, so a missing adapter is a clean
`ArxConnectionError` naming the interface (with the `slcand` command when a serial SLCAN adapter is plugged
in). `reset()` calls the SDK's `reset_to_home()` (its own trajectory of a few seconds); there is no seeded
start pose.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from user.config import setting
from user.config.strict import ConfigError
from user.robots import embodiments, rotations
from user.robots.arm import ArmRobot
from user.robots.arx_errors import (
    ArxConnectionError,
    ArxEmergencyError,
    ArxError,
    ArxIkError,
    ArxSdkError,
    ik_status_name,
)
from user.robots.arx_link import SdkProcess
from user.robots.base import ArmState, NotConnectedError, RobotDescriptor
from user.robots.pacing import DeadlinePacer
from user.robots.safety import SafetyConfig

__all__ = [
    "ArxConnectionError",
    "ArxEmergencyError",
    "ArxError",
    "ArxIkError",
    "ArxSdkConfig",
    "ArxSdkError",
    "ArxSdkRobot",
    "eef_to_tool",
    "tool_to_eef",
]

Vec = npt.NDArray[np.float64]
_log = logging.getLogger(__name__)
TOOL_IN_EEF: Vec = np.array([0.5, 0.5, 0.5, 0.5])  # xyzw: tool x = eef y, tool y = eef z, tool z = eef x
SYS_NET = Path("/sys/class/net")
DEV = Path("/dev")
SLCAN_DEVICES = ("arxcan*", "ttyACM*")  # arx5-sdk README "USB-CAN setup": an SLCAN adapter is a serial device
CLOSE_TIMEOUT_S = 5.0  # the SDK's destructor damps the arm and waits 2 s (controller_base.cpp)


@dataclass(frozen=True)
class ArxSdkConfig:
    """An ARX arm on a SocketCAN interface, driven by Cartesian targets."""

    robot_id: str = setting("arx", "unique robot name in the deployment")
    site: str = setting("local", "where the robot is (hardware registry)")
    model: str = setting("L5", "arm model as the SDK names it", choices=("L5", "X5"))
    interface: str = setting("can0", "SocketCAN interface the arm is on (ip link show)")
    control_rate_hz: float = setting(10.0, "policy rate: one Cartesian target per period", min=0.5, max=100.0)
    # The SDK's RobotConfig.gripper_open_readout (gripper motor reading when fully open; 5.03 for L5 / X5). Newer
    # arms mount the gripper motor the other way round and need a negative value (the SDK suggests -3.4): with
    # the default the SDK stops in its emergency state while connecting ("Gripper position error: ...").
    gripper_open_readout: float | None = setting(
        None, "gripper motor readout when fully open; none: the SDK's default (newer arms: negative, e.g. -3.4)"
    )
    connect_timeout_s: float = setting(10.0, "longest the SDK may take to load and open the arm (s)", min=1.0)
    reset_timeout_s: float = setting(15.0, "longest the SDK's reset_to_home may take (s)", min=1.0)
    call_timeout_s: float = setting(0.5, "longest one state read or command may take in the SDK (s)", min=0.05)
    safety: SafetyConfig = setting(SafetyConfig(), "workspace box and per-step action limits")

    def __post_init__(self) -> None:
        readout = self.gripper_open_readout
        if readout is not None and (not math.isfinite(readout) or abs(readout) < 1e-3):
            raise ConfigError(
                f"gripper_open_readout must be a non-zero motor readout (5.03; newer arms e.g. -3.4), got {readout}"
            )


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


def missing_interface_error(iface: str) -> ArxConnectionError:
    """The connect error for a CAN interface that does not exist, with the `slcand` step for a serial adapter."""
    serial = sorted(str(p) for pattern in SLCAN_DEVICES for p in DEV.glob(pattern))
    if serial:  # arx5-sdk README "For adapters using SLCAN framework"
        return ArxConnectionError(
            f"CAN interface {iface!r} not found, and {serial[0]} is a serial (SLCAN) USB-CAN adapter: create the "
            f"interface with `sudo slcand -o -f -s8 {serial[0]} {iface} && sudo ifconfig {iface} up` "
            "(after every replug; see docs/arx.md), or set `interface`"
        )
    return ArxConnectionError(
        f"CAN interface {iface!r} not found: plug in the USB-CAN adapter and bring it up "
        f"(sudo ip link set up {iface} type can bitrate 1000000), or set `interface`"
    )


class ArxSdkRobot(ArmRobot):
    """An ARX arm behind the shared `ArmRobot` (safety filter, hold, e-stop); Cartesian targets via the SDK."""

    def __init__(
        self, config: ArxSdkConfig | None = None, sdk_module: str = "arx5_interface", sdk_path: Sequence[str] = ()
    ) -> None:
        """`sdk_module` / `sdk_path`: the SDK's module and folders put first on the SDK process's sys.path (tests
        pass a stand-in SDK)."""
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
        self._sdk_process = SdkProcess(sdk_module, sdk_path)
        self._open = False
        self._homed = False  # reset_to_home ran: from now on kp 0 means the SDK's emergency state
        self._gripper_width = 0.088
        self._pacer = DeadlinePacer(1.0 / cfg.control_rate_hz)
        self._last: tuple[float, Vec] | None = None  # (SDK time s, tool pose) of the previous read

    @property
    def sdk_pid(self) -> int | None:
        """The SDK process's id while it runs (for the operator, and tests that end it)."""
        return self._sdk_process.pid

    def _call(self, op: str, *args: Any, what: str, timeout_s: float | None = None) -> Any:
        if not self._open:
            raise NotConnectedError(f"robot {self.descriptor.robot_id!r} is not connected; call connect() first")
        return self._sdk_process.call(op, *args, what=what, timeout_s=timeout_s or self.config.call_timeout_s)

    def _connect(self) -> None:
        cfg, iface = self.config, self.config.interface
        if not (SYS_NET / iface).exists():
            raise missing_interface_error(iface)
        what = f"opening the ARX {cfg.model} on CAN interface {iface!r}"
        try:
            self._sdk_process.start(cfg.connect_timeout_s)
            info = self._sdk_process.call(
                "open", cfg.model, iface, cfg.gripper_open_readout, what=what, timeout_s=cfg.connect_timeout_s
            )
        except ArxError as exc:
            self._sdk_process.stop(CLOSE_TIMEOUT_S)
            raise _connect_error(exc) from exc
        self._gripper_width = float(info["gripper_width"])
        self._open, self._homed, self._last = True, False, None
        self._pacer.restart()

    def _close(self) -> None:
        self._open = self._homed = False
        problem = self._sdk_process.stop(CLOSE_TIMEOUT_S)
        if problem is not None:
            _log.warning("ARX %s: could not switch to damping on close: %s", self.descriptor.robot_id, problem)

    def _reset(self, seed: int | None) -> ArmState:
        if seed is not None:
            _log.debug("ARX %s: seed %s ignored, the real arm always starts at home", self.descriptor.robot_id, seed)
        raw = self._call("reset", what="moving home (reset_to_home)", timeout_s=self.config.reset_timeout_s)
        self._homed, self._last = True, None
        self._pacer.restart()
        return self._state_from(raw)

    def _read_state(self) -> ArmState:
        return self._state_from(self._call("state", what="reading the arm's state"))

    def _command(self, target_pose: Vec, gripper: float) -> None:
        width = min(max(gripper, 0.0), 1.0) * self._gripper_width
        eef = [float(v) for v in tool_to_eef(target_pose)]
        reply = self._call("command", eef, width, self._pacer.period_s, what="sending the target")
        self._check_gain(float(reply["kp"]))
        status = int(reply["ik"])
        if status != 0:
            raise ArxIkError(
                f"the ARX SDK's inverse kinematics found no joint solution for the target "
                f"{np.round(target_pose[:3], 3).tolist()} m ({ik_status_name(status)}, {status}); it was not sent: "
                "keep the workspace box inside the arm's reach"
            )

    def _wait_period(self) -> None:
        self._pacer.wait()

    def _check_gain(self, kp: float) -> None:
        if kp > 0.0:
            return
        if self._homed:
            raise ArxEmergencyError(
                "the ARX arm went limp: the SDK set its position gain to 0 (its emergency state: over current or "
                "a bad joint reading, see the SDK's log); no step is recorded. Check the arm, then restart the node"
            )
        raise ArxError("the ARX arm is in damping (position gain 0) until reset() moves it home")

    def _state_from(self, raw: dict[str, Any]) -> ArmState:
        if self._homed:
            self._check_gain(float(raw["kp"]))
        now = float(raw["time"])
        pose = eef_to_tool(raw["pose_6d"])
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
            joint_positions=np.asarray(raw["joint_pos"], dtype=np.float64),
            joint_velocities=np.asarray(raw["joint_vel"], dtype=np.float64),
            gripper=min(max(float(raw["gripper_pos"]) / self._gripper_width, 0.0), 1.0),
        )


def _connect_error(exc: ArxError) -> ArxConnectionError:
    """One line for a failed connect: what the SDK said, and what to do about it."""
    text = str(exc)
    if "ImportError" in text:
        return ArxConnectionError(f"the ARX SDK is not installed (pip install arx5-interface): {text}")
    if "gripper_open_readout" in text:
        text += (
            "; newer arms need hardware.gripper_open_readout set to their (negative) readout, e.g. -3.4, "
            "or calibrate it with arx5-sdk's python/examples/calibrate.py"
        )
    return ArxConnectionError(f"cannot connect: {text}")
