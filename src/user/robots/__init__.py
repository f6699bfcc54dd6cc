"""Robots behind one interface: simulated MuJoCo arms, real drivers, any gymnasium environment.

Heavy drivers (MuJoCo, gymnasium, libfranka) are imported from their own modules, not from here.
"""

from user.robots.arm import ArmRobot, EStopError
from user.robots.base import (
    ActionSpace,
    ArmState,
    NotConnectedError,
    Robot,
    RobotDescriptor,
    RobotError,
    StepResult,
)
from user.robots.safety import SafetyConfig, SafetyFilter
from user.robots.watchdog import ActionWatchdog

__all__ = [
    "ActionSpace",
    "ActionWatchdog",
    "ArmRobot",
    "ArmState",
    "EStopError",
    "NotConnectedError",
    "Robot",
    "RobotDescriptor",
    "RobotError",
    "SafetyConfig",
    "SafetyFilter",
    "StepResult",
]
