"""Logging in the ROS 2 console format: [LEVEL] [seconds] [node]: message."""

from __future__ import annotations

import logging
import sys

# Third-party loggers whose INFO records are notes to their own developers, not to an operator; shown from
# WARNING up unless the level asked for is DEBUG. PyOpenGL (imported by MuJoCo's EGL context, so by every node
# that simulates or renders) logs "No OpenGL_accelerate module loaded" at INFO when its optional C speed-up
# package is absent.
QUIET_BELOW_WARNING = ("OpenGL.acceleratesupport",)


class _RosFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        name = record.name.removeprefix("user.")
        text = f"[{record.levelname}] [{record.created:.6f}] [{name}]: {record.getMessage()}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


def setup_logging(level: str = "INFO") -> None:
    """Send log records to stderr in ROS 2's format (idempotent)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_user_console", False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_RosFormatter())
    handler._user_console = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in QUIET_BELOW_WARNING:
        logging.getLogger(name).setLevel(logging.NOTSET if root.level <= logging.DEBUG else logging.WARNING)
