"""Pick and place: move a cube from one tray to the other.

Each episode draws which tray holds the cube, the trays' x positions, the cube's place and yaw in its
tray, and the arm's start above the table. Reward: the shaped cost -tanh(d / reward_scale) (in (-1, 0]), d =
distance from the cube to the centre of the target tray's floor (cube resting): a cost, as peg insertion's, so that
ending the episode by succeeding is always best (a positive reward pays a policy to linger near the goal).
Success: the cube rests inside the target tray and is not held.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
import numpy.typing as npt

from user.config import setting
from user.robots.base import ArmState
from user.tasks import expert, props
from user.tasks.base import TOOL_DOWN, ActionScale, ExpertPath, ObjectState, Task, TaskStart, TaskState, TaskWorld

Vec = npt.NDArray[np.float64]
CUBE = "pp_cube"
TRAYS = ("pp_tray_a", "pp_tray_b")
WALL = 0.008  # tray wall and floor thickness, m
GRIPPER_EMPTY = 0.02  # gripper readings (0 closed .. 1 open) below this: closed on nothing
GRIPPER_OPENISH = 0.8  # readings above this: open, or only starting to close


@dataclass(frozen=True)
class PickPlaceConfig:
    """Geometry and randomisation of the pick-and-place task."""

    cube_side: float = setting(0.04, "side of the cube, m", min=0.01, max=0.06)
    cube_mass: float = setting(0.1, "mass of the cube, kg", min=0.001)
    tray_inner_half: float = setting(0.09, "half the inner side of a square tray, m", min=0.03)
    tray_height: float = setting(0.03, "height of the tray walls, m", min=0.01)
    tray_y: float = setting(0.18, "trays sit at y = -tray_y and +tray_y, m", min=0.08)
    tray_x: tuple[float, float] = setting((0.48, 0.6), "range of each tray centre's x, m")
    cube_offset: float = setting(0.025, "cube start: +- this (m) around its tray's centre in x and y", min=0.0)
    cube_yaw: float = setting(0.5, "cube start yaw: uniform in +- this, rad", min=0.0, max=0.785)
    start_region: tuple[tuple[float, float], tuple[float, float], tuple[float, float]] = setting(
        ((0.42, 0.55), (-0.08, 0.08), (0.22, 0.3)), "tool start box: (x, y, z) ranges, m"
    )
    reward_scale: float = setting(0.1, "distance (m) at which the cost reaches -tanh(1)", min=1e-4)
    max_steps: int = setting(120, "episode length limit, steps", min=1)


class PickPlace(Task):
    """Move the cube into the other tray."""

    name = "pick_place"

    def __init__(self, config: PickPlaceConfig | None = None, scale: ActionScale | None = None) -> None:
        super().__init__(scale)
        self.config = config or PickPlaceConfig()
        self.max_steps = self.config.max_steps

    def build(self, world: mujoco.MjsBody) -> None:
        c = self.config
        for name, rgba in zip(TRAYS, ((0.3, 0.5, 0.8, 1.0), (0.35, 0.7, 0.35, 1.0)), strict=True):
            props.add_tray(world, name, inner_half=c.tray_inner_half, wall=WALL, height=c.tray_height, rgba=rgba)
        half = c.cube_side / 2
        props.add_free_box(
            world,
            CUBE,
            half=(half, half, half),
            mass=c.cube_mass,
            rgba=(0.85, 0.15, 0.15, 1.0),
            friction=(1.2, 0.01, 0.0001),
        )

    def sample_start(self, rng: np.random.Generator) -> TaskStart:
        c = self.config
        source = int(rng.integers(2))
        trays = {
            name: np.array([rng.uniform(*c.tray_x), (-1.0 if i == 0 else 1.0) * c.tray_y, 0.0])
            for i, name in enumerate(TRAYS)
        }
        cube_xy = trays[TRAYS[source]][:2] + rng.uniform(-c.cube_offset, c.cube_offset, 2)
        cube = np.array([cube_xy[0], cube_xy[1], WALL + c.cube_side / 2, rng.uniform(-c.cube_yaw, c.cube_yaw)])
        lo, hi = np.array(c.start_region).T
        tool = np.concatenate([rng.uniform(lo, hi), TOOL_DOWN])
        layout = {**trays, CUBE: cube, "target": trays[TRAYS[1 - source]]}
        return TaskStart(tool, gripper=1.0, layout=layout)

    def place(self, world: TaskWorld, start: TaskStart) -> None:
        for name in TRAYS:
            world.set_body_position(name, start.layout[name])
        x, y, z, yaw = start.layout[CUBE]
        quat = expert.yaw_about_z(float(yaw), np.array([0.0, 0.0, 0.0, 1.0]))
        world.set_object_pose(CUBE, np.concatenate([[x, y, z], quat]))
        self._target = str(TRAYS[0] if np.allclose(start.layout["target"], start.layout[TRAYS[0]]) else TRAYS[1])

    def read(self, world: TaskWorld) -> TaskState:
        pose = world.object_pose(CUBE)
        target = world.body_position(self._target) + np.array([0.0, 0.0, WALL + self.config.cube_side / 2])
        return TaskState(objects={CUBE: ObjectState(pose, world.object_velocity(CUBE))}, values={"target": target})

    def reward(self, arm: ArmState, state: TaskState) -> float:
        del arm
        d = float(np.linalg.norm(state.objects[CUBE].pose[:3] - np.asarray(state.values["target"])))
        return -float(np.tanh(d / self.config.reward_scale))

    def _in_target(self, state: TaskState) -> bool:
        cube, target = state.objects[CUBE].pose[:3], np.asarray(state.values["target"])
        inside = bool(np.all(np.abs(cube[:2] - target[:2]) < self.config.tray_inner_half))
        return inside and float(cube[2]) < float(target[2]) + 0.01

    def _held(self, arm: ArmState, state: TaskState) -> bool:
        """The cube is between the fingers and they are closing or closed on it (not empty, not wide open)."""
        near = float(np.linalg.norm(state.objects[CUBE].pose[:3] - arm.tcp_pose[:3])) < self.config.cube_side * 0.4
        return near and GRIPPER_EMPTY < arm.gripper < GRIPPER_OPENISH

    def success(self, arm: ArmState, state: TaskState) -> bool:
        resting = float(np.linalg.norm(state.objects[CUBE].velocity[:3])) < 0.05
        return self._in_target(state) and resting and not self._held(arm, state)

    def observation_extras(self, state: TaskState) -> dict[str, npt.NDArray[np.float32]]:
        return {
            "object_position": state.objects[CUBE].pose[:3].astype(np.float32),
            "target_position": np.asarray(state.values["target"], dtype=np.float32),
        }

    def expert_path(self, arm: ArmState, state: TaskState) -> ExpertPath:
        """The tool centre: over the cube, down to it, back up with it, over the target tray, down into it."""
        cube = np.asarray(state.objects[CUBE].pose[:3], dtype=np.float64)
        target = np.asarray(state.values["target"], dtype=np.float64)
        safe_z = self._safe_z()
        points = [
            [cube[0], cube[1], safe_z],
            cube,
            [cube[0], cube[1], safe_z + 0.02],
            [target[0], target[1], safe_z + 0.02],
            [target[0], target[1], float(target[2]) + 0.01],
        ]
        return ExpertPath(np.asarray(arm.tcp_pose[:3], dtype=np.float64), np.array(points, dtype=np.float64))

    def _safe_z(self) -> float:
        """Height (m) the tool travels at above the trays."""
        return WALL + self.config.tray_height + self.config.cube_side + 0.04

    def scripted_expert(self, arm: ArmState, state: TaskState) -> npt.NDArray[np.float32]:
        """Above the cube, down, close, lift, over the target tray, down, open, up."""
        c = self.config
        tcp = arm.tcp_pose[:3]
        cube_pose = state.objects[CUBE].pose
        cube, target = cube_pose[:3], np.asarray(state.values["target"])
        safe_z = self._safe_z()
        if self._held(arm, state):
            return self._carry(arm, tcp, target, safe_z)
        if self._in_target(state):  # released: retreat upward
            return expert.servo(arm, np.array([tcp[0], tcp[1], safe_z + 0.05]), TOOL_DOWN, expert.OPEN, self.scale)
        quat = expert.yaw_about_z(expert.square_yaw(cube_pose[3:]), TOOL_DOWN)
        off = float(np.linalg.norm(cube[:2] - tcp[:2]))
        if off > 0.006:
            z = safe_z if tcp[2] > cube[2] + 0.02 or off > 0.02 else tcp[2]
            if tcp[2] < cube[2] + c.cube_side and off > 0.02:
                return expert.servo(arm, np.array([tcp[0], tcp[1], safe_z]), quat, expert.OPEN, self.scale)
            return expert.servo(arm, np.array([cube[0], cube[1], z]), quat, expert.OPEN, self.scale)
        if tcp[2] > cube[2] + 0.004:  # keep closing once started; reopen after closing on nothing
            closing = GRIPPER_EMPTY < arm.gripper < GRIPPER_OPENISH
            return expert.servo(arm, cube, quat, expert.CLOSE if closing else expert.OPEN, self.scale)
        return expert.servo(arm, cube, quat, expert.CLOSE, self.scale)

    def _carry(self, arm: ArmState, tcp: Vec, target: Vec, safe_z: float) -> npt.NDArray[np.float32]:
        off = float(np.linalg.norm(target[:2] - tcp[:2]))
        if off > 0.02:
            over = tcp if tcp[2] < safe_z - 0.02 else target  # lift straight up first, then across
            return expert.servo(arm, np.array([over[0], over[1], safe_z + 0.02]), TOOL_DOWN, expert.CLOSE, self.scale)
        release_z = float(target[2]) + 0.01
        grip = expert.OPEN if tcp[2] < release_z + 0.01 else expert.CLOSE
        return expert.servo(arm, np.array([target[0], target[1], release_z]), TOOL_DOWN, grip, self.scale)
