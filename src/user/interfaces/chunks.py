"""`ActionChunk`: a chunk of actions a rollout sends to a robot that plays chunks itself (user/msg/ActionChunk), and
its message. A message whose data is not a whole number of actions is refused on the way in (`ChunkMessageError`);
whether the actions fit the robot is the robot's player's to check."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from user.interfaces.codec import Codec
from user.interfaces.stamps import from_time, header


class ChunkMessageError(ValueError):
    """A user/msg/ActionChunk that does not hold a whole number of actions."""


@dataclass(frozen=True, eq=False)  # holds an array: compared by identity
class ActionChunk:
    """Actions for consecutive steps of one episode: the robot plays actions[i] at step start_step + i."""

    robot_id: str
    episode_id: int
    start_step: int  # the step of the observation it was computed from
    seq: int  # chunks the sender sent to this robot, from 1 (orders chunks of equal start steps)
    actions: npt.NDArray[np.float32]  # (H, A) in the robot's normalised action space
    policy_version: int  # version of the policy that computed it
    stamp_ns: int  # the observation's stamp


def chunk_to_msg(chunk: ActionChunk, codec: Codec) -> Any:
    actions = np.asarray(chunk.actions, dtype=np.float32)
    if actions.ndim != 2 or actions.shape[1] < 1:
        raise ChunkMessageError(f"a chunk's actions must be (H, A), got shape {actions.shape}")
    return codec.msg_class("user/msg/ActionChunk")(
        header=header(chunk.stamp_ns, "", codec),
        robot_id=chunk.robot_id,
        episode_id=chunk.episode_id,
        start_step=chunk.start_step,
        seq=chunk.seq,
        action_dim=actions.shape[1],
        data=actions.reshape(-1),
        policy_version=chunk.policy_version,
    )


def chunk_from_msg(msg: Any) -> ActionChunk:
    """The chunk a message carries; ChunkMessageError when its data is not a whole number of actions."""
    data = np.asarray(msg.data, dtype=np.float32)
    dim = int(msg.action_dim)
    if dim < 1 or len(data) == 0 or len(data) % dim:
        raise ChunkMessageError(
            f"chunk {int(msg.seq)} for {msg.robot_id}: {len(data)} values are not a whole number of actions of "
            f"{dim} (action_dim)"
        )
    return ActionChunk(
        robot_id=str(msg.robot_id),
        episode_id=int(msg.episode_id),
        start_step=int(msg.start_step),
        seq=int(msg.seq),
        actions=data.reshape(-1, dim),
        policy_version=int(msg.policy_version),
        stamp_ns=from_time(msg.header.stamp),
    )
