"""Typed errors of the MuJoCo simulation layer, each with a message an operator can act on."""

from __future__ import annotations

import logging

import mujoco

from user.robots.base import RobotError

_mujoco_log = logging.getLogger("mujoco")


class SimError(RobotError):
    """Something in the simulated robot went wrong."""


class SimAssetError(SimError):
    """The robot model files could not be found or loaded (is franky-sim installed?)."""


class SimUnstableError(SimError):
    """The physics diverged (NaN or exploding accelerations); the episode must be reset."""


class IkError(SimError):
    """No joint configuration reaches the requested start pose of the tool."""


class RenderError(SimError):
    """A camera could not be set up or rendered (no OpenGL backend for MUJOCO_GL?)."""


def route_mujoco_warnings_to_logging() -> None:
    """Send MuJoCo's warnings to the "mujoco" logger instead of stdout and a MUJOCO_LOG.TXT in the working
    directory. Process-wide; a handler someone else installed is left alone."""
    if mujoco.get_mju_user_warning() is None:
        mujoco.set_mju_user_warning(_log_warning)


def _log_warning(message: str) -> None:
    _mujoco_log.warning("%s", message)
