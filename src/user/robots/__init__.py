"""Robots behind one interface: simulated MuJoCo arms, real drivers, any gymnasium environment."""

from user.robots.base import (
    ActionSpace,
    ArmState,
    NotConnectedError,
    Robot,
    RobotDescriptor,
    RobotError,
    StepResult,
)

__all__ = ["ActionSpace", "ArmState", "NotConnectedError", "Robot", "RobotDescriptor", "RobotError", "StepResult"]
