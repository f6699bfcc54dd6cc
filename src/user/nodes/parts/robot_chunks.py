"""The robot node's chunk playing (`actions_from: chunks`): a rollout far away sends whole action chunks on
`<ns>/action_chunk` (user/msg/ActionChunk) and the robot plays them itself, one action per control period, so that
the link's delay and the inference time never stall its loop (real-time chunking at the edge).

Chunks go into a `ChunkPlayer`; each period the control thread asks it for the step at hand and hands what it gets to
the `ActionGate` as the policy's action for that step, where a fresh intervention still overrides it. A chunk that
arrives while the control thread waits for an action is handed over at once. What the player refuses (another
episode's chunk, an older one, bad values) is counted and logged, rate-limited; the robot holds past a chunk's end.
Per episode it counts the periods the robot held for lack of an action after its first action (`stalls`).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from user.bus.base import RELIABLE
from user.interfaces.chunks import ChunkMessageError, chunk_from_msg
from user.interfaces.domain import Action
from user.interfaces.refusals import Refusals
from user.robot_loop.chunk_player import Chunk, ChunkPlayer, ChunkPlayerError, PlayedAction
from user.robot_loop.gate import SOURCE_POLICY, ActionGate

if TYPE_CHECKING:
    from user.runtime.node import Node


class ChunkFeed:
    """Plays a rollout's chunks into the gate, step by step. Thread-safe."""

    def __init__(self, node: Node, namespace: str, gate: ActionGate, robot_id: str, action_dim: int) -> None:
        self.gate = gate
        self.robot_id = robot_id
        self.player = ChunkPlayer(action_dim)
        self.log = logging.getLogger(f"user.{node.name}.chunks")
        self.refusals = Refusals(self.log)
        self.stalls = 0  # periods held for lack of an action after an episode's first action
        self._episode_stalls = 0  # of those, in the running episode
        self._lock = threading.Lock()
        self._handing = threading.Lock()  # one hand-over at a time: a late one never lands after a newer step's
        self._at: tuple[int, int] | None = None  # the (episode, step) the control loop is at
        node.create_subscription(f"{namespace}/action_chunk", "user/msg/ActionChunk", self._on_chunk, RELIABLE)

    def start_episode(self, episode_id: int) -> None:
        """A new episode: the last one's figures logged in one line (the benchmark reads it), chunks of earlier
        episodes dropped."""
        with self._lock:
            last, stalls, self._episode_stalls = self._at, self._episode_stalls, 0
            self._at = (episode_id, 0)
        self.player.start_episode(episode_id)
        if last is not None:
            stats = self.player.stats()
            self.log.info(
                "chunks: episode %d: %d steps, held %d periods for lack of an action after its first (%d in all); "
                "%d chunks played, %d switches in all",
                last[0],
                last[1] + 1,
                stalls,
                self.stalls,
                stats.accepted,
                stats.switches,
            )

    def feed(self, episode_id: int, step: int) -> bool:
        """Control thread, before it waits for this step's action: hand the gate the chunk's action for it, if one
        covers it; whether one did."""
        with self._lock:
            self._at = (episode_id, step)
        return self._hand_over(episode_id, step)

    def held(self, step: int) -> None:
        """The control loop held at `step` for lack of an action."""
        if step > 0:
            with self._lock:
                self.stalls += 1
                self._episode_stalls += 1

    def _on_chunk(self, msg: Any) -> None:
        try:
            chunk = chunk_from_msg(msg)
        except ChunkMessageError as exc:
            self.refusals.refuse("chunk_message", f"chunk on {self.robot_id}'s action_chunk: {exc}")
            return
        if chunk.robot_id != self.robot_id:
            self.refusals.refuse("chunk_robot", f"chunk for {chunk.robot_id!r} on {self.robot_id}'s action_chunk")
            return
        offered = self.player.offer(
            Chunk(chunk.episode_id, chunk.start_step, chunk.actions, chunk.policy_version, chunk.seq)
        )
        if not offered.accepted and offered.refusal is not None:
            self.refusals.refuse(f"chunk_{offered.refusal.value}", f"chunk {chunk.seq}: {offered.message}")
            return
        with self._lock:
            at = self._at
        if at is not None:
            self._hand_over(*at)  # the control thread may be waiting for this very step

    def _hand_over(self, episode_id: int, step: int) -> bool:
        with self._handing:
            with self._lock:
                if self._at != (episode_id, step):
                    return False  # the control loop moved on meanwhile
            try:
                played = self.player.action_for(episode_id, step)
            except ChunkPlayerError:
                return False  # asked out of order: the control loop moved on
            if played is None:
                return False
            self.gate.feed_policy(self._action(episode_id, step, played))
            return True

    def _action(self, episode_id: int, step: int, played: PlayedAction) -> Action:
        return Action(
            robot_id=self.robot_id,
            episode_id=episode_id,
            step=step,
            data=np.asarray(played.action, dtype=np.float32),
            stamp_ns=0,
            intervened=False,
            source=SOURCE_POLICY,
            policy_version=played.policy_version,
            chunk_seq=played.seq,
            chunk_index=played.index,
        )
