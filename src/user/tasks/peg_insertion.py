"""Peg insertion: a square peg, held in the gripper from the start, goes into a square hole with tight clearance.

The hole has 0.5 mm of clearance per side and a 4 mm 45-degree bevel at its rim, as machined and printed
fixtures have; with the arm's impedance control (compliance) the bevel guides a peg that arrives a few
millimetres or a few hundredths of a radian off into the hole, while a peg that misses the bevel stops on
the rim. The hole's fixture is placed at random on the table each episode and the arm starts at a random pose
above it with a random yaw. Reward: the shaped cost -tanh(d / reward_scale) (in (-1, 0]) with d the distance
from the peg tip to the bottom of the goal depth. Success: the peg tip is inside the hole, at least
`success_depth` down; it ends the episode.

The reward is a cost on purpose: success ends the episode, so a positive per-step reward (the former
1 - tanh(d / scale)) pays more for hovering next to the hole than for finishing (with gamma 0.96, 25 steps
at 0.9 beat ending now); with a reward <= 0 finishing early is always best.

Observation extras: `tool_to_hole`, the hole's top centre minus the tool position (base frame) times
`observation_scale` (1 unit = 2 cm by default), which a real cell computes from the arm's forward kinematics
and a calibrated fixture position.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
import numpy.typing as npt

from user.config import setting
from user.robots import rotations
from user.robots.base import ArmState
from user.tasks import expert, props
from user.tasks.base import TOOL_DOWN, ActionScale, ExpertPath, ObjectState, Task, TaskStart, TaskState, TaskWorld

Vec = npt.NDArray[np.float64]
PEG = "peg"
FIXTURE = "peg_hole"
LINE_UP_HEIGHT = 0.008  # m above the hole's rim where the expert lines the peg tip up before descending


@dataclass(frozen=True)
class PegInsertionConfig:
    """Geometry and randomisation of the peg-insertion task."""

    peg_side: float = setting(0.02, "side of the square peg, m", min=0.005, max=0.06)
    peg_length: float = setting(0.08, "length of the peg, m", min=0.03, max=0.2)
    peg_mass: float = setting(0.05, "mass of the peg, kg", min=0.001)
    grip_offset: float = setting(0.02, "distance from the peg's top end to the tool centre, m", min=0.005)
    clearance: float = setting(0.0005, "gap between peg and hole on each side, m", min=0.0, max=0.01)
    fixture_height: float = setting(0.08, "height of the hole's top above the table, m", min=0.03, max=0.3)
    hole_depth: float = setting(0.045, "depth of the hole, m", min=0.01)
    chamfer: float = setting(0.004, "45 degree bevel at the hole's rim, m (0 = a sharp edge)", min=0.0, max=0.02)
    fixture_friction: float = setting(0.3, "sliding friction of the peg on the fixture (bevel and walls)", min=0.0)
    success_depth: float = setting(0.03, "how far the peg tip must be below the hole's top, m", min=0.001)
    hole_x: tuple[float, float] = setting((0.48, 0.62), "range of the hole centre's x, m")
    hole_y: tuple[float, float] = setting((-0.12, 0.12), "range of the hole centre's y, m")
    start_offset: tuple[float, float, float] = setting(
        (0.08, 0.08, 0.06), "tool start: +- this (x, y, z, m) around a point 0.15 m above the hole top"
    )
    start_yaw: float = setting(0.15, "tool start yaw: uniform in +- this, rad", min=0.0, max=0.7)
    contact_solref: tuple[float, float] = setting(
        (0.004, 1.0), "MuJoCo solref (time constant s, damping ratio) of the peg and fixture contacts: stiff"
    )
    contact_solimp: tuple[float, float, float] = setting(
        (0.99, 0.999, 0.001), "MuJoCo solimp (dmin, dmax, width m) of the peg and fixture contacts"
    )
    reward_scale: float = setting(0.05, "distance (m) at which the cost reaches -tanh(1)", min=1e-4)
    observation_scale: float = setting(50.0, "tool_to_hole extra = (hole top - tool position) * this", min=1e-6)
    max_steps: int = setting(100, "episode length limit, steps", min=1)


class PegInsertion(Task):
    """Insert the grasped peg into the hole."""

    name = "peg_insertion"

    def __init__(self, config: PegInsertionConfig | None = None, scale: ActionScale | None = None) -> None:
        super().__init__(scale)
        self.config = config or PegInsertionConfig()
        self.max_steps = self.config.max_steps
        if self.config.success_depth >= self.config.hole_depth:
            raise ValueError("success_depth must be less than hole_depth")

    def build(self, world: mujoco.MjsBody) -> None:
        c = self.config
        half = c.peg_side / 2
        props.add_square_hole(
            world,
            FIXTURE,
            hole_half=half + c.clearance,
            outer_half=half + 0.03,
            height=c.fixture_height,
            depth=c.hole_depth,
            rgba=(0.2, 0.35, 0.75, 1.0),
            chamfer=c.chamfer,
        )
        peg = props.add_free_box(
            world,
            PEG,
            half=(half, half, c.peg_length / 2),
            mass=c.peg_mass,
            rgba=(0.95, 0.55, 0.1, 1.0),
            friction=(1.5, 0.02, 0.0002),
        )
        # MuJoCo's default contacts are soft enough for a pushed peg to sink 10-20 mm into the fixture and
        # "succeed" through the wall; stiff contacts keep penetration well below the clearance.
        for body in (peg, world.find_child(FIXTURE)):
            for geom in body.geoms:
                geom.solref = list(c.contact_solref)
                geom.solimp = [*c.contact_solimp, 0.5, 2.0]
        # The peg's own friction is high so the fingers hold it; on the fixture the fixture's friction rules
        # (a higher-priority geom's friction is used as is), so the peg slides down the bevel into the hole.
        for geom in world.find_child(FIXTURE).geoms:
            geom.priority = 1
            geom.friction = [c.fixture_friction, 0.005, 0.0001]

    def sample_start(self, rng: np.random.Generator) -> TaskStart:
        c = self.config
        hole = np.array([rng.uniform(*c.hole_x), rng.uniform(*c.hole_y), 0.0])
        centre = hole + np.array([0.0, 0.0, c.fixture_height + 0.15])
        position = centre + rng.uniform(-1.0, 1.0, 3) * np.array(c.start_offset)
        quat = expert.yaw_about_z(float(rng.uniform(-c.start_yaw, c.start_yaw)), TOOL_DOWN)
        return TaskStart(np.concatenate([position, quat]), gripper=0.0, grasp_width=c.peg_side, layout={FIXTURE: hole})

    def place(self, world: TaskWorld, start: TaskStart) -> None:
        world.set_body_position(FIXTURE, start.layout[FIXTURE])
        tcp = world.tcp_pose()
        along = self.config.peg_length / 2 - self.config.grip_offset  # peg centre, along the tool's approach axis
        centre = tcp[:3] + rotations.rotate(tcp[3:], np.array([0.0, 0.0, along]))
        world.set_object_pose(PEG, np.concatenate([centre, tcp[3:]]))

    def read(self, world: TaskWorld) -> TaskState:
        pose = world.object_pose(PEG)
        hole = world.body_position(FIXTURE) + np.array([0.0, 0.0, self.config.fixture_height])
        return TaskState(
            objects={PEG: ObjectState(pose, world.object_velocity(PEG))},
            values={"hole_top": hole, "peg_tip": self._tip(pose), "tool_to_hole": hole - world.tcp_pose()[:3]},
        )

    def _tip(self, pose: Vec) -> Vec:
        """The lower end of the peg's axis."""
        axis = rotations.rotate(pose[3:], np.array([0.0, 0.0, self.config.peg_length / 2]))
        ends = (pose[:3] + axis, pose[:3] - axis)
        lower: Vec = ends[0] if ends[0][2] <= ends[1][2] else ends[1]
        return lower

    def _goal(self, state: TaskState) -> Vec:
        goal: Vec = np.asarray(state.values["hole_top"], dtype=np.float64) - [0.0, 0.0, self.config.success_depth]
        return goal

    def reward(self, arm: ArmState, state: TaskState) -> float:
        del arm
        """-tanh(d / reward_scale) <= 0: a cost, so that ending the episode by succeeding is always best."""
        d = float(np.linalg.norm(np.asarray(state.values["peg_tip"]) - self._goal(state)))
        return -float(np.tanh(d / self.config.reward_scale))

    def success(self, arm: ArmState, state: TaskState) -> bool:
        del arm
        tip, hole = np.asarray(state.values["peg_tip"]), np.asarray(state.values["hole_top"])
        inside = bool(np.all(np.abs(tip[:2] - hole[:2]) <= self.config.peg_side / 2 + self.config.clearance))
        return inside and float(tip[2]) <= float(hole[2]) - self.config.success_depth

    def success_region(self, state: TaskState) -> tuple[Vec, Vec]:
        """The peg tip's success box: within the hole's side (plus clearance) in x and y, `success_depth` below
        the rim or deeper (drawn 1 cm deep)."""
        hole = np.asarray(state.values["hole_top"], dtype=np.float64)
        half_side = self.config.peg_side / 2 + self.config.clearance
        top = hole[2] - self.config.success_depth
        return np.array([hole[0], hole[1], top - 0.005]), np.array([half_side, half_side, 0.005])

    def observation_extras(self, state: TaskState) -> dict[str, npt.NDArray[np.float32]]:
        offset = np.asarray(state.values["tool_to_hole"]) * self.config.observation_scale
        return {"tool_to_hole": offset.astype(np.float32)}

    def expert_path(self, arm: ArmState, state: TaskState) -> ExpertPath:
        """The peg tip: lined up just over the hole, then straight down past the success depth."""
        del arm
        hole = np.asarray(state.values["hole_top"], dtype=np.float64)
        over = hole + np.array([0.0, 0.0, LINE_UP_HEIGHT])
        inside = hole - np.array([0.0, 0.0, self.config.success_depth + 0.01])
        return ExpertPath(np.asarray(state.values["peg_tip"], dtype=np.float64), np.stack([over, inside]))

    def scripted_expert(self, arm: ArmState, state: TaskState) -> npt.NDArray[np.float32]:
        """Align the peg tip over the hole at a safe height, then descend straight in, correcting x/y and yaw."""
        c = self.config
        tip, hole = np.asarray(state.values["peg_tip"]), np.asarray(state.values["hole_top"])
        peg_yaw = expert.square_yaw(state.objects[PEG].pose[3:])
        tcp = arm.tcp_pose[:3]
        quat = expert.yaw_about_z(-peg_yaw, arm.tcp_pose[3:])  # turn the peg square to the hole
        quat = rotations.apply_rotvec(quat, _tilt_correction(arm.tcp_pose[3:]))
        xy_err = hole[:2] - tip[:2]
        off = float(np.max(np.abs(xy_err)))
        top = float(hole[2])
        tip_z = float(tip[2])
        if tip_z < top - 0.001 and off < c.peg_side / 2 + c.clearance:  # in the hole: push on down
            goal_tip_z, speed = top - c.success_depth - 0.01, 0.3
        elif tip_z < top + 0.004:  # at the rim: slide in when nearly aligned, else back off
            goal_tip_z, speed = (top - 0.005, 0.15) if off < c.clearance else (top + 0.015, 0.5)
        elif off < 0.4 * c.clearance and abs(peg_yaw) < 0.015:  # aligned above the hole: descend
            goal_tip_z, speed = top - 0.01, 0.25
        else:  # line up above the hole
            goal_tip_z, speed = top + LINE_UP_HEIGHT, (1.0 if off > 0.01 else 0.3)
        goal = tcp + np.array([xy_err[0], xy_err[1], goal_tip_z - float(tip[2])])
        return expert.servo(arm, goal, quat, expert.CLOSE, self.scale, max_speed=speed)


def _tilt_correction(quat: Vec) -> Vec:
    """Base-frame rotation vector bringing the tool's approach axis back to pointing straight down."""
    z_axis = rotations.rotate(rotations.normalize(quat), np.array([0.0, 0.0, 1.0]))
    return np.cross(z_axis, np.array([0.0, 0.0, -1.0]))
