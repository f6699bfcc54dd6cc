"""Which announced robots may join (`Authorisation`) and whether what they send fits the policy (`PolicySpec`): each
misfit names its field."""

from __future__ import annotations

import numpy as np

from user.fleet.admission import Authorisation, PolicySpec
from user.hardware.descriptor import ResourceDescriptor
from user.interfaces.domain import Action, EncodedImage, Observation, Transition
from user.learner.config import LearningConfig

SPEC = PolicySpec(state_dim=3, action_dim=2, exclude_state_prefixes=("privileged/",))


def observation(names: tuple[str, ...], cameras: tuple[str, ...] = ()) -> Observation:
    images = tuple(EncodedImage(c, "jpeg", b"", 0) for c in cameras)
    return Observation("arm", "task", 0, 0, np.zeros(len(names), np.float32), 0, images=images, state_names=names)


def transition(names: tuple[str, ...], action_dim: int) -> Transition:
    obs = observation(names)
    action = Action("arm", 0, 0, np.zeros(action_dim, np.float32), 0)
    return Transition(obs, action, 0.0, obs)


def test_a_robot_may_join_when_listed_or_matching_a_pattern() -> None:
    rule = Authorisation(robots=("arm_x",), patterns=("franka_*", "ur5_?"))
    assert rule.allows("arm_x") and rule.allows("franka_left") and rule.allows("ur5_a")
    assert not rule.allows("ur5_ab") and not rule.allows("rogue") and not rule.allows("Franka_left")
    assert Authorisation().allows("anything") is False


def test_the_policy_sees_the_state_without_its_privileged_entries() -> None:
    assert SPEC.observation_mismatch(observation(("a", "b", "c", "privileged/peg"))) is None
    misfit = SPEC.observation_mismatch(observation(("a", "b", "c", "embodiment/id")))
    assert misfit is not None and misfit.field == "state_dim" and "expects 3" in misfit.detail


def test_unnamed_state_of_another_length_and_a_wrong_action_are_refused_by_field() -> None:
    unnamed = SPEC.observation_mismatch(Observation("arm", "t", 0, 0, np.zeros(4, np.float32), 0))
    assert unnamed is not None and unnamed.field == "state_dim"
    assert SPEC.transition_mismatch(transition(("a", "b", "c"), 2)) is None
    action = SPEC.transition_mismatch(transition(("a", "b", "c"), 7))
    assert action is not None and action.field == "action_dim" and "7" in str(action)


def test_cameras_the_policy_needs_must_be_among_the_robots() -> None:
    spec = PolicySpec(state_dim=1, action_dim=1, cameras=("wrist",))
    assert spec.observation_mismatch(observation(("a",), ("wrist", "front"))) is None
    misfit = spec.observation_mismatch(observation(("a",), ("front",)))
    assert misfit is not None and misfit.field == "cameras"
    robot = ResourceDescriptor("arm", "robot", cameras=("front",))
    found = spec.descriptor_mismatch(robot)
    assert found is not None and found.field == "cameras"


def test_an_announcement_is_checked_only_for_what_it_announces() -> None:
    assert SPEC.descriptor_mismatch(ResourceDescriptor("arm", "robot", dof=7)) is None
    announced = ResourceDescriptor("arm", "robot", properties={"action_dim": "7", "state_dim": "3"})
    found = SPEC.descriptor_mismatch(announced)
    assert found is not None and found.field == "action_dim" and "announced 7" in found.detail


def test_the_spec_of_a_learning_config() -> None:
    spec = PolicySpec.of(LearningConfig(), 7)
    assert (spec.state_dim, spec.action_dim, spec.cameras) == (17, 7, ())
