"""A simulated arm with cameras never acts on, nor records, a step without its cameras' frames: until the render
thread has delivered a frame of every scene camera, its frames carry a fault naming the ones missing, so the control
loop holds; the first transition it records has every camera's image (a run's first transition once had none, and
a learner on images could not batch it with the others)."""

from __future__ import annotations

import numpy as np
import pytest

from test.conftest import wait_until
from user.config.strict import from_mapping
from user.interfaces.domain import Action, Transition
from user.robot_loop import ActionGate, ControlLoop, Observer
from user.robot_loop.driver_spec import DriverSpec
from user.robot_loop.drivers import build_driver
from user.robot_loop.observe import CameraFrames, ObserverConfig

pytest.importorskip("mujoco")
pytestmark = pytest.mark.timeout(120)
SPEC = {"driver": "sim_franka", "robot_id": "cam_arm", "task": "button_press", "cameras": True, "realtime": False}


def test_a_camera_without_a_frame_yet_is_a_fault_and_the_first_transition_has_every_image() -> None:
    bundle = build_driver(from_mapping(DriverSpec, SPEC, where="robot"))
    assert bundle.frames is not None
    before = bundle.frames()
    assert isinstance(before, CameraFrames) and before.fault == (
        "camera 'wrist': no frame yet; camera 'front': no frame yet"
    )
    bundle.connect()
    try:
        gate = ActionGate(1.0, 0.25, lockstep=True)
        observer = Observer(ObserverConfig("cam_arm", "button_press"), frames=bundle.frames)
        loop = ControlLoop(bundle.robot, bundle.scorer, observer, gate, seed=0)
        loop.reset()
        still = np.zeros(bundle.robot.action_space.shape, dtype=np.float32)
        recorded: list[Transition] = []

        def moved() -> bool:
            obs = loop.observation
            assert obs is not None
            gate.feed_policy(Action("cam_arm", obs.episode_id, obs.step, still, 0))
            transition = loop.tick().transition
            if transition is not None:
                recorded.append(transition)
            return bool(recorded)

        assert wait_until(moved, 30.0), "the arm never moved"
        first = recorded[0]
        assert {img.camera for img in first.observation.images} == {"wrist", "front"}
        assert {img.camera for img in first.next_observation.images} == {"wrist", "front"}
    finally:
        bundle.close()
