"""The ARX SDK's own process: `arx5_interface` runs here, never in the robot node (`user.robots.arx_link` starts it).

Why a process: every call of the SDK holds the GIL (its pybind11 bindings release nothing), and its emergency state
(arx5-sdk src/app/controller_base.cpp `enter_emergency_state_`) is an endless loop. Entered while the constructor
reads the arm (a gripper readout of the wrong sign on newer arms, a joint reading out of range) the constructor
never returns; entered in the SDK's background thread, the loop keeps the command lock, so every later call that
needs it never returns. Inside the node either would freeze it, Ctrl-C included. Here the node's end of the pipe
gives every call a deadline and ends this process when one passes.

Protocol: a `multiprocessing.connection.Connection` on an inherited socket. Request `(op, args)`; reply
`("ok", value)` or `("error", exception type name, message)`, values plain Python (lists, floats), never SDK
objects. Ops: `open`, `reset`, `state`, `command`, `close`. The SDK's own log (spdlog on stdout) goes to this
process's stdout, which the node reads. The process has its own session, so the terminal's Ctrl-C reaches only
the node, which closes it (arm to damping); when the node's end of the pipe closes, it closes the arm and exits.
Only the standard library and numpy are imported here besides the SDK.
"""

from __future__ import annotations

import importlib
import socket
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

IK_EXTRA_TRIALS = 5  # the SDK's own default for multi_trial_ik (include/app/cartesian_controller.h)


class _Arm:
    """One Cartesian controller of the SDK and the ops the node may ask for."""

    def __init__(self, module: str) -> None:
        self.sdk: Any = importlib.import_module(module)
        self.np: Any = importlib.import_module("numpy")
        self.ctrl: Any = None

    def open(self, model: str, interface: str, gripper_open_readout: float | None) -> dict[str, float]:
        # as arx5-sdk python/examples/spacemouse_teleop.py: the factory configs, edited before the constructor
        robot_config = self.sdk.RobotConfigFactory.get_instance().get_config(model)
        if gripper_open_readout is not None:
            robot_config.gripper_open_readout = gripper_open_readout
        controller_config = self.sdk.ControllerConfigFactory.get_instance().get_config(
            "cartesian_controller", robot_config.joint_dof
        )
        self.ctrl = self.sdk.Arx5CartesianController(robot_config, controller_config, interface)
        return {"gripper_width": float(self.ctrl.get_robot_config().gripper_width)}

    def reset(self) -> dict[str, Any]:
        self.ctrl.reset_to_home()
        return self.state()

    def state(self) -> dict[str, Any]:
        eef, joints = self.ctrl.get_eef_state(), self.ctrl.get_joint_state()
        return {
            "pose_6d": [float(v) for v in eef.pose_6d()],
            "gripper_pos": float(eef.gripper_pos),
            "joint_pos": [float(v) for v in joints.pos()],
            "joint_vel": [float(v) for v in joints.vel()],
            "time": float(self.ctrl.get_timestamp()),
            "kp": self._kp(),
        }

    def command(self, pose_6d: list[float], width: float, preview_s: float) -> dict[str, Any]:
        """Send one end-effector target, unless the arm is limp (kp 0) or the SDK's IK finds no solution: then
        nothing is sent (set_eef_cmd would only log the IK failure and send the clipped joints) and the node
        raises."""
        kp = self._kp()
        if kp <= 0.0:
            return {"kp": kp, "ik": 0}
        pose = self.np.asarray(pose_6d, dtype=float)
        joints = self.np.asarray(self.ctrl.get_joint_state().pos(), dtype=float)
        status, _ = self.ctrl.multi_trial_ik(pose, joints, IK_EXTRA_TRIALS)
        if int(status) != 0:
            return {"kp": kp, "ik": int(status)}
        cmd = self.sdk.EEFState(pose, width)
        cmd.timestamp = float(self.ctrl.get_timestamp()) + preview_s  # arrive as the next target comes
        self.ctrl.set_eef_cmd(cmd)
        return {"kp": kp, "ik": 0}

    def close(self) -> None:
        ctrl, self.ctrl = self.ctrl, None
        if ctrl is not None:
            ctrl.set_to_damping()
            del ctrl  # the destructor damps, waits 2 s and joins the SDK's thread (controller_base.cpp)

    def _kp(self) -> float:
        return float(max(abs(float(v)) for v in self.ctrl.get_gain().kp()))


def serve(conn: Connection, arm: _Arm) -> None:
    """Answer requests until `close` or until the node's end of the pipe is gone."""
    ops: dict[str, Callable[..., Any]] = {
        "open": arm.open,
        "reset": arm.reset,
        "state": arm.state,
        "command": arm.command,
        "close": arm.close,
    }
    while True:
        try:
            op, args = conn.recv()
        except (EOFError, OSError):  # the node is gone: leave the arm damped
            arm.close()
            return
        try:
            conn.send(("ok", ops[op](*args)))
        except Exception as exc:  # the SDK raises RuntimeError / std exceptions with its own message
            conn.send(("error", type(exc).__name__, str(exc)))
        if op == "close":
            return


def main(argv: list[str]) -> int:
    """`argv`: socket fd, SDK module name, then folders to put first on sys.path (tests: the stand-in SDK)."""
    fd, module, *path = argv
    sys.path[:0] = path
    conn = Connection(socket.socket(fileno=int(fd)).detach())
    try:
        arm = _Arm(module)
    except ImportError as exc:
        conn.send(("error", "ImportError", str(exc)))
        return 1
    conn.send(("ok", "ready"))
    serve(conn, arm)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
