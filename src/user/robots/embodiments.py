"""Embodiment ids: one per arm type, carried in every observation (`Observation.embodiment_id`) so that one
policy serving several arm types can tell them apart. Sim and real arms of one type share an id, so a policy
trained in simulation sees the same id on the real arm."""

from __future__ import annotations

from user.robots.base import RobotDescriptor

GENERIC = 0  # no arm (gym environments) or an arm type not listed
FRANKA = 1  # Franka Emika Panda / FR3, 7 joints
ARX = 2  # ARX L5 / X5, 6 joints

BY_ARM = {"franka": FRANKA, "arx": ARX}


def embodiment_of(arm: str) -> int:
    """The id of an arm family ("franka", "arx", or a model name starting with one), GENERIC otherwise."""
    name = arm.lower()
    for family, number in BY_ARM.items():
        if name.startswith(family):
            return number
    return GENERIC


def franka_descriptor(robot_id: str, model: str, control_rate_hz: float, site: str) -> RobotDescriptor:
    """What a real Franka arm (7 joints) announces, whichever driver reaches it (libfranka or franka_ros2)."""
    return RobotDescriptor(
        robot_id=robot_id, model=model, dof=7, control_rate_hz=control_rate_hz, site=site, embodiment_id=FRANKA
    )
