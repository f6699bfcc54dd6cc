"""The `Robot` interface every driver implements (ROS-free).

A robot is connected, reset and stepped by its robot node; `step` returns what was actually applied
after the shared safety processing, so the transition stored for learning is the truth, not the wish.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np


class RobotError(RuntimeError):
    """A robot could not do what was asked (connection lost, controller fault, ...)."""


class NotConnectedError(RobotError):
    """The robot was used before `connect()` or after `close()`."""


@dataclass(frozen=True)
class ActionSpace:
    """A box of continuous actions; policies act in [-1, 1] and the driver scales."""

    low: np.ndarray  # float32, one entry per action dimension
    high: np.ndarray  # float32, same shape as `low`
    names: tuple[str, ...] = ()  # e.g. ("dx", "dy", "dz", "droll", "dpitch", "dyaw", "gripper")

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.low.shape)

    def contains(self, action: np.ndarray) -> bool:
        return action.shape == self.low.shape and bool(np.all(action >= self.low) and np.all(action <= self.high))


@dataclass(frozen=True)
class RobotDescriptor:
    """What a robot is, as announced to the hardware registry."""

    robot_id: str  # unique in the deployment, e.g. "franka_left"
    model: str  # e.g. "franka_panda_sim", "franka_fr3", "arx_l5", "gym:Pendulum-v1"
    dof: int  # arm joints (without the gripper) or action dimension for gym robots
    control_rate_hz: float  # rate at which `step` is meant to be called
    embodiment_id: int = 0  # shared by all robots of one arm type; part of every observation
    cameras: tuple[str, ...] = ()  # names of the cameras attached to it
    site: str = "local"  # where it is, e.g. "lab_a"


@dataclass(frozen=True)
class ArmState:
    """Proprioceptive state at one instant (all in the robot base frame, SI units)."""

    stamp_ns: int  # when it was read (robot clock, nanoseconds)
    tcp_pose: np.ndarray  # (7,) position xyz + orientation quaternion xyzw
    tcp_velocity: np.ndarray  # (6,) linear xyz + angular xyz
    joint_positions: np.ndarray  # (dof,)
    joint_velocities: np.ndarray  # (dof,)
    gripper: float  # normalised opening, 0 closed .. 1 open
    wrench: np.ndarray | None = None  # (6,) force xyz + torque xyz at the TCP, where measured

    def vector(self) -> np.ndarray:
        """Flat float32 state for policies: tcp pose, tcp velocity, gripper (and wrench when present)."""
        parts = [self.tcp_pose, self.tcp_velocity, np.array([self.gripper])]
        if self.wrench is not None:
            parts.append(self.wrench)
        return np.concatenate(parts).astype(np.float32)


@dataclass(frozen=True)
class StepResult:
    """What `Robot.step` did."""

    applied: np.ndarray  # the action actually applied, after safety processing (same space as requested)
    state: ArmState  # state after the step
    held: bool = False  # True when the robot held its pose instead (bad or stale input, e-stop)
    clipped: bool = False  # True when safety changed the requested action
    reasons: tuple[str, ...] = field(default=())  # why it held or clipped, for logs and the operator


class Robot(ABC):
    """A controllable robot. Drivers subclass it; the robot node drives it.

    A driver sets `descriptor` and `_action_space` when it is made and keeps `_connected` up to date in
    `connect` and `close`."""

    descriptor: RobotDescriptor
    _action_space: ActionSpace
    _connected: bool = False

    @property
    def action_space(self) -> ActionSpace:
        return self._action_space

    @property
    def connected(self) -> bool:
        return self._connected

    @abstractmethod
    def connect(self) -> None:
        """Open the device (or load the simulation). Idempotent."""

    @abstractmethod
    def close(self) -> None:
        """Release the device. Idempotent."""

    @abstractmethod
    def reset(self, seed: int | None = None) -> ArmState:
        """Bring the robot to a (possibly randomised) start and return its state."""

    @abstractmethod
    def step(self, action: np.ndarray) -> StepResult:
        """Apply one action through the safety layer; never raises for bad action values (it holds)."""

    @abstractmethod
    def hold(self, reason: str) -> StepResult:
        """Keep the current pose for one control period (watchdog, e-stop)."""

    @abstractmethod
    def state(self) -> ArmState:
        """The latest state."""

    def require_connected(self) -> None:
        if not self.connected:
            raise NotConnectedError(f"robot {self.descriptor.robot_id!r} is not connected; call connect() first")
