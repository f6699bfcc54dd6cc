"""The error of the human input devices, with a message naming the device (and the fix, where there is one);
`DeviceNotFoundError` is the kind that says the device is not there at all."""

from __future__ import annotations


class DeviceError(RuntimeError):
    """A human input device could not be opened or read."""


class DeviceNotFoundError(DeviceError):
    """No such device is plugged in (as opposed to one that is there but cannot be opened or read)."""
