"""`ArmRobot`: `step`/`hold`/e-stop written once for every Cartesian arm; drivers supply six small hooks.

A driver (MuJoCo sim, Franka, ARX) implements:

- `_connect()` / `_close()`: open and release the device or simulation;
- `_reset(seed) -> ArmState`: move to a (possibly randomised) start pose and return the state there;
- `_read_state() -> ArmState`: the latest measured state;
- `_command(target_pose, gripper)`: send a Cartesian set-point without blocking (xyz + xyzw, base frame);
- `_wait_period()`: pace one control period (real time on hardware, free-running or real time in sim),
  always with a deadline.

`ArmRobot` keeps the *commanded* target: deltas accumulate on the last target, not on the noisy measured
pose, and `hold` re-sends that target. Every action goes through the `SafetyFilter`. `estop(reason)`
latches: every `step` holds and `reset` refuses until `clear_estop()`. `estop` may be called from another
thread; it takes effect at the next `step` or `hold`.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from user.robots.base import ActionSpace, ArmState, Robot, RobotDescriptor, RobotError, StepResult
from user.robots.safety import ACTION_DIM, ACTION_NAMES, SafetyConfig, SafetyFilter

T = TypeVar("T")


class EStopError(RobotError):
    """The e-stop is latched: the robot will not move until `clear_estop()` is called."""


class ArmRobot(Robot):
    """Abstract Cartesian arm with a 7-D normalised action `[dx, dy, dz, droll, dpitch, dyaw, gripper]`."""

    def __init__(self, descriptor: RobotDescriptor, safety: SafetyConfig) -> None:
        self.descriptor = descriptor
        self._filter = SafetyFilter(safety)
        self._action_space = ActionSpace(
            low=-np.ones(ACTION_DIM, np.float32), high=np.ones(ACTION_DIM, np.float32), names=ACTION_NAMES
        )
        self._connected = False
        self._target: npt.NDArray[np.float64] | None = None
        self._gripper_target = 0.0
        self._estop_reason: str | None = None
        self._holding = False
        self._log = logging.getLogger(f"{__name__}.{descriptor.robot_id}")

    # ---- driver hooks -------------------------------------------------------------------------------

    @abstractmethod
    def _connect(self) -> None:
        """Open the device or load the simulation."""

    @abstractmethod
    def _close(self) -> None:
        """Release the device."""

    @abstractmethod
    def _reset(self, seed: int | None) -> ArmState:
        """Move to a start pose (randomised from `seed` where the driver supports it); return the state."""

    @abstractmethod
    def _read_state(self) -> ArmState:
        """The latest measured state."""

    @abstractmethod
    def _command(self, target_pose: npt.NDArray[np.float64], gripper: float) -> None:
        """Send a set-point without blocking: TCP pose (7,) xyz + xyzw in the base frame, gripper 0..1."""

    @abstractmethod
    def _wait_period(self) -> None:
        """Let one control period pass (bounded by a deadline)."""

    # ---- Robot interface ----------------------------------------------------------------------------

    @property
    def safety(self) -> SafetyFilter:
        return self._filter

    @property
    def target_pose(self) -> npt.NDArray[np.float64] | None:
        """The last commanded TCP target (a copy), or None before the first reset/step."""
        return None if self._target is None else self._target.copy()

    @property
    def gripper_target(self) -> float:
        return self._gripper_target

    @property
    def estopped(self) -> bool:
        return self._estop_reason is not None

    @property
    def estop_reason(self) -> str | None:
        return self._estop_reason

    def connect(self) -> None:
        if self._connected:
            return
        self._connect()
        self._connected = True
        self._log.info("connected (%s)", self.descriptor.model)

    def close(self) -> None:
        if not self._connected:
            return
        try:
            self._close()
        finally:
            self._connected = False
            self._target = None
            self._log.info("closed")

    def reset(self, seed: int | None = None) -> ArmState:
        self.require_connected()
        if self._estop_reason is not None:
            raise EStopError(
                f"robot {self.descriptor.robot_id!r} is e-stopped ({self._estop_reason}); clear_estop() before reset()"
            )
        state = self._reset(seed)
        target = self._guarded("taking the start pose", lambda: self._sync_target(state))
        if not self._filter.in_workspace(target):
            self._log.warning(
                "start pose %s is outside the workspace box; actions can only move it inside",
                np.round(target[:3], 4).tolist(),
            )
        self._holding = False
        return state

    def step(self, action: np.ndarray) -> StepResult:
        self.require_connected()
        if self._estop_reason is not None:
            return self._hold((f"e-stop latched: {self._estop_reason}",))
        target, gripper = self._ensure_target()
        cmd = self._filter.filter(target, action, gripper)
        if cmd.held:
            return self._hold(cmd.reasons)
        if self._holding:
            self._log.info("moving again after holding")
            self._holding = False
        if cmd.clipped:
            self._log.debug("action limited: %s", "; ".join(cmd.reasons))
        self._target, self._gripper_target = cmd.target_pose, cmd.gripper
        self._guarded("sending the target", lambda: self._command(cmd.target_pose, cmd.gripper))
        state = self._guarded("waiting for the control period", self._period_state)
        return StepResult(applied=cmd.applied, state=state, clipped=cmd.clipped, reasons=cmd.reasons)

    def hold(self, reason: str) -> StepResult:
        self.require_connected()
        if self._estop_reason is not None:
            return self._hold((reason, f"e-stop latched: {self._estop_reason}"))
        return self._hold((reason,))

    def state(self) -> ArmState:
        self.require_connected()
        return self._read_state()

    # ---- e-stop -------------------------------------------------------------------------------------

    def estop(self, reason: str) -> None:
        """Latch the e-stop: from now on every step holds the last target until `clear_estop()`."""
        if self._estop_reason is None:
            self._estop_reason = reason
            self._log.error("E-STOP: %s (holding until clear_estop())", reason)
        else:
            self._log.error("E-STOP again: %s (already latched: %s)", reason, self._estop_reason)

    def clear_estop(self) -> None:
        """Release the e-stop. The target re-syncs to the measured pose so the arm does not jump back."""
        if self._estop_reason is None:
            return
        if self._connected:
            self._sync_target(self._read_state())
        else:
            self._target = None
        self._log.warning("e-stop cleared (was: %s)", self._estop_reason)
        self._estop_reason = None

    # ---- internals ----------------------------------------------------------------------------------

    def _hold(self, reasons: tuple[str, ...]) -> StepResult:
        if not self._holding:
            self._log.warning("holding: %s", "; ".join(reasons))
            self._holding = True
        else:
            self._log.debug("holding: %s", "; ".join(reasons))
        target, gripper = self._ensure_target()
        self._guarded("re-sending the hold target", lambda: self._command(target, gripper))
        state = self._guarded("waiting for the control period", self._period_state)
        return StepResult(applied=np.zeros(ACTION_DIM, np.float32), state=state, held=True, reasons=reasons)

    def _period_state(self) -> ArmState:
        self._wait_period()
        return self._read_state()

    def _ensure_target(self) -> tuple[npt.NDArray[np.float64], float]:
        target = self._target
        if target is None:
            target = self._guarded("reading the state", lambda: self._sync_target(self._read_state()))
        return target, self._gripper_target

    def _sync_target(self, state: ArmState) -> npt.NDArray[np.float64]:
        """Take the measured pose and gripper as the commanded target (after reset or an e-stop)."""
        pose = np.asarray(state.tcp_pose, dtype=np.float64)
        if pose.shape != (7,) or not np.all(np.isfinite(pose)) or np.linalg.norm(pose[3:]) < 1e-9:
            raise RobotError(
                f"robot {self.descriptor.robot_id!r} reports an invalid TCP pose {pose.tolist()}; "
                "refusing to command it"
            )
        if not np.isfinite(state.gripper):
            raise RobotError(f"robot {self.descriptor.robot_id!r} reports an invalid gripper opening {state.gripper}")
        self._target = np.concatenate([pose[:3], pose[3:] / np.linalg.norm(pose[3:])])
        self._gripper_target = min(max(float(state.gripper), 0.0), 1.0)
        return self._target

    def _guarded(self, what: str, fn: Callable[[], T]) -> T:
        """Run a driver call; any failure latches the e-stop (the arm's state is unknown) and re-raises."""
        try:
            return fn()
        except Exception as exc:
            self.estop(f"{what} failed: {type(exc).__name__}: {exc}")
            raise
