"""The `Reward` protocol: what any reward source (rule, human, learned) gives for one step.

A reward is computed from a `RewardStep` (what a robot saw at the end of a step) and returns a
`RewardValue` (reward + whether the task counts as achieved); a reward node calls it on each step as it
happens, a robot's own scorer on each step it takes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from user.interfaces.domain import Observation
from user.interfaces.images import decode_image

TCP_POSE_SLICE = slice(0, 7)  # the tool pose (xyz + xyzw) leads every arm state vector (`ArmState.vector`)


class RewardError(ValueError):
    """A reward was configured wrongly or given a step it cannot score."""


class RewardMode(Enum):
    """When a reward is given: on every step, or only at the end of the episode."""

    STEP = "step"
    TERMINAL = "terminal"


@dataclass(frozen=True)
class RewardStep:
    """What a reward may look at for one step (the state reached by the step)."""

    stamp_ns: int  # when the state was read (robot clock)
    state: npt.NDArray[np.float32]  # (S,) arm state vector; its first 7 entries are the tool pose
    images: Mapping[str, npt.NDArray[np.uint8]] = field(default_factory=dict)  # camera -> (H, W, 3) RGB
    last: bool = False  # the last step of its episode (terminal-mode rewards score only these)

    @property
    def tcp_pose(self) -> npt.NDArray[np.float64]:
        if self.state.shape[0] < 7:
            raise RewardError(f"the state has {self.state.shape[0]} entries, a tool pose needs 7")
        return np.asarray(self.state[TCP_POSE_SLICE], dtype=np.float64)

    @staticmethod
    def from_observation(obs: Observation, *, last: bool = False, decode: bool = True) -> RewardStep:
        """The step of a stored observation; `decode=False` leaves the images out (rewards that need none)."""
        images = {img.camera: decode_image(img.data) for img in obs.images} if decode else {}
        return RewardStep(obs.stamp_ns, np.asarray(obs.state, dtype=np.float32), images, last)


@dataclass(frozen=True)
class RewardValue:
    """A reward and whether the task counts as achieved."""

    reward: float
    success: bool = False


@runtime_checkable
class Reward(Protocol):
    """Anything that scores steps."""

    needs_images: bool  # whether `__call__` looks at `RewardStep.images`

    def __call__(self, step: RewardStep) -> RewardValue:
        """The reward for the state `step` reached."""
        ...

    def reset(self) -> None:
        """Called at an episode boundary."""
        ...
