"""`Observer`: the robot's state (+ task extras, + privileged sim state, + camera JPEGs) as an `Observation`.

A frames source may return `CameraFrames`, whose `fault` says why the robot must not move on them (a required
camera dead or stale); `camera_fault` asks for it, and `ControlLoop.tick` holds the robot while there is one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from user.interfaces.domain import EncodedImage, Observation
from user.interfaces.images import encode_jpeg
from user.robot_loop.privileged import arm_state_names, flatten_extras, flatten_task_state
from user.robots.base import ArmState
from user.tasks.base import TaskState

Image = tuple[npt.NDArray[np.uint8], int]  # (RGB image, stamp_ns)


class CameraFrames(dict[str, Image]):
    """Frames by camera name, with `fault`: why the robot must hold ("" when every required camera is fresh)."""

    def __init__(self, frames: Mapping[str, Image] | None = None, fault: str = "") -> None:
        super().__init__(frames or {})
        self.fault = fault


ExtrasFn = Callable[[], Mapping[str, npt.NDArray[np.float32]]]
TaskStateFn = Callable[[], TaskState]
FramesFn = Callable[[], Mapping[str, Image]]  # camera -> (RGB image, stamp_ns); `CameraFrames` carries a fault


@dataclass(frozen=True)
class ObserverConfig:
    robot_id: str  # robot name in the deployment
    task: str  # task name
    embodiment_id: int = 0  # arm type
    jpeg_quality: int = 90  # camera images, 1..100
    embodiment_in_state: bool = False  # append the embodiment id to `state` ("embodiment/id"), for shared policies


class Observer:
    """Builds observations; the sources are plain callables so any robot (sim, real, gym) fits."""

    def __init__(
        self,
        config: ObserverConfig,
        extras: ExtrasFn | None = None,
        privileged: TaskStateFn | None = None,
        frames: FramesFn | None = None,
    ) -> None:
        self.config = config
        self._extras = extras
        self._privileged = privileged
        self._frames = frames
        self._fault = ""  # the camera fault of the frames in the latest observation

    def camera_fault(self) -> str:
        """Why the robot must hold for its cameras now, or the fault of the latest observation's frames (the
        one an action was chosen on); "" when neither had one."""
        if self._frames is None:
            return ""
        now = _fault_of(self._frames())
        return now or self._fault

    def observe(self, arm: ArmState, episode_id: int, step: int, policy_version: int) -> Observation:
        vector = arm.vector().astype(np.float32)
        parts = [vector]
        names = list(arm_state_names(arm, vector))
        if self._extras is not None:
            values, extra_names = flatten_extras(dict(self._extras()))
            parts.append(values)
            names.extend(extra_names)
        if self.config.embodiment_in_state:
            parts.append(np.array([self.config.embodiment_id], dtype=np.float32))
            names.append("embodiment/id")
        if self._privileged is not None:
            values, task_names = flatten_task_state(self._privileged())
            parts.append(values)
            names.extend(task_names)
        return Observation(
            robot_id=self.config.robot_id,
            task=self.config.task,
            episode_id=episode_id,
            step=step,
            state=np.concatenate(parts).astype(np.float32),
            stamp_ns=arm.stamp_ns,
            images=self.images(),
            state_names=tuple(names),
            embodiment_id=self.config.embodiment_id,
            policy_version=policy_version,
        )

    def images(self) -> tuple[EncodedImage, ...]:
        """The latest frame of each camera, JPEG-encoded (none when no cameras are configured)."""
        if self._frames is None:
            return ()
        frames = self._frames()
        self._fault = _fault_of(frames)
        return tuple(
            EncodedImage(camera=name, format="jpeg", data=encode_jpeg(image, self.config.jpeg_quality), stamp_ns=stamp)
            for name, (image, stamp) in sorted(frames.items())
        )


def _fault_of(frames: Mapping[str, Image]) -> str:
    return frames.fault if isinstance(frames, CameraFrames) else ""
