"""The hardware layer: robots, cameras and accelerators as announced, discovered and placed resources.

- `descriptor`: what a resource is (`ResourceDescriptor`) and its user/msg/HardwareDescriptor form;
- `accelerators`: the GPUs of this host (`detect_accelerators`), never invented;
- `announce`: `Announcer` makes a resource known (latched descriptor + liveliness token);
- `registry`: `Registry` discovers announced resources and tracks their health;
- `scheduler`: places node groups (robot -> rollout -> learner) on them.
"""

from user.hardware.accelerators import detect_accelerators
from user.hardware.announce import Announcer
from user.hardware.descriptor import ResourceDescriptor, from_msg, from_robot, to_msg
from user.hardware.errors import HardwareError, InvalidDescriptorError, ResourcesNotFoundError
from user.hardware.registry import Registry, ResourceStatus
from user.hardware.scheduler import Assignment, MissingResourceError, Placement, Schedule, place, schedule

__all__ = [
    "Announcer",
    "Assignment",
    "HardwareError",
    "InvalidDescriptorError",
    "MissingResourceError",
    "Placement",
    "Registry",
    "ResourceDescriptor",
    "ResourceStatus",
    "ResourcesNotFoundError",
    "Schedule",
    "detect_accelerators",
    "from_msg",
    "from_robot",
    "place",
    "schedule",
    "to_msg",
]
