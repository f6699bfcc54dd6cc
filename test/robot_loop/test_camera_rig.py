"""`CameraRig` with `ControlLoop`: a required camera that is dead or stale holds the robot (no action is sent,
nothing is recorded) with one console line, and the robot moves on once it delivers again."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from test.cameras.sources import CountingSource, FakeClock, config
from test.conftest import wait_until
from user.cameras import SourceCamera
from user.interfaces.domain import Action
from user.robot_loop import ActionGate, ControlLoop, Observer, TaskScorer
from user.robot_loop.camera_rig import CameraRig
from user.robot_loop.observe import ObserverConfig
from user.sim import SimFrankaRobot


def _loop(robot: SimFrankaRobot, rig: CameraRig) -> ControlLoop:
    assert robot.task is not None
    observer = Observer(ObserverConfig("arm", "button_press"), frames=rig.frames)
    gate = ActionGate(10.0, 10.0)  # actions stay fresh: only the camera decides
    return ControlLoop(robot, TaskScorer(robot.task, robot.task_state, None), observer, gate, seed=0)


def _act(loop: ControlLoop) -> None:
    obs = loop.observation
    assert obs is not None
    loop.gate.feed_policy(Action("arm", obs.episode_id, obs.step, np.zeros(7, np.float32), policy_version=1))


@pytest.mark.parametrize("required", [True, False])
def test_a_dead_required_camera_holds_the_robot_with_one_line(
    robot: SimFrankaRobot, required: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 33 #9: the policy must not act on a frozen frame: no action while a required camera is stale/dead."""
    clock = FakeClock()
    source = CountingSource(limit=1)  # one frame, then the camera goes silent (unplugged)
    optional = {} if required else {"required": False}  # required is the default
    camera = SourceCamera(config("wrist", max_age_s=0.1, **optional), source, pace=False, clock=clock)
    rig = CameraRig([camera])
    rig.open()
    try:
        loop = _loop(robot, rig)
        loop.reset()
        _act(loop)
        assert loop.tick().transition is not None  # fresh frame: it steps
        clock.advance(1.0)  # the frame is now 1 s old, 50 periods without a new one: dead
        caplog.set_level(logging.WARNING, logger="user.robot_loop.camera_rig")
        results = []
        for _ in range(3):
            _act(loop)
            results.append(loop.tick())
        source.limit = None  # plugged back in: frames again
        assert wait_until(lambda: camera.health().frames >= 3, 5.0)
        after = []
        for _ in range(2):  # the first still holds: its action was chosen on the faulty observation
            _act(loop)
            after.append(loop.tick())
    finally:
        rig.close()
    if not required:  # observations go on with the old frame
        assert all(r.transition is not None and not r.held for r in results + after)
        return
    assert after[0].held and after[1].transition is not None
    assert all(r.held and r.transition is None for r in results), results
    assert [img.camera for img in results[-1].observation.images] == ["wrist"]  # still shown, never acted on
    holds = [r.getMessage() for r in caplog.records if "robot holds" in r.getMessage()]
    assert len(holds) == 1, holds
    assert "camera 'wrist': newest frame is 1.00 s old (limit 0.10 s); dead: no new frame" in holds[0]
