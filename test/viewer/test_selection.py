"""Which announced topics the viewer serves: allowed, new, of one type the codec knows; the others with a reason."""

from __future__ import annotations

from user.interfaces.codec import default_codec
from user.viewer.selection import allowed, select_topics


def test_patterns_and_exact_names_allow_topics_and_no_patterns_allow_all() -> None:
    assert allowed("/franka_left/joint_states", [])
    assert allowed("/franka_left/joint_states", ["/franka_left/*"])
    assert allowed("/franka_left/joint_states", ["franka_left/joint_states"])  # the leading '/' is optional
    assert not allowed("/franka_right/joint_states", ["/franka_left/*", "/learner/stats"])
    assert allowed("/learner/stats", ["/franka_left/*", "/learner/stats"])


def test_known_types_open_in_canonical_form_and_the_rest_are_skipped_with_their_reason() -> None:
    codec = default_codec()
    announced = {
        "/joints": ["sensor_msgs/JointState"],
        "/open_already": ["std_msgs/msg/String"],
        "/mystery": ["nopkg/msg/Nope"],
        "/mixed": ["std_msgs/msg/String", "std_msgs/msg/Bool"],
        "/half_known": ["std_msgs/msg/String", "nopkg/msg/Nope"],
        "/not_allowed": ["std_msgs/msg/String"],
    }
    patterns = ["/joints", "/open_already", "/mystery", "/mixed", "/half_known"]
    selection = select_topics(announced, ["/open_already"], patterns, codec)
    assert selection.to_open == {"/joints": "sensor_msgs/msg/JointState"}
    assert set(selection.skipped) == {"/mystery", "/mixed", "/half_known"}
    assert "nopkg/msg/Nope" in selection.skipped["/mystery"]
    assert "std_msgs/msg/Bool, std_msgs/msg/String" in selection.skipped["/mixed"]
    assert "nopkg/msg/Nope" in selection.skipped["/half_known"]


def test_one_type_under_two_spellings_is_one_type() -> None:
    selection = select_topics({"/s": ["std_msgs/String", "std_msgs/msg/String"]}, [], [], default_codec())
    assert selection.to_open == {"/s": "std_msgs/msg/String"} and not selection.skipped
