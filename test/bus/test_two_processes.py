"""Acceptance: two processes over real Zenoh exchange 1,000 observations carrying two 128x128 JPEG
images each; none lost, order kept, decoded equal."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from test.conftest import REPO, wait_until
from test.helpers.observations import make_observation
from user.bus.zenoh_bus import ZenohBus
from user.interfaces.domain import Observation, observation_from_msg
from user.runtime.node import Node

COUNT = 1000


def _assert_same(got: Observation, want: Observation) -> None:
    assert (got.robot_id, got.task, got.episode_id, got.step) == (
        want.robot_id,
        want.task,
        want.episode_id,
        want.step,
    )
    assert (got.stamp_ns, got.embodiment_id, got.policy_version) == (
        want.stamp_ns,
        want.embodiment_id,
        want.policy_version,
    )
    assert got.state_names == want.state_names
    np.testing.assert_array_equal(got.state, want.state)
    assert got.images == want.images  # camera names, formats, stamps and the exact JPEG bytes


def test_thousand_observations_with_images_across_processes(
    make_bus: Callable[..., ZenohBus], zenoh_env: dict[str, str], topic: str
) -> None:
    node = Node(make_bus("obs_subscriber"))
    received: list[Observation] = []
    lock = threading.Lock()

    def on_msg(msg: Any) -> None:
        with lock:
            received.append(observation_from_msg(msg))

    node.create_subscription(topic, "user/msg/Observation", on_msg)
    proc = subprocess.run(
        [sys.executable, "-m", "test.helpers.observations", topic, str(COUNT)],
        cwd=REPO,
        env=zenoh_env,
        capture_output=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert wait_until(lambda: len(received) >= COUNT, 30.0), f"only {len(received)} of {COUNT} arrived"
    assert len(received) == COUNT
    assert [(o.episode_id, o.step) for o in received] == [(i // 100, i % 100) for i in range(COUNT)]
    for i, obs in enumerate(received):
        _assert_same(obs, make_observation(i))
    assert all(len(img.data) > 1000 for img in received[0].images)
    assert node.malformed_messages == 0
