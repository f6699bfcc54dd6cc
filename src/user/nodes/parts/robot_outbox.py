"""The robot node's outbox on the bus: completed episodes kept until the learner acknowledges them.

`RobotOutbox` wires an `EpisodeOutbox` (`user.robot_loop.outbox`) to the node: receipts arrive on
`<namespace>/episode_acks` (user/msg/EpisodeAck), episodes without one go out again, whole, on
`<namespace>/transitions/replay`, and with `state_dir` every completed episode is also on disk until its receipt
(`<state_dir>/<robot_id>.outbox/`), so a restarted node still delivers what the last one left.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from user.bus.base import RELIABLE
from user.nodes.parts.robot_params import RobotNodeParams
from user.robot_loop.outbox import EpisodeOutbox
from user.robot_loop.outbox_spool import OutboxSpool
from user.runtime.node import Node


class RobotOutbox:
    """The episodes of one robot not yet acknowledged by the learner, re-sent until they are."""

    def __init__(self, node: Node, namespace: str, params: RobotNodeParams) -> None:
        self._robot_id = params.robot_id
        spool, left = _spool(node, params)
        self.episodes = EpisodeOutbox(params.outbox_episodes, params.outbox_resend_s, spool=spool)
        self.episodes.restore(left)
        self._replay = node.create_publisher(f"{namespace}/transitions/replay", "user/msg/Transition", RELIABLE)
        node.create_subscription(f"{namespace}/episode_acks", "user/msg/EpisodeAck", self._on_ack)
        node.create_timer(min(1.0, params.outbox_resend_s / 2), self._resend)

    def add(self, episode_id: int, message: Any, done: bool) -> None:
        """A published transition message of episode `episode_id` (`done`: its last)."""
        self.episodes.add(episode_id, message, done)

    def end_early(self, episode_id: int) -> None:
        """The running episode was ended by a reset: kept whole, its last step truncated (as the learner does)."""
        self.episodes.end_early(episode_id, lambda m: dataclasses.replace(m, truncated=True))

    def _on_ack(self, msg: Any) -> None:
        if msg.robot_id == self._robot_id:
            self.episodes.acknowledge(int(msg.episode_id))

    def _resend(self) -> None:
        """Timer: episodes without a receipt go out again, whole (the learner stores what it lacks); the outbox
        says which and why (a count for what the last run left, a warning for each receipt that did not come)."""
        for resend in self.episodes.due():
            for message in resend.messages:
                self._replay.publish(message)


def _spool(node: Node, params: RobotNodeParams) -> tuple[OutboxSpool | None, list[tuple[int, list[Any]]]]:
    """The outbox's episodes on disk under `state_dir` (None without one), and what a killed node left there."""
    if not params.state_dir:
        return None, []
    robot = params.robot_id
    directory = Path(params.state_dir) / f"{robot}.outbox"
    spool = OutboxSpool.of(directory, node.codec, "user/msg/Transition", f"/{robot}/transitions")
    left = spool.load()
    if left:
        episodes = ", ".join(str(episode) for episode, _ in left)
        node.log.info(
            "outbox: %d unacknowledged episodes left by the last run of %s (%s); re-sent when the learner answers",
            len(left),
            robot,
            episodes,
        )
    return spool, left
