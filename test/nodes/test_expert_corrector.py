"""The expert node as a scripted corrector (`role: corrector`, issue 35 item 4), on both runtimes: it watches a
simulated arm's privileged observations and publishes interventions (the expert's action, intervened, source HUMAN)
only while the arm is off the expert's path, logging each take-over and hand-back."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import numpy as np
import pytest

from test.conftest import wait_until
from user.bus.base import BEST_EFFORT, Bus
from user.interfaces.domain import Observation, observation_to_msg
from user.nodes.expert import ExpertNode, ExpertParams
from user.robot_loop.gate import SOURCE_HUMAN
from user.robot_loop.observe import Observer, ObserverConfig
from user.runtime.node import Node
from user.sim.cameras import SimCameraConfig
from user.sim.robot import SimFrankaRobot, SimRobotConfig

pytestmark = pytest.mark.timeout(60)
TASK = "button_press"


@pytest.fixture
def make_bus(make_any_bus: Callable[..., Bus]) -> Callable[..., Bus]:
    return make_any_bus


@pytest.fixture(scope="module")
def arm() -> Iterator[SimFrankaRobot]:
    robot = SimFrankaRobot(SimRobotConfig(task=TASK, cameras=SimCameraConfig(names=())))
    robot.connect()
    yield robot
    robot.close()


class Interventions:
    """The robot's side: /<robot>/intervention messages by step."""

    def __init__(self, bus: Bus, robot: str) -> None:
        self.node = Node(bus)
        self.steps: dict[int, Any] = {}
        self._lock = threading.Lock()
        self.node.create_subscription(f"/{robot}/intervention", "user/msg/Action", self._on)

    def _on(self, msg: Any) -> None:
        with self._lock:
            self.steps[int(msg.step)] = msg

    def has(self, step: int) -> bool:
        with self._lock:
            return step in self.steps


def test_it_intervenes_only_while_the_arm_is_off_the_path(
    make_bus: Callable[..., Bus], arm: SimFrankaRobot, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    robot = f"arm_{uuid.uuid4().hex[:6]}"
    seen = Interventions(make_bus("robot_in"), robot)
    params = {
        "robot_id": robot,
        "task": TASK,
        "role": "corrector",
        "corrector": {"takeover_m": 0.03, "handback_m": 0.01},
    }
    corrector = ExpertNode(make_bus("corrector", params, ExpertParams))
    sender = Node(make_bus("robot_out"))
    pub = sender.create_publisher(f"/{robot}/observation", "user/msg/Observation", BEST_EFFORT)
    observer = Observer(ObserverConfig(robot_id=robot, task=TASK), privileged=arm.task_state)
    state = arm.reset(3)
    drift = np.zeros(7, dtype=np.float32)
    drift[1], drift[6] = 0.5, -1.0
    took_over: int | None = None
    try:
        for step in range(60):
            obs: Observation = observer.observe(state, episode_id=1, step=step, policy_version=0)
            # an observation may be lost before the subscription is matched: send it until the corrector answered
            assert wait_until(partial(_decided, pub, obs, corrector), 10.0), f"step {step} unseen"
            if seen.has(step) or wait_until(partial(seen.has, step), 0.2):
                took_over = step if took_over is None else took_over
                msg = seen.steps[step]
                assert msg.intervened and msg.source == SOURCE_HUMAN and msg.episode_id == 1
                state = arm.step(np.asarray(msg.data, dtype=np.float32)).state
            elif took_over is not None:
                break  # handed back
            else:
                state = arm.step(drift).state  # off sideways until it takes over
        assert took_over is not None and took_over > 0, "the corrector never took over from the drifting arm"
        handed_back = step
        assert handed_back > took_over + 1 and not seen.has(handed_back)
        assert not corrector.corrector.in_control  # type: ignore[union-attr]
        messages = [r.getMessage() for r in caplog.records if "corrector" in r.getMessage()]
        assert any(f"takes over at episode 1 step {took_over}" in m for m in messages), messages
        assert any(f"hands back at episode 1 step {handed_back}" in m for m in messages), messages
    finally:
        corrector.destroy()
        sender.destroy()
        seen.node.destroy()


def _decided(pub: Any, obs: Observation, node: ExpertNode) -> bool:
    """Publish `obs`; whether the node has decided on it (its last decision is for its episode and step)."""
    pub.publish(observation_to_msg(obs, node.codec))
    return node.decided == (obs.episode_id, obs.step)
