"""The rclpy side of the Bus's own types: importing rclpy (with a clear error without it), spinning an
executor, the handle of an rclpy entity, QoS profiles, parameter descriptors, and the hidden topic names that
stand for presence tokens.

Imported only by the adapter (`ros_bus`, `ros_services`, `ros_node_params`, `ros_runtime`); rclpy itself is
imported inside the functions, so importing this module needs no ROS.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from user.bus.base import QoS
from user.bus.ros_params import ParamKind, RosParam, check_finite_bounds

TOKEN_TOPIC_PREFIX = "/_user/alive/k"  # presence tokens become publishers on these (hidden) topics


class RosUnavailableError(ImportError):
    """rclpy cannot be imported: ROS 2 is not installed or not sourced."""


def require_rclpy() -> Any:
    """Import rclpy, or explain how to get it (or how to do without it)."""
    try:
        import rclpy
        import rclpy.callback_groups
        import rclpy.executors
        import rclpy.node
        import rclpy.parameter
    except ImportError as exc:
        raise RosUnavailableError(
            "the ROS 2 runtime needs rclpy (ROS 2 Humble): `source /opt/ros/humble/setup.bash` first, "
            "or run the same nodes without ROS: `user bringup CONFIG` / `user node KIND`"
        ) from exc
    return rclpy


def spin(executor: Any) -> None:
    """Spin `executor` until it is shut down, or its context is."""
    from rclpy.executors import ExternalShutdownException

    with contextlib.suppress(ExternalShutdownException):  # the context was shut down under us
        executor.spin()


class RosHandle:
    """The Bus's handle of an rclpy entity: `close()` destroys it, once."""

    def __init__(self, destroy: Callable[[], Any]) -> None:
        self._destroy: Callable[[], Any] | None = destroy

    def close(self) -> None:
        if self._destroy is not None:
            destroy, self._destroy = self._destroy, None
            destroy()


def token_topic(key: str) -> str:
    """A valid ROS topic name standing for a liveliness key (hex keeps any character legal)."""
    return TOKEN_TOPIC_PREFIX + key.encode().hex()


def token_key(topic: str) -> str:
    return bytes.fromhex(topic[len(TOKEN_TOPIC_PREFIX) :]).decode()


def ros_qos(qos: QoS) -> Any:
    """The rclpy QoS profile of a Bus QoS.

    A reliable, not latched topic keeps all history (KEEP_ALL), so a burst is delivered whole, as Zenoh's
    congestion control BLOCK does, instead of only its last `depth` messages; latched and best-effort
    topics keep the last `depth`. (History does not take part in QoS matching, so these subscriptions
    still match publishers of other packages, e.g. realsense2_camera's sensor-data images.)"""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    keep_all = qos.reliable and not qos.latched
    return QoSProfile(
        history=HistoryPolicy.KEEP_ALL if keep_all else HistoryPolicy.KEEP_LAST,
        depth=qos.depth,
        reliability=ReliabilityPolicy.RELIABLE if qos.reliable else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if qos.latched else DurabilityPolicy.VOLATILE,
    )


def ros_param_type(kind: ParamKind) -> Any:
    from rclpy.parameter import Parameter

    return Parameter.Type.STRING if kind is ParamKind.YAML else Parameter.Type[kind.name]


def parameter_descriptor(param: RosParam) -> Any:
    """The rcl_interfaces ParameterDescriptor `ros2 param describe` shows for a setting."""
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor

    descriptor = ParameterDescriptor(
        name=param.name,
        type=ros_param_type(param.kind).value,
        description=param.description,
        additional_constraints=param.constraints,
        read_only=param.read_only,
        dynamic_typing=False,
    )
    if param.minimum is not None or param.maximum is not None:
        lo, hi = check_finite_bounds(param)
        if param.kind is ParamKind.INTEGER:
            descriptor.integer_range = [IntegerRange(from_value=int(lo), to_value=int(hi), step=0)]
        else:
            descriptor.floating_point_range = [FloatingPointRange(from_value=float(lo), to_value=float(hi), step=0.0)]
    return descriptor
