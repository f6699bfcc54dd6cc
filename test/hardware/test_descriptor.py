"""ResourceDescriptor: validation, the user/msg/HardwareDescriptor round trip, robots, and key names."""

from __future__ import annotations

import pytest

from user.hardware.descriptor import ResourceDescriptor, from_msg, from_robot, to_msg
from user.hardware.errors import InvalidDescriptorError
from user.hardware.keys import descriptor_topic, parse_token_key, token_key
from user.interfaces import default_codec
from user.robots.base import RobotDescriptor

H200_BYTES = 143_771 * 2**20  # beyond 32 bits: the uint64 field must carry it whole


def _through_the_wire(d: ResourceDescriptor) -> ResourceDescriptor:
    codec = default_codec()
    payload = codec.encode(to_msg(d, codec), "user/msg/HardwareDescriptor")
    return from_msg(codec.decode(payload, "user/msg/HardwareDescriptor"))


@pytest.mark.parametrize(
    "descriptor",
    [
        ResourceDescriptor(
            "franka_left",
            "robot",
            model="franka_panda_sim",
            site="lab_a",
            dof=7,
            control_rate_hz=333.3,  # not a float32 value: kept as its shortest decimal form
            cameras=("cam_wrist", "cam_front"),
            properties={"embodiment_id": "1", "controller": "cartesian_impedance"},
        ),
        ResourceDescriptor("cam_wrist", "camera", model="realsense_d435", site="lab_a", control_rate_hz=30.0),
        ResourceDescriptor(
            "cloud_gpu_0", "accelerator", model="NVIDIA H200", site="cloud", memory_bytes=H200_BYTES, compute_units=132
        ),
    ],
    ids=["robot", "camera", "accelerator"],
)
def test_descriptor_survives_the_message_round_trip(descriptor: ResourceDescriptor) -> None:
    assert _through_the_wire(descriptor) == descriptor


def test_message_carries_site_in_header_and_sorted_properties() -> None:
    d = ResourceDescriptor("r", "robot", site="lab_b", properties={"b": "2", "a": "1"})
    msg = to_msg(d, default_codec(), stamp_ns=1_500_000_000)
    assert msg.header.frame_id == "lab_b"
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (1, 500_000_000)
    assert [(kv.key, kv.value) for kv in msg.properties] == [("a", "1"), ("b", "2")]


def test_robot_descriptor_becomes_a_robot_resource() -> None:
    robot = RobotDescriptor(
        robot_id="arx_right",
        model="arx_l5",
        dof=6,
        control_rate_hz=10.0,
        embodiment_id=2,
        cameras=("cam_r",),
        site="lab_b",
    )
    d = from_robot(robot)
    assert (d.resource_id, d.kind, d.model, d.site, d.dof, d.control_rate_hz) == (
        "arx_right",
        "robot",
        "arx_l5",
        "lab_b",
        6,
        10.0,
    )
    assert d.cameras == ("cam_r",)
    assert d.properties == {"embodiment_id": "2"}
    assert _through_the_wire(d) == d


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"resource_id": "gpu0@cloud", "kind": "accelerator"}, "invalid resource id 'gpu0@cloud'"),
        ({"resource_id": "", "kind": "robot"}, "invalid resource id ''"),
        ({"resource_id": "x", "kind": "lidar"}, "kind 'lidar' is not one of robot, camera, accelerator"),
        ({"resource_id": "x", "kind": "robot", "dof": -1}, "dof must be an integer in 0..65535"),
        ({"resource_id": "x", "kind": "robot", "dof": 70_000}, "dof must be an integer in 0..65535"),
        ({"resource_id": "x", "kind": "robot", "control_rate_hz": -5.0}, "control_rate_hz must be"),
        ({"resource_id": "x", "kind": "accelerator", "memory_bytes": 2**64}, "memory_bytes must be"),
    ],
)
def test_invalid_descriptors_are_refused_with_a_reason(kwargs: dict[str, object], fragment: str) -> None:
    with pytest.raises(InvalidDescriptorError, match=fragment.replace(".", r"\.").replace("(", r"\(")):
        ResourceDescriptor(**kwargs)  # type: ignore[arg-type]


def test_a_message_with_an_unknown_kind_is_refused() -> None:
    codec = default_codec()
    msg = to_msg(ResourceDescriptor("x", "robot"), codec)
    msg.kind = "toaster"
    with pytest.raises(InvalidDescriptorError, match="toaster"):
        from_msg(msg)


def test_topic_and_token_names() -> None:
    assert descriptor_topic("franka_left") == "/hardware/franka_left/descriptor"
    key = token_key("robot", "franka_left")
    assert key == "@user/hw/robot/franka_left"
    name = parse_token_key(key)
    assert name is not None and (name.kind, name.resource_id) == ("robot", "franka_left")
    assert parse_token_key("@user/hw/lidar/x") is None
    assert parse_token_key("@user/hw/robot/x/extra") is None
    assert parse_token_key("@user/runtime/x") is None
    with pytest.raises(InvalidDescriptorError):
        descriptor_topic("a/b")
