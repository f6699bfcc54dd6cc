"""Topic names and their Zenoh keys."""

import pytest

from user.bus.names import InvalidNameError, mangle, resolve, topic_to_key, unmangle


def test_keys_follow_the_ros2dds_bridge_convention() -> None:
    assert topic_to_key("/chatter") == "chatter"
    assert topic_to_key("/robot_1/obs") == "robot_1/obs"


def test_relative_names_resolve_in_namespace() -> None:
    assert resolve("obs", "/franka") == "/franka/obs"
    assert resolve("obs") == "/obs"


@pytest.mark.parametrize("bad", ["", "/a b", "/1abc", "/a//b", "/a/*", "/a/**"])
def test_invalid_names_are_refused(bad: str) -> None:
    with pytest.raises(InvalidNameError):
        resolve(bad)


def test_mangle_roundtrip() -> None:
    assert unmangle(mangle("/a/b")) == "/a/b"
    assert "/" not in mangle("std_msgs/msg/String")
