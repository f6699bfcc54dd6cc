"""Multi-colour button press: three buttons (red, green, blue) in a row; press the one the observation names.

Each episode draws the row's position, the order of the colours along it and the target colour, given to
the policy as a one-hot `target_color` (red, green, blue), with `tool_to_target`, the target cap's top minus the
tool position (base frame) times `observation_scale`, as peg insertion gives its hole (a real cell computes it from
the arm's forward kinematics and the buttons' known places; without it a policy from state cannot know where the
drawn row is). Reward: the shaped cost -tanh(d / reward_scale) (in (-1, 0]), d = distance from the tool to the
target button's cap: a cost, as peg insertion's, so that ending the episode by succeeding is always best (with the
former 1 - tanh a learned policy hovered a few cm over the cap for the whole episode instead of pressing it).
Success: the target cap is pressed by `press_depth`; pressing another button first fails the episode.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
import numpy.typing as npt

from user.config import setting
from user.robots.base import ArmState
from user.tasks import expert, props
from user.tasks.base import TOOL_DOWN, ActionScale, ExpertPath, Task, TaskStart, TaskState, TaskWorld

Vec = npt.NDArray[np.float64]
COLOURS = ("red", "green", "blue")
RGBA = {"red": (0.85, 0.1, 0.1, 1.0), "green": (0.1, 0.7, 0.15, 1.0), "blue": (0.1, 0.25, 0.9, 1.0)}
BASE_HEIGHT = 0.04  # m, top of a button's housing
CAP_TOP = BASE_HEIGHT + 0.02  # m, top of a released cap above the table
SAFE_HEIGHT = 0.06  # m above the target cap where the expert lines up before pressing


def button_body(colour: str) -> str:
    return f"button_{colour}"


@dataclass(frozen=True)
class ButtonPressConfig:
    """Geometry and randomisation of the button-press task."""

    radius: float = setting(0.022, "radius of a button cap, m", min=0.01, max=0.05)
    spacing: float = setting(0.12, "distance between neighbouring buttons, m", min=0.06)
    travel: float = setting(0.012, "how far a cap can be pushed down, m", min=0.004)
    stiffness: float = setting(300.0, "button spring stiffness, N/m", min=1.0)
    press_depth: float = setting(0.006, "a button counts as pressed this far down, m", min=0.001)
    row_x: tuple[float, float] = setting((0.5, 0.6), "range of the row's x, m")
    row_y: tuple[float, float] = setting((-0.05, 0.05), "range of the middle button's y, m")
    start_region: tuple[tuple[float, float], tuple[float, float], tuple[float, float]] = setting(
        ((0.42, 0.55), (-0.12, 0.12), (0.2, 0.3)), "tool start box: (x, y, z) ranges, m"
    )
    reward_scale: float = setting(0.1, "distance (m) at which the cost reaches -tanh(1)", min=1e-4)
    max_steps: int = setting(60, "episode length limit, steps", min=1)
    observation_scale: float = setting(50.0, "tool_to_target extra = (target cap top - tool position) * this", min=1e-6)


class ButtonPress(Task):
    """Press the button of the target colour."""

    name = "button_press"

    def __init__(self, config: ButtonPressConfig | None = None, scale: ActionScale | None = None) -> None:
        super().__init__(scale)
        self.config = config or ButtonPressConfig()
        self.max_steps = self.config.max_steps
        if self.config.press_depth >= self.config.travel:
            raise ValueError("press_depth must be less than travel")
        self._target = 0  # index into COLOURS; drawn per episode

    def build(self, world: mujoco.MjsBody) -> None:
        c = self.config
        for colour in COLOURS:
            props.add_button(
                world,
                button_body(colour),
                radius=c.radius,
                base_height=BASE_HEIGHT,
                travel=c.travel,
                stiffness=c.stiffness,
                rgba=RGBA[colour],
            )

    def sample_start(self, rng: np.random.Generator) -> TaskStart:
        c = self.config
        x, y = rng.uniform(*c.row_x), rng.uniform(*c.row_y)
        order = rng.permutation(len(COLOURS))
        layout: dict[str, Vec] = {
            button_body(COLOURS[k]): np.array([x, y + (slot - 1) * c.spacing, 0.0]) for slot, k in enumerate(order)
        }
        layout["target"] = np.array([float(rng.integers(len(COLOURS)))])
        lo, hi = np.array(c.start_region).T
        return TaskStart(np.concatenate([rng.uniform(lo, hi), TOOL_DOWN]), gripper=0.0, layout=layout)

    def place(self, world: TaskWorld, start: TaskStart) -> None:
        for colour in COLOURS:
            world.set_body_position(button_body(colour), start.layout[button_body(colour)])
        self._target = int(start.layout["target"][0])

    def read(self, world: TaskWorld) -> TaskState:
        depths = np.array([-world.joint_position(f"{button_body(c)}_joint") for c in COLOURS])
        caps = np.array([world.body_position(button_body(c)) + np.array([0.0, 0.0, CAP_TOP]) for c in COLOURS])
        onehot = np.eye(len(COLOURS))[self._target]
        to_target = caps[self._target] - world.tcp_pose()[:3]
        return TaskState(values={"depths": depths, "caps": caps, "target_onehot": onehot, "tool_to_target": to_target})

    def _target_index(self, state: TaskState) -> int:
        return int(np.argmax(state.values["target_onehot"]))

    def reward(self, arm: ArmState, state: TaskState) -> float:
        cap = np.asarray(state.values["caps"])[self._target_index(state)]
        d = float(np.linalg.norm(arm.tcp_pose[:3] - cap))
        return -float(np.tanh(d / self.config.reward_scale))

    def success(self, arm: ArmState, state: TaskState) -> bool:
        del arm
        return bool(np.asarray(state.values["depths"])[self._target_index(state)] >= self.config.press_depth)

    def failure(self, arm: ArmState, state: TaskState) -> bool:
        del arm
        pressed = np.asarray(state.values["depths"]) >= self.config.press_depth
        pressed[self._target_index(state)] = False
        return bool(np.any(pressed))

    def observation_extras(self, state: TaskState) -> dict[str, npt.NDArray[np.float32]]:
        offset = np.asarray(state.values["tool_to_target"]) * self.config.observation_scale
        return {
            "target_color": np.asarray(state.values["target_onehot"], dtype=np.float32),
            "tool_to_target": offset.astype(np.float32),
        }

    def expert_path(self, arm: ArmState, state: TaskState) -> ExpertPath:
        """The tool centre: to the safe height over the target cap, then down through the cap's travel."""
        cap = np.asarray(state.values["caps"], dtype=np.float64)[self._target_index(state)]
        above = cap + np.array([0.0, 0.0, SAFE_HEIGHT])
        pressed = cap - np.array([0.0, 0.0, self.config.travel])
        return ExpertPath(np.asarray(arm.tcp_pose[:3], dtype=np.float64), np.stack([above, pressed]))

    def scripted_expert(self, arm: ArmState, state: TaskState) -> npt.NDArray[np.float32]:
        """Closed gripper over the target cap at a safe height, then straight down until it is pressed."""
        cap = np.asarray(state.values["caps"])[self._target_index(state)]
        tcp = arm.tcp_pose[:3]
        off = float(np.linalg.norm(cap[:2] - tcp[:2]))
        safe_z = float(cap[2]) + SAFE_HEIGHT
        if off > 0.004:
            z = safe_z if off > 0.01 or tcp[2] > safe_z - 0.01 else tcp[2]
            if tcp[2] < float(cap[2]) + 0.03 and off > 0.01:  # too low beside a button: up first
                return expert.servo(arm, np.array([tcp[0], tcp[1], safe_z]), TOOL_DOWN, expert.CLOSE, self.scale)
            return expert.servo(arm, np.array([cap[0], cap[1], z]), TOOL_DOWN, expert.CLOSE, self.scale)
        goal = np.array([cap[0], cap[1], float(cap[2]) - self.config.travel])
        return expert.servo(arm, goal, TOOL_DOWN, expert.CLOSE, self.scale, max_speed=0.5)
