"""Episode boundaries (user/msg/EpisodeEvent) as a domain object, used by the robot loop and the buffer."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from user.interfaces.codec import Codec
from user.interfaces.stamps import from_time, header

RESET_SEED_DEFAULT = -2  # user/srv/Reset SEED_DEFAULT: the robot's own seed schedule (seed + episode index)


class EpisodeKind(IntEnum):
    START = 0  # user/msg/EpisodeEvent KIND_START
    END = 1  # user/msg/EpisodeEvent KIND_END


@dataclass(frozen=True)
class EpisodeEvent:
    """An episode started or ended on one robot."""

    robot_id: str  # robot name in the deployment
    task: str  # task name
    episode_id: int  # per-robot episode counter
    kind: EpisodeKind  # START or END
    stamp_ns: int  # when it happened (robot clock)
    success: bool = False  # END: the task was achieved
    steps: int = 0  # END: transitions in the episode
    episode_return: float = 0.0  # END: sum of rewards
    interventions: int = 0  # END: steps in which a human overrode the policy
    policy_version: int = 0  # latest policy version seen in the episode


def episode_event_to_msg(event: EpisodeEvent, codec: Codec) -> Any:
    """user/msg/EpisodeEvent for `event`."""
    return codec.msg_class("user/msg/EpisodeEvent")(
        header=header(event.stamp_ns, "", codec),
        robot_id=event.robot_id,
        task=event.task,
        episode_id=event.episode_id,
        kind=int(event.kind),
        success=event.success,
        steps=event.steps,
        episode_return=float(event.episode_return),
        interventions=event.interventions,
        policy_version=event.policy_version,
    )


def episode_event_from_msg(msg: Any) -> EpisodeEvent:
    """The domain event carried by a user/msg/EpisodeEvent."""
    return EpisodeEvent(
        robot_id=str(msg.robot_id),
        task=str(msg.task),
        episode_id=int(msg.episode_id),
        kind=EpisodeKind(int(msg.kind)),
        stamp_ns=from_time(msg.header.stamp),
        success=bool(msg.success),
        steps=int(msg.steps),
        episode_return=float(msg.episode_return),
        interventions=int(msg.interventions),
        policy_version=int(msg.policy_version),
    )
