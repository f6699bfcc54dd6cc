"""`FrankaLibfrankaRobot`: a Franka Panda / FR3 driven directly through franky (libfranka), no ROS.

How set-points are streamed (`controller`):

- ``impedance`` (default): one `CartesianImpedanceTrackingMotion`, started with `move(asynchronous=True)`, runs
  franky's 1 kHz Cartesian impedance law until stopped; each `step` only hands it a new reference
  (`set_reference`, taken at the next 1 kHz cycle). Nothing blocks, the arm stays compliant in contact (the
  usual choice for contact-rich RL on a Franka) and the error clips bound its force (stiffness x clip). Costs:
  torque control needs a good link, and model mismatch leaves millimetres of steady-state error.
- ``waypoint``: each `step` starts a new absolute `CartesianMotion` (`return_when_finished=False`,
  asynchronous); franky re-plans a jerk-limited trajectory from the current state and it takes over the old
  one seamlessly. Stiff tracking by Franka's own controller, scaled by `dynamics_factor`; contact -> reflex.

Errors from libfranka become `FrankaError` subclasses with messages for the operator. A reflex or any other
motion abort surfaces at the end of the step's period (or when the next target is sent), so `ArmRobot`
latches the e-stop; while latched and with no motion running nothing is sent (the robot has stopped itself).
`clear_estop()` and `reset()` run libfranka's error recovery whenever no motion runs, whatever the error flags
say: the flags clear once the arm has braked while the robot mode stays Reflex, and after a released user stop
the mode reads Idle yet motions are refused until recovery (franka_ros issues #32, #308). A pressed user stop
cannot be recovered from: they refuse with "release the user stop". The next step restarts the controller.

State: O_T_EE, joint q/dq, TCP twist = zero Jacobian x dq, wrench = O_F_ext_hat_K as libfranka defines it
(base frame, force applied by the robot positive), hand width / max width; `stamp_ns` is the host clock.
franky is imported on `connect()`, so this module loads without the `franka` extra. The settings are
`user.robots.franka_libfranka_config`.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from user.robots import embodiments
from user.robots.arm import ArmRobot
from user.robots.base import ArmState, NotConnectedError, RobotError
from user.robots.franka_errors import (
    FrankaConnectionError,
    FrankaControlError,
    FrankaError,
    FrankaGripperError,
    FrankaReflexError,
    mode_error,
    mode_name,
    translate_error,
)
from user.robots.franka_libfranka_config import FrankaLibfrankaConfig
from user.robots.pacing import DeadlinePacer

FCI_PORT = 1337  # libfranka's command port on the robot's Control unit
_NOMINAL_HAND_WIDTH_M = 0.08  # Franka Hand opening when the gripper cannot tell (not homed)


def load_franky() -> Any:
    """The franky module, or a `FrankaError` saying how to install it."""
    try:
        import franky
    except ImportError as exc:
        raise FrankaError(f"franky is not installed ({exc}): pip install 'user[franka]'") from exc
    return franky


def probe(host: str, port: int, timeout_s: float) -> None:
    """Fail fast with `FrankaConnectionError` when nothing accepts TCP at host:port within `timeout_s`."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        why = f"{exc.strerror or exc}. Is the robot on, FCI activated in Desk, and the host right?"
        raise FrankaConnectionError(f"no Franka answers at {host}:{port} within {timeout_s:.1f} s ({why})") from exc


class FrankaLibfrankaRobot(ArmRobot):
    """A Franka arm behind the shared `ArmRobot` (safety filter, hold, e-stop latch)."""

    def __init__(self, config: FrankaLibfrankaConfig | None = None, clock_ns: Callable[[], int] = time.time_ns) -> None:
        cfg = config or FrankaLibfrankaConfig()
        descriptor = embodiments.franka_descriptor(cfg.robot_id, cfg.model, cfg.control_rate_hz, cfg.site)
        super().__init__(descriptor, cfg.safety)
        self.config = cfg
        self._clock_ns = clock_ns
        self._pacer = DeadlinePacer(1.0 / cfg.control_rate_hz)
        self._fr: Any = None
        self._robot: Any = None
        self._gripper: Any = None
        self._motion: Any = None  # the impedance tracking motion while it runs
        self._gripper_future: Any = None
        self._gripper_sent: float | None = None
        self._max_width = _NOMINAL_HAND_WIDTH_M
        self._last_quat: npt.NDArray[np.float64] | None = None

    @property
    def franky_robot(self) -> Any:
        """The underlying `franky.Robot` (for tools and tests); raises when not connected."""
        if self._robot is None:
            raise NotConnectedError(f"robot {self.descriptor.robot_id!r} is not connected; call connect() first")
        return self._robot

    def clear_estop(self) -> None:
        """Run libfranka's automatic error recovery (unless a motion still runs), then release the e-stop."""
        if self.estopped and self._robot is not None:
            self._recover("clearing the e-stop")
        super().clear_estop()

    # ---- driver hooks -------------------------------------------------------------------------------

    def _connect(self) -> None:
        cfg = self.config
        fr = load_franky()
        probe(cfg.host, FCI_PORT, cfg.connect_timeout_s)
        self._fr = fr
        try:
            with self._errors("connecting"):
                realtime = fr.RealtimeConfig.Ignore if cfg.ignore_realtime else fr.RealtimeConfig.Enforce
                self._robot = fr.Robot(
                    cfg.host,
                    relative_dynamics_factor=cfg.dynamics_factor,
                    default_torque_threshold=cfg.torque_threshold_nm,
                    default_force_threshold=cfg.force_threshold_n,
                    realtime_config=realtime,
                )
                if cfg.gripper:
                    self._gripper = fr.Gripper(cfg.host)
                    width = float(self._gripper.max_width)
                    self._max_width = width if width > 1e-3 else _NOMINAL_HAND_WIDTH_M
        except BaseException:
            self._gripper = self._robot = self._fr = None  # release a half-open connection
            raise
        self._pacer.restart()

    def _close(self) -> None:
        try:
            with self._errors("stopping the controller"):
                self._stop_motion()
        except FrankaError as exc:
            self._log.error("%s (closing anyway)", exc)
        finally:
            # Dropping the last references closes libfranka's connections: motion and gripper first, robot last.
            self._motion = self._gripper_future = self._gripper = None
            self._robot = self._fr = None
            self._gripper_sent = self._last_quat = None

    def _reset(self, seed: int | None) -> ArmState:
        robot, fr, cfg = self.franky_robot, self._fr, self.config
        with self._errors("resetting"):
            self._stop_motion()
        self._recover("resetting")
        with self._errors("resetting"):
            robot.move(fr.JointMotion(np.array(cfg.home_joints, dtype=np.float64)), asynchronous=True)
            self._join("moving to the home joints")
            if seed is not None and cfg.reset_jitter_m > 0.0:
                self._jitter(np.random.default_rng(seed))
            if self._gripper is not None:
                self._open_gripper()
            self._start_motion(robot.current_pose.end_effector_pose)
        self._pacer.restart()
        return self._read_state()

    def _read_state(self) -> ArmState:
        robot, fr = self.franky_robot, self._fr
        with self._errors("reading the state"):
            s = robot.state
            pose = s.O_T_EE
            dq = np.asarray(s.dq, dtype=np.float64).reshape(7)
            jacobian = np.asarray(robot.model.zero_jacobian(fr.Frame.EndEffector, s), dtype=np.float64)
            width = float(self._gripper.width) if self._gripper is not None else None
            quat = np.asarray(pose.quaternion, dtype=np.float64).reshape(4)
            if self._last_quat is not None and float(np.dot(quat, self._last_quat)) < 0.0:
                quat = -quat  # same rotation; keep observations continuous across the double cover
            self._last_quat = quat
            return ArmState(
                stamp_ns=self._clock_ns(),
                tcp_pose=np.concatenate([np.asarray(pose.translation, dtype=np.float64).reshape(3), quat]),
                tcp_velocity=jacobian @ dq,
                joint_positions=np.asarray(s.q, dtype=np.float64).reshape(7),
                joint_velocities=dq,
                gripper=self.gripper_target if width is None else min(max(width / self._max_width, 0.0), 1.0),
                wrench=np.asarray(s.O_F_ext_hat_K, dtype=np.float64).reshape(6),
            )

    def _command(self, target_pose: npt.NDArray[np.float64], gripper: float) -> None:
        robot, fr = self.franky_robot, self._fr
        with self._errors("sending the target"):
            target = fr.Affine(target_pose[:3], target_pose[3:])
            robot.poll_motion()  # raises the error that ended the last motion, if any
            if not robot.is_in_control:
                if self.estopped:
                    return  # the robot stopped itself; restarting needs clear_estop()
                self._refuse_unless_ready(robot)
                self._start_motion(target)
            elif self._motion is not None:
                self._motion.set_reference(fr.CartesianReference(target=target))
            else:
                self._move_to(target)
            self._command_gripper(gripper)

    def _wait_period(self) -> None:
        self._pacer.wait()
        with self._errors("controlling the arm"):
            self.franky_robot.poll_motion()  # a reflex during the period surfaces here, at the end of the step

    # ---- internals ----------------------------------------------------------------------------------

    def _recover(self, what: str) -> None:
        """libfranka's automatic error recovery, gated on the robot mode rather than the (already clear) flags."""
        robot = self.franky_robot
        with self._errors(what):
            if robot.is_in_control:
                return  # a motion runs: the robot is in mode Move and has nothing to recover from
            state = robot.state
            mode = mode_name(state.robot_mode)
            if mode == "UserStopped":
                raise mode_error(mode, self.config.host, what)  # recovery cannot run while it is pressed
            quiet = mode == "Idle" and not robot.has_errors  # the routine call at each reset
            level = logging.DEBUG if quiet else logging.WARNING
            self._log.log(
                level, "running libfranka's error recovery (robot mode %s, errors %s)", mode, state.current_errors
            )
            robot.recover_from_errors()

    def _refuse_unless_ready(self, robot: Any) -> None:
        """Before a new motion: a robot in Reflex or UserStopped mode refuses it; say why instead of trying."""
        state = robot.state
        mode = mode_name(state.robot_mode)
        if robot.has_errors:  # franky's Errors object itself is always truthy; has_errors asks libfranka
            raise FrankaReflexError(f"the Franka reports errors {state.current_errors}; clear_estop() recovers it")
        if mode in ("Reflex", "UserStopped"):
            raise mode_error(mode, self.config.host, "sending the target")

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """Turn franky's exceptions raised inside the block into typed `FrankaError`s."""
        try:
            yield
        except RobotError:
            raise
        except Exception as exc:
            if type(exc).__module__.split(".")[0] != "franky":
                raise
            raise translate_error(exc, self.config.host, what) from exc

    def _start_motion(self, target: Any) -> None:
        cfg, fr = self.config, self._fr
        if cfg.controller == "waypoint":
            self._motion = None
            self._move_to(target)
            return
        motion = fr.CartesianImpedanceTrackingMotion(
            translational_stiffness=cfg.translational_stiffness,
            rotational_stiffness=cfg.rotational_stiffness,
            translational_error_clip=np.full(3, cfg.translational_error_clip_m),
            rotational_error_clip=np.full(3, cfg.rotational_error_clip_rad),
        )
        motion.set_reference(fr.CartesianReference(target=target))
        self.franky_robot.move(motion, asynchronous=True)
        self._motion = motion
        self._log.info("Cartesian impedance controller started")

    def _move_to(self, target: Any) -> None:
        """Waypoint streaming: a new motion to `target` that takes over from the running one."""
        fr = self._fr
        motion = fr.CartesianMotion(target, fr.ReferenceType.Absolute, return_when_finished=False)
        self.franky_robot.move(motion, asynchronous=True)

    def _stop_motion(self) -> None:
        """End the streaming motion gracefully (impedance: ramp to damping; waypoint: stop)."""
        robot, fr, motion = self._robot, self._fr, self._motion
        if robot is None:
            return
        self._motion = None
        if not robot.is_in_control:
            try:
                with self._errors("checking the last motion"):
                    robot.poll_motion()  # consume an error the last motion ended with, if any
            except FrankaError as exc:
                self._log.warning("the last motion had ended with an error: %s", exc)
            return
        if motion is not None:
            robot.move(fr.TorqueStopMotion(), asynchronous=True)
        else:
            robot.stop()
        self._join("stopping the controller", preempted_ok=True)

    def _join(self, what: str, preempted_ok: bool = False) -> None:
        """Wait for the running motion to finish, at most `reset_timeout_s`; stop it and fail after that."""
        robot = self.franky_robot
        try:
            finished = robot.join_motion(self.config.reset_timeout_s)
        except Exception as exc:
            if preempted_ok and "preempted" in str(exc):
                return
            raise
        if not finished:
            robot.stop()
            raise FrankaControlError(
                f"{what} did not finish within {self.config.reset_timeout_s:.0f} s; the arm was stopped"
            )

    def _jitter(self, rng: np.random.Generator) -> None:
        fr, cfg = self._fr, self.config
        pose = self.franky_robot.current_pose.end_effector_pose
        shift = np.append(rng.uniform(-cfg.reset_jitter_m, cfg.reset_jitter_m, size=2), 0.0)
        lo, hi = cfg.safety.workspace_min, cfg.safety.workspace_max
        xyz = np.clip(np.asarray(pose.translation).reshape(3) + shift, lo, hi)
        motion = fr.CartesianMotion(fr.Affine(xyz, pose.quaternion), fr.ReferenceType.Absolute)
        self.franky_robot.move(motion, asynchronous=True)
        self._join("moving to the randomised start")

    def _open_gripper(self) -> None:
        if self._gripper_future is not None:  # let a grasp still in flight end first
            self._gripper_future.wait(self.config.reset_timeout_s)
        future = self._gripper.move_async(self._max_width, self.config.gripper_speed)
        if not future.wait(self.config.reset_timeout_s):
            raise FrankaGripperError(f"the Franka Hand did not open within {self.config.reset_timeout_s:.0f} s")
        if not future.get():
            self._log.warning("the Franka Hand did not report a complete opening")
        self._gripper_future, self._gripper_sent = None, 1.0

    def _command_gripper(self, opening: float) -> None:
        """Send a move (opening) or grasp (closing) when the target changed and the last command is done."""
        if self._gripper is None:
            return
        if self._gripper_future is not None:
            if not self._gripper_future.wait(0.0):
                return  # still moving; the newest target is sent once it is done
            if not self._gripper_future.get():
                self._log.debug("gripper command ended without reaching its target (e.g. nothing grasped)")
            self._gripper_future = None
        if self._gripper_sent is not None and abs(opening - self._gripper_sent) < self.config.gripper_deadband:
            return
        width = opening * self._max_width
        if self._gripper_sent is not None and opening < self._gripper_sent:
            cfg = self.config  # closing: grasp with force, succeed wherever the fingers stop
            self._gripper_future = self._gripper.grasp_async(width, cfg.gripper_speed, cfg.gripper_force, 1.0, 1.0)
        else:
            self._gripper_future = self._gripper.move_async(width, self.config.gripper_speed)
        self._gripper_sent = opening
