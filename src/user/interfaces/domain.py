"""Domain objects used inside the core, and their conversion to and from messages.

Nodes convert at their boundary only: the core sees numpy arrays and dataclasses, never message classes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from user.interfaces.codec import Codec
from user.interfaces.stamps import from_time, header


@dataclass(frozen=True)
class EncodedImage:
    """A compressed camera frame, kept compressed until a consumer needs pixels."""

    camera: str  # camera name, carried as header.frame_id of sensor_msgs/CompressedImage
    format: str  # "jpeg" or "png" (the CompressedImage format string)
    data: bytes  # the compressed bytes
    stamp_ns: int  # capture time (hardware stamp where the camera has one)


@dataclass(frozen=True)
class Observation:
    """What a robot saw at one control step."""

    robot_id: str  # robot name in the deployment
    task: str  # task name
    episode_id: int  # per-robot episode counter
    step: int  # step index within the episode
    state: np.ndarray  # float32 proprioceptive state
    stamp_ns: int  # when the state was read
    images: tuple[EncodedImage, ...] = ()  # one per camera
    state_names: tuple[str, ...] = ()  # optional names of the state entries
    embodiment_id: int = 0  # which arm type produced it
    policy_version: int = 0  # weights version in use
    frame_id: str = field(default="base")  # frame of the pose entries in `state`


def observation_to_msg(obs: Observation, codec: Codec) -> Any:
    """user/msg/Observation for `obs`."""
    image_cls = codec.msg_class("sensor_msgs/msg/CompressedImage")
    images = [
        image_cls(
            header=header(img.stamp_ns, img.camera, codec),
            format=img.format,
            data=np.frombuffer(img.data, dtype=np.uint8),
        )
        for img in obs.images
    ]
    return codec.msg_class("user/msg/Observation")(
        header=header(obs.stamp_ns, obs.frame_id, codec),
        robot_id=obs.robot_id,
        embodiment_id=obs.embodiment_id,
        task=obs.task,
        episode_id=obs.episode_id,
        step=obs.step,
        state=np.asarray(obs.state, dtype=np.float32),
        state_names=list(obs.state_names),
        images=images,
        policy_version=obs.policy_version,
    )


def observation_from_msg(msg: Any) -> Observation:
    """The domain observation carried by a user/msg/Observation."""
    images = tuple(
        EncodedImage(
            camera=str(img.header.frame_id),
            format=str(img.format),
            data=np.asarray(img.data, dtype=np.uint8).tobytes(),
            stamp_ns=from_time(img.header.stamp),
        )
        for img in msg.images
    )
    return Observation(
        robot_id=str(msg.robot_id),
        task=str(msg.task),
        episode_id=int(msg.episode_id),
        step=int(msg.step),
        state=np.asarray(msg.state, dtype=np.float32),
        stamp_ns=from_time(msg.header.stamp),
        images=images,
        state_names=tuple(msg.state_names),
        embodiment_id=int(msg.embodiment_id),
        policy_version=int(msg.policy_version),
        frame_id=str(msg.header.frame_id),
    )
