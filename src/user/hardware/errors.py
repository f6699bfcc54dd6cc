"""Errors of the hardware layer, each with a message a robot operator can act on."""

from __future__ import annotations


class HardwareError(RuntimeError):
    """Base class of hardware-layer errors."""


class InvalidDescriptorError(HardwareError, ValueError):
    """A resource descriptor has a missing or out-of-range field."""


class ResourcesNotFoundError(HardwareError, TimeoutError):
    """Resources waited for were not announced (alive, with a descriptor) before the deadline."""

    def __init__(self, missing: list[str], timeout_s: float) -> None:
        self.missing = sorted(missing)
        self.timeout_s = timeout_s
        super().__init__(
            f"hardware not found within {timeout_s:.1f} s: {', '.join(self.missing)}. "
            "Check that the nodes announcing them run and reach the same Zenoh router "
            "(`user hardware list` shows what is announced)."
        )
