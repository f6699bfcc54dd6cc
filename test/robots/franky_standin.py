"""A stand-in for the `franky` module (franky 2.0.0 over its bundled libfranka 0.21.2) that fails as a real arm does.

Size: one library's surface as the driver sees it (values, motions, the robot, its Control unit) in one place, so
each behaviour sits beside the upstream reference it follows; about 390 lines.

franky-sim speaks the real protocol but its robot never leaves modes Idle/Move and its error recovery always
succeeds, so it cannot show what day one on a real arm shows. This module can, driven by a `ControlUnit` (the
robot's side) that a test pokes: `reflex(...)`, `finish_braking()`, `press_user_stop()`, `release_user_stop()`,
and the connect-time checks (`server_version`, `realtime_kernel`, `rt_scheduling_permitted`).

Only the surface `user.robots.franka_libfranka` uses is here. Every behaviour names the upstream code it follows;
the exception texts are libfranka's, byte for byte (checked against the strings of the bundled
libfranka-*.so.0.21.2). Install it with `monkeypatch.setitem(sys.modules, "franky", franky_standin)` and register
a unit with `monkeypatch.setitem(franky_standin.CONTROL_UNITS, host, ControlUnit())`.
"""

from __future__ import annotations

import builtins
import enum
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

LIBRARY_SERVER_VERSION = 10  # libfranka 0.21.2 research_interface::robot::kVersion (docs/compatibility_matrix.rst)
_READY_XYZ = (0.307, 0.0, 0.487)  # the FR3 "ready" TCP, pointing down
_READY_QUAT = (1.0, 0.0, 0.0, 0.0)  # xyzw


# ---- exceptions: franky python/bind_errors.cpp registers them in module franky._franky ------------------------


class Exception(builtins.Exception):
    """franka::Exception; the classes below are franka's (or franky's) exceptions of the same names."""


class CommandException(Exception): ...  # noqa: N818 - franky's names, kept


class ControlException(Exception): ...  # noqa: N818


class NetworkException(Exception): ...  # noqa: N818


class RealtimeException(Exception): ...  # noqa: N818


class IncompatibleVersionException(Exception): ...  # noqa: N818 - its fields are not bound; the text carries them


class InvalidMotionTypeException(builtins.Exception): ...  # franky include/franky/robot.hpp moveInternal


for _cls in (Exception, CommandException, ControlException, NetworkException, RealtimeException):
    _cls.__module__ = IncompatibleVersionException.__module__ = InvalidMotionTypeException.__module__ = "franky._franky"


# ---- enums and values ---------------------------------------------------------------------------------------


class RobotMode(enum.Enum):
    """franka::RobotMode as franky binds it (same member names and values)."""

    Other = 0
    Idle = 1
    Move = 2
    Guiding = 3
    Reflex = 4
    UserStopped = 5
    AutomaticErrorRecovery = 6


# libfranka src/robot_state.cpp operator<<(std::ostream&, RobotMode): how a mode is written into messages
MODE_TEXT = {
    RobotMode.Other: "Other",
    RobotMode.Idle: "Idle",
    RobotMode.Move: "Move",
    RobotMode.Guiding: "Guiding",
    RobotMode.Reflex: "Reflex",
    RobotMode.UserStopped: "User stopped",
    RobotMode.AutomaticErrorRecovery: "Automatic error recovery",
}


class RealtimeConfig(enum.Enum):
    Enforce = 0
    Ignore = 1


class ReferenceType(enum.Enum):
    Absolute = 0
    Relative = 1


class Frame(enum.Enum):
    EndEffector = 0


class Errors:
    """franka::Errors: named flags; repr as libfranka src/errors.cpp `operator std::string` writes them.

    Like franky's binding (python/bind_errors.cpp) it defines no __bool__, so the object is always truthy:
    whether any flag is set is `Robot.has_errors`.
    """

    def __init__(self, flags: tuple[str, ...] = ()) -> None:
        self.flags = tuple(flags)

    def __repr__(self) -> str:
        return "[" + ", ".join(f'"{f}"' for f in self.flags) + "]"

    __str__ = __repr__

    def __getattr__(self, name: str) -> bool:
        if name.startswith("_"):
            raise AttributeError(name)
        return name in self.flags


class Affine:
    def __init__(self, translation: Any = (0.0, 0.0, 0.0), quaternion: Any = (0.0, 0.0, 0.0, 1.0)) -> None:
        self.translation = np.asarray(translation, dtype=np.float64).reshape(3).copy()
        self.quaternion = np.asarray(quaternion, dtype=np.float64).reshape(4).copy()


@dataclass
class RobotPose:
    end_effector_pose: Affine


@dataclass
class RobotState:
    """The fields of franky's RobotState the driver reads (python/bind_robot_state.cpp)."""

    O_T_EE: Affine
    q: npt.NDArray[np.float64]
    dq: npt.NDArray[np.float64]
    O_F_ext_hat_K: npt.NDArray[np.float64]
    current_errors: Errors
    last_motion_errors: Errors
    robot_mode: RobotMode


class Model:
    def zero_jacobian(self, frame: Frame, state: RobotState) -> npt.NDArray[np.float64]:
        return np.zeros((6, 7))


# ---- motions: only their targets matter here ----------------------------------------------------------------


class CartesianReference:
    def __init__(self, target: Affine) -> None:
        self.target = target


class _Motion:
    signal = "pose"  # the control signal type; franky refuses a change of type while a motion runs
    runs_on = False  # keeps running until replaced (True) or finishes at its target (False)

    def target(self) -> Affine | None:
        return None


class JointMotion(_Motion):
    signal = "joints"

    def __init__(self, q: Any) -> None:
        self.q = np.asarray(q, dtype=np.float64)

    def target(self) -> Affine:
        return Affine(_READY_XYZ, _READY_QUAT)


class CartesianMotion(_Motion):
    def __init__(self, target: Affine, reference_type: ReferenceType, return_when_finished: bool = True) -> None:
        self._target, self.runs_on = target, not return_when_finished

    def target(self) -> Affine:
        return self._target


class CartesianImpedanceTrackingMotion(_Motion):
    signal = "torques"
    runs_on = True

    def __init__(self, **gains: Any) -> None:
        self.gains = gains
        self.reference: CartesianReference | None = None

    def set_reference(self, reference: CartesianReference) -> None:
        self.reference = reference

    def target(self) -> Affine | None:
        return None if self.reference is None else self.reference.target


class TorqueStopMotion(_Motion):
    signal = "torques"


# ---- the robot's side ---------------------------------------------------------------------------------------


@dataclass
class ControlUnit:
    """The robot's Control unit: its mode, error flags and connect-time checks, which a test drives."""

    server_version: int = LIBRARY_SERVER_VERSION  # what the robot's system image speaks
    realtime_kernel: bool = True  # /sys/kernel/realtime reads 1
    rt_scheduling_permitted: bool = True  # this user may set SCHED_FIFO (limits.conf rtprio)
    mode: RobotMode = RobotMode.Idle
    current_errors: Errors = field(default_factory=Errors)
    last_motion_errors: Errors = field(default_factory=Errors)
    needs_recovery: bool = False  # after a user stop was released (franka_ros issue #308)
    recoveries: int = 0  # automatic error recoveries that ran
    robot: Robot | None = None  # the connected robot

    def reflex(self, *flags: str, success_rate: float = 0.93) -> None:
        """A reflex: the running motion ends with libfranka's text, mode Reflex, the flags set while braking.

        libfranka src/robot_impl.cpp throwOnMotionError -> createControlException: the Move command's
        "motion aborted by reflex!" text, a space, the last motion's errors, then the success-rate line.
        """
        self.mode, self.current_errors = RobotMode.Reflex, Errors(flags)
        self.last_motion_errors = Errors(flags)
        text = (
            f"libfranka: Move command aborted: motion aborted by reflex! {Errors(flags)}\n"
            f"control_command_success_rate: {success_rate}"
        )
        if "communication_constraints_violation" in flags:
            text += " packets lost in a row in the last sample: 12"
        self._abort(ControlException(text))

    def finish_braking(self) -> None:
        """The arm has stopped: current_errors clear, the mode stays Reflex (franka_ros issue #32)."""
        self.current_errors = Errors()

    def press_user_stop(self) -> None:
        """libfranka src/robot_impl.h handleCommandResponse<Move> kEmergencyAborted; mode UserStopped, no flags."""
        self.mode = RobotMode.UserStopped
        self._abort(ControlException("libfranka: Move command aborted: User Stop pressed!"))

    def release_user_stop(self) -> None:
        """Mode Idle again, all flags clear, yet motions are refused until error recovery runs.

        franka_ros issue #308 (FP3: "can't move until we trigger the error recovery") and pull request #279
        (recover when the mode returns to idle after a user stop).
        """
        self.mode, self.needs_recovery = RobotMode.Idle, True

    def _abort(self, exc: builtins.Exception) -> None:
        if self.robot is not None and self.robot.is_in_control:
            self.robot._end_motion(exc)


CONTROL_UNITS: dict[str, ControlUnit] = {}  # host -> the robot served there (tests register theirs)


def _not_possible(command: str, mode: RobotMode) -> str:
    """libfranka src/robot_impl.h commandNotPossibleMsg, after "libfranka: <command>"."""
    text = f'libfranka: {command} command rejected: command not possible in the current mode ("{MODE_TEXT[mode]}")!'
    return text + (" Did you open the brakes?" if mode is RobotMode.Other else "")


class Robot:
    """franky.Robot (franky src/robot.cpp, include/franky/robot.hpp): one motion at a time on a control thread."""

    def __init__(self, fci_hostname: str, realtime_config: RealtimeConfig = RealtimeConfig.Enforce, **_: Any) -> None:
        unit = CONTROL_UNITS.get(fci_hostname)
        if unit is None:
            raise LookupError(f"test set-up: no ControlUnit registered for {fci_hostname!r}")
        # libfranka src/robot_impl.cpp Robot::Impl::Impl: scheduling, then the kernel, then the version handshake
        if realtime_config is RealtimeConfig.Enforce and not unit.rt_scheduling_permitted:
            # src/control_tools.cpp setCurrentThreadToHighestSchedulerPriority, strerror(EPERM)
            raise RealtimeException("libfranka: unable to set realtime scheduling: Operation not permitted")
        if realtime_config is RealtimeConfig.Enforce and not unit.realtime_kernel:
            raise RealtimeException("libfranka: Running kernel does not have realtime capabilities.")
        if unit.server_version != LIBRARY_SERVER_VERSION:  # src/network.h connect -> src/exception.cpp
            raise IncompatibleVersionException(
                f"libfranka: Incompatible library version (server version: {unit.server_version}, library "
                f"version: {LIBRARY_SERVER_VERSION}). Please check https://frankarobotics.github.io for system "
                "updates or choose a libfranka version that uses the server version "
                f"{unit.server_version} from the table at "
                "https://frankarobotics.github.io/docs/libfranka/docs/compatibility_with_images.html ."
            )
        self._unit, unit.robot = unit, self
        self._pose = Affine((0.4, 0.1, 0.3), _READY_QUAT)
        self._motion: _Motion | None = None
        self._control_exception: builtins.Exception | None = None
        self.model = Model()

    # ---- state ----

    @property
    def state(self) -> RobotState:
        unit = self._unit
        mode = RobotMode.Move if self._motion is not None else unit.mode
        return RobotState(
            O_T_EE=self._current_pose(),
            q=np.zeros(7),
            dq=np.zeros(7),
            O_F_ext_hat_K=np.zeros(6),
            current_errors=unit.current_errors,
            last_motion_errors=unit.last_motion_errors,
            robot_mode=mode,
        )

    @property
    def current_pose(self) -> RobotPose:
        return RobotPose(self._current_pose())

    @property
    def has_errors(self) -> bool:
        return bool(self._unit.current_errors.flags)  # franky src/robot.cpp Robot::hasErrors: current_errors only

    @property
    def is_in_control(self) -> bool:
        return self._motion is not None

    def _current_pose(self) -> Affine:
        target = None if self._motion is None else self._motion.target()
        if target is not None:
            self._pose = Affine(target.translation, target.quaternion)  # tracks its reference perfectly
        return Affine(self._pose.translation, self._pose.quaternion)

    # ---- commands ----

    def recover_from_errors(self) -> bool:
        """franky src/robot.cpp recoverFromErrors: automaticErrorRecovery(), then `not has_errors`."""
        unit = self._unit
        if self._motion is not None:
            raise CommandException(_not_possible("Automatic Error Recovery", RobotMode.Move))
        if unit.mode is RobotMode.UserStopped:  # src/robot_impl.h handleCommandResponse<AutomaticErrorRecovery>
            raise CommandException("libfranka: Automatic Error Recovery command aborted: User Stop pressed!")
        unit.mode, unit.current_errors, unit.needs_recovery = RobotMode.Idle, Errors(), False
        unit.recoveries += 1
        return not self.has_errors

    def move(self, motion: _Motion, asynchronous: bool = False) -> None:
        """include/franky/robot.hpp moveInternal: take over a running motion of the same type, or start one."""
        if self._motion is not None:
            if motion.signal != self._motion.signal:
                raise InvalidMotionTypeException(
                    "The type of motion cannot change during runtime. Please ensure that the previous motion "
                    "finished before using a new type of motion."
                )
            self._run(motion)
        else:
            self._rethrow()  # joinMotionUnsafe rethrows what ended the last motion
            unit = self._unit
            if unit.mode is not RobotMode.Idle or unit.needs_recovery:
                # libfranka src/robot_impl.cpp startMotion: the Move response's CommandException becomes a
                # ControlException with the same text, raised on franky's control thread
                self._control_exception = ControlException(_not_possible("Move", unit.mode))
            else:
                self._run(motion)
        if not asynchronous:
            self.join_motion()

    def _run(self, motion: _Motion) -> None:
        self._current_pose()  # where the old motion left the arm
        self._motion = motion
        self._current_pose()
        if not motion.runs_on:
            self._motion = None  # reached its target; the control thread ends without error

    def stop(self) -> None:
        """libfranka Robot::stop (StopMove): the running motion ends as preempted."""
        if self._motion is not None:
            self._end_motion(ControlException("libfranka: Move command preempted!"))

    def _end_motion(self, exc: builtins.Exception) -> None:
        self._current_pose()
        self._motion, self._control_exception = None, exc

    def join_motion(self, timeout: float | None = None) -> bool:
        if self._motion is not None:
            return False  # a motion that runs until replaced does not end within any timeout
        self._rethrow()
        return True

    def poll_motion(self) -> bool:
        return self.join_motion(0.0)

    def _rethrow(self) -> None:
        exc, self._control_exception = self._control_exception, None
        if exc is not None:
            raise exc
