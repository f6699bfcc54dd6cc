"""Chunks played at the edge (issue 35, item 3), real nodes over Zenoh: a rollout with `send: chunks` computes a
test-sized VLA's chunks from a simulated arm's camera and state and sends them whole; the robot (`actions_from:
chunks`) plays them step by step, each transition's action being the action of a chunk sent for that step (the
newest it had: never an older chunk than at the step before), and a newer chunk takes over mid-chunk. A chunk with a
value that is not finite is refused by the robot (counted) and never played."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from test.conftest import wait_until
from test.nodes.test_robot_node_realtime import TransitionInbox
from user.bus.base import RELIABLE
from user.bus.zenoh_bus import ZenohBus
from user.interfaces.chunks import ActionChunk, chunk_from_msg, chunk_to_msg
from user.nodes.robot import RobotNode
from user.nodes.rollout import RolloutNode
from user.runtime.node import Node, started

pytest.importorskip("transformers", reason="the π0 model needs the `vla` extra (scripts/install --ros has it)")
pytestmark = pytest.mark.timeout(120)

CHUNK = 6
LEARNING = {
    "policy_id": "chunk_nodes",
    "policy_kind": "vla",
    "vla": {
        "size": "test",
        "chunk_size": CHUNK,
        "state_dim": 17,
        "action_dim": 7,
        "instruction": "insert the peg",
        "observation": {"cameras": ["front"], "image_size": 32, "image_mean": [0.5] * 3, "image_std": [0.5] * 3},
    },
    "algorithm": "hg_dagger",
}


class ChunkInbox:
    """Every chunk the rollout sent to the robot."""

    def __init__(self, probe: Node, robot: str) -> None:
        self._got: list[ActionChunk] = []
        self._lock = threading.Lock()
        probe.create_subscription(f"/{robot}/action_chunk", "user/msg/ActionChunk", self._on, RELIABLE)

    def _on(self, msg: Any) -> None:
        with self._lock:
            self._got.append(chunk_from_msg(msg))

    def seen(self) -> list[ActionChunk]:
        with self._lock:
            return list(self._got)


def _played_from(chunks: list[ActionChunk], episode: int, step: int, action: np.ndarray) -> list[int]:
    """The seqs of the chunks whose action for `step` is `action`."""
    return [
        c.seq
        for c in chunks
        if c.episode_id == episode
        and c.start_step <= step < c.start_step + len(c.actions)
        and np.allclose(c.actions[step - c.start_step], action, atol=1e-6)
    ]


def test_the_robot_plays_the_rollout_s_chunks_newest_first(make_bus: Callable[..., ZenohBus]) -> None:
    robot = f"arm_{uuid.uuid4().hex[:6]}"
    probe = Node(make_bus("probe"))
    transitions, sent = TransitionInbox(probe, robot), ChunkInbox(probe, robot)
    rollout_params = {
        "robots": [robot],
        "learning": LEARNING,
        "wait_for_weights": False,
        "send": "chunks",
        "chunking": {"mode": "rtc", "execute_horizon": 3, "delay_steps": 2},
    }
    rollout = RolloutNode(make_bus("rollout", rollout_params))
    arm_params = {
        "robot_id": robot,
        "task": "peg_insertion",
        "control_rate_hz": 10.0,
        "cameras": True,
        "actions_from": "chunks",
        "outbox_episodes": 0,
        "max_steps": 200,
    }
    arm = started(RobotNode(make_bus("arm", arm_params)))
    try:
        assert wait_until(lambda: len(transitions) >= 20, 60.0), f"{len(transitions)} transitions"
        chunks = sent.seen()
        seen = [t for t in transitions.seen() if t.episode_id == 0]
        last = 0
        starts = {c.seq: c.start_step for c in chunks}
        for t in seen:
            seqs = _played_from(chunks, t.episode_id, t.step, t.action.data)
            assert seqs, f"step {t.step}: its action is no sent chunk's action for it"
            assert max(seqs) >= last, f"step {t.step}: played chunk {max(seqs)} after chunk {last}"
            last = max(seqs)
            # what the robot played, stored with the transition: the chunk and the place in it
            assert t.action.chunk_seq in seqs, f"step {t.step}: recorded chunk {t.action.chunk_seq}, played {seqs}"
            assert t.action.chunk_index == t.step - starts[t.action.chunk_seq]
        recorded = [t.action.chunk_seq for t in seen]
        assert len({*recorded}) >= 3 and recorded == sorted(recorded)  # switched at least twice, never back
        feed = arm.chunks
        assert last >= 3 and feed is not None and feed.player.stats().switches >= 2
        assert all(c.actions.shape == (CHUNK, 7) and c.robot_id == robot for c in chunks)

        # a chunk with a value that is not finite, newer than any: refused, never played
        bad = np.zeros((CHUNK, 7), dtype=np.float32)
        bad[0, 0] = np.nan
        at = seen[-1].step
        pub = probe.create_publisher(f"/{robot}/action_chunk", "user/msg/ActionChunk", RELIABLE)
        message = chunk_to_msg(ActionChunk(robot, 0, at + 1_000, 10_000, bad, 0, 0), probe.codec)
        assert wait_until(lambda: _sent_once(pub, message) and feed.refusals.count("chunk_non_finite") > 0, 10.0)
        assert all(np.isfinite(t.action.data).all() for t in transitions.seen())
    finally:
        arm.destroy()
        rollout.destroy()
        probe.destroy()


def _sent_once(pub: Any, message: Any) -> bool:
    pub.publish(message)
    return True
