"""The `Bus`: publish, subscribe, timers, services, parameters and liveliness on Zenoh or rclpy."""

from user.bus.base import (
    BEST_EFFORT,
    LATCHED,
    RELIABLE,
    Bus,
    BusClosedError,
    BusError,
    QoS,
    RouterUnreachableError,
    ServiceError,
    ServiceTimeoutError,
)

__all__ = [
    "BEST_EFFORT",
    "LATCHED",
    "RELIABLE",
    "Bus",
    "BusClosedError",
    "BusError",
    "QoS",
    "RouterUnreachableError",
    "ServiceError",
    "ServiceTimeoutError",
]
