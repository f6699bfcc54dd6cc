"""The `Task` interface: what a robot should do, how well it did, and a scripted expert that does it.

Tasks are arm-independent. They see the arm only through `ArmState` (tool pose in the base frame) and
the world only through `TaskWorld` (object poses and joint positions), and they act only through the
normalised Cartesian action of `ArmRobot` (`[dx, dy, dz, droll, dpitch, dyaw, gripper]`). Orientation
targets use the canonical tool frame (z along the approach direction, x along the finger closing
direction): `TOOL_DOWN` points the tool at the table with the fingers closing along the base x axis,
on any arm whose simulation model follows that contract (see `user.sim.arm_model`).

The base frame of the robot is the world frame of the scene; the table top is the plane z = 0.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import mujoco
import numpy as np
import numpy.typing as npt

from user.config import setting
from user.robots.base import ArmState
from user.robots.safety import SafetyConfig

Vec = npt.NDArray[np.float64]

TOOL_DOWN: Vec = np.array([1.0, 0.0, 0.0, 0.0])  # xyzw: tool z along -z of the base, fingers closing along x


class TaskError(ValueError):
    """A task was configured or used wrongly (unknown task name, bad object name, ...)."""


class TaskWorld(Protocol):
    """What a task may read and set in a simulated world (implemented by `user.sim.world.World`)."""

    def object_pose(self, name: str) -> Vec:
        """(7,) position + xyzw quaternion of a free body, base frame."""
        ...

    def object_velocity(self, name: str) -> Vec:
        """(6,) linear + angular velocity of a free body, base frame."""
        ...

    def set_object_pose(self, name: str, pose: Vec) -> None:
        """Teleport a free body (at reset only), zeroing its velocity."""
        ...

    def joint_position(self, name: str) -> float:
        """Position of a one-DoF joint (m or rad)."""
        ...

    def body_position(self, name: str) -> Vec:
        """(3,) position of a body frame, base frame."""
        ...

    def set_body_position(self, name: str, position: Vec) -> None:
        """Move a fixed (mocap) body (at reset only)."""
        ...

    def tcp_pose(self) -> Vec:
        """(7,) pose of the tool, base frame."""
        ...


@dataclass(frozen=True)
class ActionScale:
    """How far a unit action moves the tool target; must match the robot's `SafetyConfig`."""

    translation_m: float = setting(0.02, "target move per unit of dx/dy/dz, m per step", min=1e-6)
    rotation_rad: float = setting(0.1, "target rotation per unit of droll/dpitch/dyaw, rad per step", min=1e-6)

    @classmethod
    def of(cls, safety: SafetyConfig) -> ActionScale:
        """The scale of an arm whose action limits are `safety` (its target moves for an action of 1)."""
        return cls(safety.max_translation_per_step_m, safety.max_rotation_per_step_rad)


@dataclass(frozen=True)
class ObjectState:
    """A movable object as read from the world."""

    pose: Vec  # (7,) position + xyzw quaternion, base frame
    velocity: Vec  # (6,) linear + angular, base frame


@dataclass(frozen=True)
class TaskState:
    """Everything a task knows about the world at one instant besides the arm."""

    objects: Mapping[str, ObjectState] = field(default_factory=dict)  # free objects by name
    values: Mapping[str, Vec] = field(default_factory=dict)  # task-specific quantities (goal positions, ...)


@dataclass(frozen=True)
class TaskStart:
    """Where the arm starts an episode."""

    tcp_pose: Vec  # (7,) tool pose, base frame
    gripper: float  # opening, 0 closed .. 1 open
    grasp_width: float | None = None  # width (m) of the object held between the fingers at start, if any
    layout: Mapping[str, Vec] = field(default_factory=dict)  # task-specific episode layout (fixture positions, ...)


@dataclass(frozen=True)
class ExpertPath:
    """Where the scripted expert takes the tool: the point it steers (`point`, the tool centre or what the tool
    holds) and the waypoints that point passes through from the start to the end of the task, in order (base
    frame, m). A corrector measures how far `point` strayed from the line through them (`user.tasks.corrector`)."""

    point: Vec  # (3,) the steered point now
    waypoints: Vec  # (N, 3), N >= 1: the expert's path ahead of the episode's start, in order


class Task(ABC):
    """One manipulation task. Subclasses are small: scene objects, start, reward, success, expert."""

    name: str = ""  # registry name, e.g. "peg_insertion"
    max_steps: int = 100  # episode length limit at the robot's control rate

    def __init__(self, scale: ActionScale | None = None) -> None:
        self.scale = scale or ActionScale()

    @abstractmethod
    def build(self, world: mujoco.MjsBody) -> None:
        """Add the task's bodies to the scene (on the table top, z >= 0). Names must start with the task's prefix."""

    @abstractmethod
    def sample_start(self, rng: np.random.Generator) -> TaskStart:
        """Everything random about one episode, drawn from `rng`: the arm's start and the task's layout."""

    @abstractmethod
    def place(self, world: TaskWorld, start: TaskStart) -> None:
        """Put the objects where `start` says (called once the arm is at its start pose)."""

    @abstractmethod
    def read(self, world: TaskWorld) -> TaskState:
        """The task's view of the world now."""

    @abstractmethod
    def reward(self, arm: ArmState, state: TaskState) -> float:
        """Dense reward for being in this state."""

    @abstractmethod
    def success(self, arm: ArmState, state: TaskState) -> bool:
        """Whether the task is done."""

    def failure(self, arm: ArmState, state: TaskState) -> bool:
        """Whether the episode is lost for good (ends it early); never, unless a task says so."""
        del arm, state
        return False

    def success_region(self, state: TaskState) -> tuple[Vec, Vec] | None:
        """Where success is reached, as a box (centre, half extents; base frame) to draw, or None when the
        task's success is not a place (a button press, a grasp)."""
        del state
        return None

    @abstractmethod
    def observation_extras(self, state: TaskState) -> dict[str, npt.NDArray[np.float32]]:
        """Task inputs a policy may see besides the arm state and cameras (e.g. a one-hot goal)."""

    @abstractmethod
    def scripted_expert(self, arm: ArmState, state: TaskState) -> npt.NDArray[np.float32]:
        """A normalised action that makes progress (stateless: decided from the current state only)."""

    def expert_path(self, arm: ArmState, state: TaskState) -> ExpertPath:
        """The path the scripted expert takes in this episode (for a scripted corrector); a task without one says so."""
        del arm, state
        raise TaskError(f"task {self.name!r} has no expert path: a scripted corrector cannot watch it")
