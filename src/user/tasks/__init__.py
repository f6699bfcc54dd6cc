"""Manipulation tasks modelled on the RLinf-USER paper, arm-independent, with scripted experts.

Peg insertion (precision), pick-and-place between two trays, and multi-colour button press. A task adds
its objects to a MuJoCo scene, draws a seeded random start, reads object states from the simulation,
scores them (dense reward, success, failure) and has a scripted expert acting in the normalised
Cartesian action space of `user.robots.arm.ArmRobot`.

Importing this package sets MUJOCO_GL=egl when unset (as `user.sim` does), since it imports mujoco
and MuJoCo picks its OpenGL backend at import time; headless rendering needs egl or osmesa.
"""

import os

os.environ.setdefault("MUJOCO_GL", "egl")

from user.tasks.base import (
    TOOL_DOWN,
    ActionScale,
    ObjectState,
    Task,
    TaskError,
    TaskStart,
    TaskState,
    TaskWorld,
)
from user.tasks.button_press import ButtonPress, ButtonPressConfig
from user.tasks.peg_insertion import PegInsertion, PegInsertionConfig
from user.tasks.pick_place import PickPlace, PickPlaceConfig
from user.tasks.registry import TASKS, make_task

__all__ = [
    "TASKS",
    "TOOL_DOWN",
    "ActionScale",
    "ButtonPress",
    "ButtonPressConfig",
    "ObjectState",
    "PegInsertion",
    "PegInsertionConfig",
    "PickPlace",
    "PickPlaceConfig",
    "Task",
    "TaskError",
    "TaskStart",
    "TaskState",
    "TaskWorld",
    "make_task",
]
