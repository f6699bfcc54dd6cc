"""Action and Transition domain objects round-trip through user/msg/Action and user/msg/Transition."""

import numpy as np

from test.buffer.factories import transition
from user.interfaces import default_codec
from user.interfaces.domain import action_from_msg, action_to_msg, transition_from_msg, transition_to_msg

CODEC = default_codec()


def test_transition_round_trip_through_cdr() -> None:
    t = transition("arm", 4, 2, 3, version=9, demo=True, intervened=True, success=True)
    back = transition_from_msg(CODEC.decode(CODEC.encode(transition_to_msg(t, CODEC)), "user/msg/Transition"))
    assert (back.robot_id, back.task, back.episode_id, back.step) == ("arm", "peg_insertion", 4, 2)
    assert (back.terminated, back.truncated, back.success, back.is_demo, back.done) == (True, False, True, True, True)
    assert back.reward == 1.0 and back.stamp_ns == t.stamp_ns
    assert np.array_equal(back.observation.state, t.observation.state)
    assert back.next_observation.images == t.next_observation.images
    assert back.action.intervened and back.action.source == 1 and back.action.policy_version == 9


def test_action_round_trip() -> None:
    a = transition("arm", 1, 0, 2).action
    back = action_from_msg(CODEC.decode(CODEC.encode(action_to_msg(a, CODEC)), "user/msg/Action"))
    assert back.robot_id == a.robot_id and np.array_equal(back.data, a.data) and back.data.dtype == np.float32
