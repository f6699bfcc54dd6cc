"""Domain objects used inside the core, and their conversion to and from messages.

Nodes convert at their boundary only: the core sees numpy arrays and dataclasses, never message classes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from user.interfaces.codec import ENCODED_HEADER, Codec
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


_STATE_NAMES: dict[tuple[str, ...], tuple[str, ...]] = {}
_STATE_NAMES_KEPT = 256  # distinct name lists shared; a robot has one, a deployment a handful


def shared_state_names(names: tuple[str, ...]) -> tuple[str, ...]:
    """One tuple object for each distinct list of state names, so that a batch sees that all its rows share
    their names by identity instead of comparing every name (see `user.buffer.batch`)."""
    shared = _STATE_NAMES.get(names)
    if shared is None:
        if len(_STATE_NAMES) >= _STATE_NAMES_KEPT:
            return names
        shared = _STATE_NAMES.setdefault(names, names)
    return shared


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
        state_names=shared_state_names(tuple(msg.state_names)),
        embodiment_id=int(msg.embodiment_id),
        policy_version=int(msg.policy_version),
        frame_id=str(msg.header.frame_id),
    )


@dataclass(frozen=True)
class Action:
    """The action applied for one control step (what the robot actually sent, after safety clipping)."""

    robot_id: str  # robot name in the deployment
    episode_id: int  # per-robot episode counter
    step: int  # step index within the episode
    data: np.ndarray  # float32 action vector in the robot's normalised action space
    stamp_ns: int = 0  # when the action was applied
    intervened: bool = False  # a human action replaced the policy's
    source: int = 0  # one of user/msg/Action SOURCE_* (0 policy, 1 human, 2 scripted, 3 hold)
    policy_version: int = 0  # version of the policy that produced it (the one overridden, if intervened)
    chunk_seq: int = 0  # seq of the action chunk the robot played it from (the one overridden); 0: not from a chunk
    chunk_index: int = 0  # its place in that chunk (step - the chunk's start step)


def action_to_msg(action: Action, codec: Codec) -> Any:
    """user/msg/Action for `action`."""
    return codec.msg_class("user/msg/Action")(
        header=header(action.stamp_ns, "", codec),
        robot_id=action.robot_id,
        episode_id=action.episode_id,
        step=action.step,
        data=np.asarray(action.data, dtype=np.float32),
        intervened=bool(action.intervened),
        source=action.source,
        policy_version=action.policy_version,
        chunk_seq=action.chunk_seq,
        chunk_index=action.chunk_index,
    )


def action_from_msg(msg: Any) -> Action:
    """The domain action carried by a user/msg/Action."""
    return Action(
        robot_id=str(msg.robot_id),
        episode_id=int(msg.episode_id),
        step=int(msg.step),
        data=np.asarray(msg.data, dtype=np.float32),
        stamp_ns=from_time(msg.header.stamp),
        intervened=bool(msg.intervened),
        source=int(msg.source),
        policy_version=int(msg.policy_version),
        # a record written before chunk provenance (decoded with the definition it was written with) has neither
        chunk_seq=int(getattr(msg, "chunk_seq", 0)),
        chunk_index=int(getattr(msg, "chunk_index", 0)),
    )


@dataclass(frozen=True)
class Transition:
    """One (s, a, r, s') step of an episode; robot, task, episode and step come from `observation`."""

    observation: Observation  # the state the action was chosen in
    action: Action  # the action applied
    reward: float  # reward received for this step
    next_observation: Observation  # the state after the action
    terminated: bool = False  # true end of the MDP (success or failure): no bootstrapping
    truncated: bool = False  # time limit or operator reset: bootstrapping allowed
    success: bool = False  # the task was achieved at this step
    is_demo: bool = False  # recorded from a scripted expert or a human demonstration
    stamp_ns: int = 0  # when the transition was completed (robot clock; sim time in simulation)

    @property
    def robot_id(self) -> str:
        return self.observation.robot_id

    @property
    def task(self) -> str:
        return self.observation.task

    @property
    def episode_id(self) -> int:
        return self.observation.episode_id

    @property
    def step(self) -> int:
        return self.observation.step

    @property
    def done(self) -> bool:
        """The episode ends with this transition."""
        return self.terminated or self.truncated


def transition_to_msg(transition: Transition, codec: Codec) -> Any:
    """user/msg/Transition for `transition`."""
    return codec.msg_class("user/msg/Transition")(
        header=header(transition.stamp_ns, transition.observation.frame_id, codec),
        robot_id=transition.robot_id,
        task=transition.task,
        episode_id=transition.episode_id,
        step=transition.step,
        observation=observation_to_msg(transition.observation, codec),
        action=action_to_msg(transition.action, codec),
        reward=float(transition.reward),
        terminated=bool(transition.terminated),
        truncated=bool(transition.truncated),
        success=bool(transition.success),
        is_demo=bool(transition.is_demo),
        next_observation=observation_to_msg(transition.next_observation, codec),
    )


def transition_from_msg(msg: Any) -> Transition:
    """The domain transition carried by a user/msg/Transition."""
    return Transition(
        observation=observation_from_msg(msg.observation),
        action=action_from_msg(msg.action),
        reward=float(msg.reward),
        next_observation=observation_from_msg(msg.next_observation),
        terminated=bool(msg.terminated),
        truncated=bool(msg.truncated),
        success=bool(msg.success),
        is_demo=bool(msg.is_demo),
        stamp_ns=from_time(msg.header.stamp),
    )


_NS_PER_S = 1_000_000_000


def is_canonical_transition(msg: Any, payload: bytes, codec: Codec) -> bool:
    """Whether `payload`, the CDR bytes the user/msg/Transition `msg` was decoded from, is exactly what
    `codec.encode(transition_to_msg(transition_from_msg(msg), codec))` gives, so that a store may keep the bytes
    as they arrived instead of encoding the same transition again.

    Checked without encoding: the codec's own encapsulation header, the exact length the codec would write (no
    trailing alignment bytes), normalised stamps, and agreement of the fields `transition_to_msg` derives from
    others (the transition's robot, task, episode, step and frame are the observation's; the action's frame is
    empty). Bytes published through this codec from a `Transition`, as every node of this package publishes
    them, always pass; what this cannot see is another serializer's padding contents or booleans other than
    0 and 1, which decode to the same transition all the same."""
    obs, action = msg.observation, msg.action
    return (
        payload[:4] == ENCODED_HEADER
        and msg.robot_id == obs.robot_id
        and msg.task == obs.task
        and msg.episode_id == obs.episode_id
        and msg.step == obs.step
        and msg.header.frame_id == obs.header.frame_id
        and action.header.frame_id == ""
        and all(h.stamp.nanosec < _NS_PER_S for h in _headers(msg))
        and len(payload) == codec.encoded_size(msg, "user/msg/Transition")
    )


def _headers(msg: Any) -> list[Any]:
    """Every std_msgs/Header inside a user/msg/Transition."""
    obs, nxt = msg.observation, msg.next_observation
    return [
        msg.header,
        msg.action.header,
        obs.header,
        nxt.header,
        *(img.header for img in obs.images),
        *(img.header for img in nxt.images),
    ]
