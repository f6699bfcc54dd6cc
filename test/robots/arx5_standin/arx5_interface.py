"""Stand-in for arx5-sdk's `arx5_interface` (real-stanford/arx5-sdk), importable in the SDK's child process.

It follows the upstream C++ it is named after, failures included, with the SDK's own log texts (spdlog pattern
"[%H:%M:%S %n %^%l%$] %v" on stdout, logger name "<model>_<interface>"):

- src/app/controller_base.cpp `init_robot_` / `check_joint_state_sanity_`: an arm whose gripper motor turns the
  other way (newer arms, README "Update (2026.01.11)") reads a negative opening with the default
  `gripper_open_readout`; the check logs "Gripper position error: ..." and enters the emergency state inside the
  constructor, which then never returns and, holding the GIL, ignores Ctrl-C (modelled: SIGINT ignored, a busy
  loop). Setting `robot_config.gripper_open_readout` to the arm's (negative) readout fixes it.
- `over_current_protection_` / `enter_emergency_state_` in the background thread: "Over current detected, robot
  is set to damping. Please restart the program." then "Emergency state entered. Please restart the program.";
  the loop re-applies a damping gain (kp 0) every 5 ms and pins the command to the measured state, so commands
  are ignored (`emergency=limp`). As written upstream, the loop holds `cmd_mutex_` and `set_gain` locks it again:
  a self-deadlock, after which every call needing the lock never returns (`emergency=deadlock`, modelled with a
  non-reentrant lock taken twice).
- src/app/cartesian_controller.cpp `set_eef_cmd`: an IK failure is only logged ("Inverse kinematics failed: ...")
  and the clipped joints are sent anyway; `multi_trial_ik` returns the status (include/app/solver.h codes).
- The interface name check and the "None of the motors are initialized" error of an unpowered arm.

The arm is chosen with the environment variable ARX5_STANDIN, comma-separated `key=value`:
`arm_gripper_readout` (the arm's fully-open gripper motor readout; default 5.03, newer arms e.g. -3.4),
`overcurrent_after` (over-current once this many `set_eef_cmd` calls were made; 0 = never),
`emergency` (`limp` or `deadlock`), `unpowered` (1: no motor answers). The end effector follows each target at
once (no dynamics); targets farther than REACH_M from the base have no IK solution.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any

import numpy as np

REACH_M = 0.55  # stand-in workspace of the L5 / X5 (arm length about 0.6 m)
E_MAX_ITERATIONS_EXCEEDED = -5  # KDL SolverI, as include/app/solver.h maps it
HOME_POSE = np.array([0.3, 0.0, 0.12, 0.0, 0.0, 0.0])  # eef_link at the home joints (stand-in value)
HOME_JOINTS = np.array([0.001, 0.002, 0.001, -0.001, 0.0005, 0.001])  # real encoders never read exactly 0


def _options() -> dict[str, str]:
    raw = os.environ.get("ARX5_STANDIN", "")
    return dict(item.split("=", 1) for item in raw.split(",") if item)


class LogLevel:
    TRACE, DEBUG, INFO, WARNING, ERROR, CRITICAL, OFF = range(7)


class Gain:
    def __init__(self, kp: Any = 6, kd: Any = None, gripper_kp: float = 0.0, gripper_kd: float = 0.0) -> None:
        if isinstance(kp, int):
            kp, kd = np.zeros(kp), np.zeros(kp)
        self._kp: np.ndarray = np.asarray(kp, float).copy()
        self._kd: np.ndarray = np.asarray(kd, float).copy()
        self.gripper_kp, self.gripper_kd = gripper_kp, gripper_kd

    def kp(self) -> np.ndarray:
        return self._kp

    def kd(self) -> np.ndarray:
        return self._kd


class JointState:
    def __init__(self, pos: Any, vel: Any, gripper_pos: float, timestamp: float) -> None:
        self._pos: np.ndarray = np.asarray(pos, float).copy()
        self._vel: np.ndarray = np.asarray(vel, float).copy()
        self.gripper_pos, self.timestamp = gripper_pos, timestamp
        self.gripper_vel = self.gripper_torque = 0.0

    def pos(self) -> np.ndarray:
        return self._pos

    def vel(self) -> np.ndarray:
        return self._vel


class EEFState:
    def __init__(self, pose_6d: Any = None, gripper_pos: float = 0.0) -> None:
        self._pose = np.zeros(6) if pose_6d is None else np.asarray(pose_6d, float).reshape(6).copy()
        self.gripper_pos, self.timestamp = float(gripper_pos), 0.0
        self.gripper_vel = self.gripper_torque = 0.0

    def pose_6d(self) -> np.ndarray:
        return self._pose


class RobotConfig:
    """include/app/config.h: the L5 / X5 entries of RobotConfigFactory (the values the driver reads)."""

    def __init__(self, model: str) -> None:
        self.robot_model, self.joint_dof = model, 6
        self.gripper_width, self.gripper_open_readout = 0.088, 5.03


class ControllerConfig:
    """include/app/config.h: ControllerConfigFactory's "cartesian_controller_6"."""

    def __init__(self) -> None:
        self.controller_type = "cartesian_controller"
        self.default_kp = np.array([200.0, 200.0, 200.0, 120.0, 80.0, 60.0])
        self.default_kd = np.array([5.0, 5.0, 5.0, 1.0, 1.0, 1.0])
        self.default_gripper_kp, self.default_gripper_kd = 5.0, 0.2
        self.controller_dt, self.background_send_recv = 0.002, True


class RobotConfigFactory:
    _instance: RobotConfigFactory | None = None

    @classmethod
    def get_instance(cls) -> RobotConfigFactory:
        cls._instance = cls._instance or cls()
        return cls._instance

    def get_config(self, model: str) -> RobotConfig:
        models = ("X5", "X5_umi", "X5_iphumi", "L5", "L5_umi", "L5_iphumi", "X7_left", "X7_right")
        if model not in models:
            raise RuntimeError("Unknown robot model. Currently available: " + "".join(m + " " for m in models))
        return RobotConfig(model)


class ControllerConfigFactory:
    _instance: ControllerConfigFactory | None = None

    @classmethod
    def get_instance(cls) -> ControllerConfigFactory:
        cls._instance = cls._instance or cls()
        return cls._instance

    def get_config(self, controller_type: str, joint_dof: int) -> ControllerConfig:
        if controller_type != "cartesian_controller" or joint_dof != 6:
            raise RuntimeError("Unknown controller type. Currently available: joint_controller, cartesian_controller")
        return ControllerConfig()


class Arx5CartesianController:
    def __init__(self, *args: Any) -> None:
        if len(args) == 2:
            robot_config, controller_config = RobotConfigFactory.get_instance().get_config(args[0]), ControllerConfig()
        else:
            robot_config, controller_config = args[0], args[1]
        interface = args[-1]
        if not interface.startswith(("can", "en", "eth")):  # the SDK's libhardware
            raise RuntimeError(
                "Interface name should start with can (for USB-CAN adapter) or en/eth (for EtherCAT-CAN adapter). "
                f"Unrecognized interface name {interface}"
            )
        opts = _options()
        self._robot, self._ctrl_cfg = robot_config, controller_config
        self._name = f"{robot_config.robot_model}_{interface}"
        self._start = time.monotonic()
        self._cmd_mutex, self._state_mutex = threading.Lock(), threading.Lock()  # std::mutex: not reentrant
        self._mode = opts.get("emergency", "limp")
        self._overcurrent_after = int(opts.get("overcurrent_after", "0"))
        self._commands = 0
        self._gain = Gain(6)
        self._gain._kd = controller_config.default_kd.copy()  # init_robot_: damping by default
        self._pose, self._cmd_pose = HOME_POSE.copy(), HOME_POSE.copy()
        arm_readout = float(opts.get("arm_gripper_readout", "5.03"))
        self._gripper_motor = 0.2 * arm_readout  # the gripper a little open at power-on
        self._cmd_gripper_motor = self._gripper_motor
        self._emergency = False
        self._stop = threading.Event()
        self._log("info", "Clearing motor controller states...")
        if opts.get("unpowered") == "1":
            text = "None of the motors are initialized. Please check the connection or power of the arm."
            self._log("error", text)
            raise RuntimeError(text)
        if not self._gripper_sane():  # init_robot_ -> check_joint_state_sanity_ -> enter_emergency_state_
            self._log("error", "Emergency state entered. Please restart the program.")
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a C++ loop holding the GIL: Python never sees Ctrl-C
            while True:
                pass
        self._thread = threading.Thread(target=self._background, daemon=True)
        self._thread.start()
        self._log("info", f"Background send_recv task is running at ID: {self._thread.native_id}")

    # ---- the SDK's API -------------------------------------------------------------------------------

    def get_robot_config(self) -> RobotConfig:
        return self._robot

    def get_timestamp(self) -> float:
        return time.monotonic() - self._start

    def get_gain(self) -> Gain:
        with self._cmd_mutex:
            return Gain(self._gain.kp(), self._gain.kd(), self._gain.gripper_kp, self._gain.gripper_kd)

    def set_gain(self, gain: Gain) -> None:
        with self._cmd_mutex:
            self._gain = gain

    def get_joint_state(self) -> JointState:
        with self._state_mutex:
            return JointState(HOME_JOINTS, np.zeros(6), self._gripper_pos(), self.get_timestamp())

    def get_eef_state(self) -> EEFState:
        with self._state_mutex:
            state = EEFState(self._pose, self._gripper_pos())
        state.timestamp = self.get_timestamp()
        return state

    def multi_trial_ik(self, pose_6d: Any, joints: Any, additional_trial_num: int) -> tuple[int, np.ndarray]:
        if additional_trial_num < 0:
            raise ValueError("Number of additional trials must be non-negative")
        reachable = float(np.linalg.norm(np.asarray(pose_6d, float)[:3])) <= REACH_M
        return (0 if reachable else E_MAX_ITERATIONS_EXCEEDED), np.asarray(joints, float).copy()

    def set_eef_cmd(self, cmd: EEFState) -> None:
        status, _ = self.multi_trial_ik(cmd.pose_6d(), HOME_JOINTS, 5)
        with self._cmd_mutex:
            self._commands += 1
            if status == 0:
                self._cmd_pose = cmd.pose_6d().copy()
            self._cmd_gripper_motor = cmd.gripper_pos / self._robot.gripper_width * self._robot.gripper_open_readout
        if status != 0:
            self._log("warning", f"Inverse kinematics failed: E_MAX_ITERATIONS_EXCEEDED ({status})")

    def reset_to_home(self) -> None:
        if not self.get_gain().kp().any():
            self._log("info", "Current kp is zero. Setting to default kp kd")
        self._log("info", "Start reset to home in 1.000s, max_pos_error: 0.500")
        cfg = self._ctrl_cfg
        self.set_gain(Gain(cfg.default_kp, cfg.default_kd, cfg.default_gripper_kp, cfg.default_gripper_kd))
        with self._cmd_mutex:
            self._cmd_pose = HOME_POSE.copy()
            self._cmd_gripper_motor = self._robot.gripper_open_readout  # gripper home: fully open
            with self._state_mutex:  # upstream blocks while the arm moves there (a few seconds)
                self._pose, self._gripper_motor = self._cmd_pose.copy(), self._cmd_gripper_motor
        self._log("info", "Finish reset to home")

    def set_to_damping(self) -> None:
        self.set_gain(Gain(np.zeros(6), self._ctrl_cfg.default_kd))

    # ---- internals -----------------------------------------------------------------------------------

    def _gripper_pos(self) -> float:
        return self._gripper_motor / self._robot.gripper_open_readout * self._robot.gripper_width

    def _gripper_sane(self) -> bool:
        pos, width = self._gripper_pos(), self._robot.gripper_width
        if -0.005 <= pos <= width + 0.005:
            return True
        self._log(
            "error",
            f"Gripper position error: got {pos:.3f} but should be in 0~{width:.3f} (m). Please close the gripper "
            "before turning on the arm; change robot_config.gripper_open_readout to a negative number (a common "
            "value is -3.4 for some recent robots); or recalibrate gripper home and width.",
        )
        return False

    def _background(self) -> None:
        while not self._stop.wait(0.002):  # controller_dt
            with self._cmd_mutex:
                overcurrent = 0 < self._overcurrent_after <= self._commands
                pose, gripper, moving = self._cmd_pose.copy(), self._cmd_gripper_motor, self._gain.kp().any()
            if overcurrent:
                self._log("error", "Over current detected, robot is set to damping. Please restart the program.")
                self._enter_emergency_state()
                return
            if moving:
                with self._state_mutex:
                    self._pose, self._gripper_motor = pose, gripper

    def _enter_emergency_state(self) -> None:
        damping = Gain(np.zeros(6), self._ctrl_cfg.default_kd * np.array([1, 3, 3, 1.5, 1, 1]))
        self._log("error", "Emergency state entered. Please restart the program.")
        while not self._stop.is_set():
            with self._cmd_mutex:
                if self._mode == "deadlock":
                    self.set_gain(damping)  # locks cmd_mutex_ again: never returns
                self._gain = damping
                with self._state_mutex:
                    self._cmd_pose, self._cmd_gripper_motor = self._pose.copy(), self._gripper_motor
            self._stop.wait(0.005)

    def _log(self, level: str, text: str) -> None:
        sys.stdout.write(f"[{time.strftime('%H:%M:%S')} {self._name} {level}] {text}\n")
        sys.stdout.flush()
