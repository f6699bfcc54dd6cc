"""The one error of the human input devices, with a message naming the device (and the fix, where there is one)."""

from __future__ import annotations


class DeviceError(RuntimeError):
    """A human input device could not be opened or read."""
