"""What a resource (robot, camera, accelerator) is, and its user/msg/HardwareDescriptor form.

The core works with the frozen `ResourceDescriptor`; messages appear only in `to_msg`/`from_msg`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import numpy as np

from user.bus.names import TOKEN_RULE, is_token
from user.hardware.errors import InvalidDescriptorError
from user.interfaces.codec import Codec
from user.interfaces.stamps import header, now_ns
from user.robots.base import RobotDescriptor

MSG_TYPE = "user/msg/HardwareDescriptor"
KEY_VALUE_TYPE = "diagnostic_msgs/msg/KeyValue"

ResourceKind = Literal["robot", "camera", "accelerator"]
RESOURCE_KINDS: tuple[str, ...] = get_args(ResourceKind)

_UINT16_MAX = 2**16 - 1
_UINT32_MAX = 2**32 - 1
_UINT64_MAX = 2**64 - 1


def check_resource_id(resource_id: str) -> str:
    """Return `resource_id` if it can name a resource, else raise `InvalidDescriptorError`.
    A resource id becomes one ROS name token in `/hardware/<id>/descriptor`, so it follows that rule."""
    if not is_token(resource_id):
        raise InvalidDescriptorError(
            f"invalid resource id {resource_id!r}: it {TOKEN_RULE} (it becomes part of the topic "
            "/hardware/<id>/descriptor)"
        )
    return resource_id


def _float32(value: float) -> float:
    """`value` as the message carries it (float32), written back as its shortest decimal form."""
    return float(str(np.float32(value)))


@dataclass(frozen=True)
class ResourceDescriptor:
    """One announced resource. Fields that do not apply to a kind stay at their zero value."""

    resource_id: str  # unique on the network, e.g. "franka_left", "cam_wrist", "cloud_gpu_0"
    kind: ResourceKind  # "robot", "camera" or "accelerator"
    model: str = ""  # e.g. "franka_panda_sim", "realsense_d435", "NVIDIA H200"
    site: str = "local"  # where it lives, e.g. "lab_a", "cloud"
    dof: int = 0  # robots: degrees of freedom (arm joints, or action dimension)
    control_rate_hz: float = 0.0  # robots: control rate; cameras: frame rate (float32 on the wire)
    cameras: tuple[str, ...] = ()  # robots: ids of the attached cameras
    memory_bytes: int = 0  # accelerators: device memory
    compute_units: int = 0  # accelerators: SM / compute unit count (0 when unknown)
    properties: dict[str, str] = field(default_factory=dict)  # anything else, free form

    def __post_init__(self) -> None:
        check_resource_id(self.resource_id)
        if self.kind not in RESOURCE_KINDS:
            raise InvalidDescriptorError(
                f"resource {self.resource_id!r}: kind {self.kind!r} is not one of {', '.join(RESOURCE_KINDS)}"
            )
        _check_range(self.resource_id, "dof", self.dof, _UINT16_MAX)
        _check_range(self.resource_id, "memory_bytes", self.memory_bytes, _UINT64_MAX)
        _check_range(self.resource_id, "compute_units", self.compute_units, _UINT32_MAX)
        if not np.isfinite(self.control_rate_hz) or self.control_rate_hz < 0:
            raise InvalidDescriptorError(
                f"resource {self.resource_id!r}: control_rate_hz must be a finite number >= 0, "
                f"got {self.control_rate_hz!r}"
            )
        object.__setattr__(self, "control_rate_hz", _float32(self.control_rate_hz))
        object.__setattr__(self, "cameras", tuple(self.cameras))
        object.__setattr__(self, "properties", {str(k): str(v) for k, v in self.properties.items()})

    def __hash__(self) -> int:  # properties is a dict; hash what identifies the resource
        return hash((self.resource_id, self.kind, self.site))


def _check_range(resource_id: str, name: str, value: int, maximum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise InvalidDescriptorError(
            f"resource {resource_id!r}: {name} must be an integer in 0..{maximum}, got {value!r}"
        )


def from_robot(robot: RobotDescriptor, **properties: str) -> ResourceDescriptor:
    """The resource descriptor a robot announces; its embodiment id travels as a property."""
    return ResourceDescriptor(
        resource_id=robot.robot_id,
        kind="robot",
        model=robot.model,
        site=robot.site,
        dof=robot.dof,
        control_rate_hz=robot.control_rate_hz,
        cameras=tuple(robot.cameras),
        properties={"embodiment_id": str(robot.embodiment_id), **properties},
    )


def to_msg(descriptor: ResourceDescriptor, codec: Codec, stamp_ns: int | None = None) -> Any:
    """user/msg/HardwareDescriptor for `descriptor`, stamped `stamp_ns` (default: now)."""
    key_value = codec.msg_class(KEY_VALUE_TYPE)
    return codec.msg_class(MSG_TYPE)(
        header=header(now_ns() if stamp_ns is None else stamp_ns, descriptor.site, codec),
        resource_id=descriptor.resource_id,
        kind=descriptor.kind,
        model=descriptor.model,
        site=descriptor.site,
        dof=descriptor.dof,
        control_rate_hz=descriptor.control_rate_hz,
        cameras=list(descriptor.cameras),
        memory_bytes=descriptor.memory_bytes,
        compute_units=descriptor.compute_units,
        properties=[key_value(key=k, value=v) for k, v in sorted(descriptor.properties.items())],
    )


def from_msg(msg: Any) -> ResourceDescriptor:
    """The descriptor carried by a user/msg/HardwareDescriptor; `InvalidDescriptorError` if it is not valid."""
    return ResourceDescriptor(
        resource_id=str(msg.resource_id),
        kind=str(msg.kind),  # type: ignore[arg-type]  # checked in __post_init__
        model=str(msg.model),
        site=str(msg.site),
        dof=int(msg.dof),
        control_rate_hz=float(msg.control_rate_hz),
        cameras=tuple(str(c) for c in msg.cameras),
        memory_bytes=int(msg.memory_bytes),
        compute_units=int(msg.compute_units),
        properties={str(kv.key): str(kv.value) for kv in msg.properties},
    )
