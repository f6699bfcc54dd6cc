"""`RosNodeParameters`: a node's settings declared on its rclpy node as typed, described ROS parameters, and
live changes to them, whether from `Bus.set_parameters` or from `ros2 param set` (both pass rclpy's
set-parameters callback, which the node's `ParameterStore` checks and applies or refuses).

The table of parameters (names, types, descriptions, bounds) is `user.bus.ros_params`, which needs no ROS;
this module puts it on the node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from user.bus.parameters import ParameterRefusedError, ParameterStore
from user.bus.ros_params import RosParam, decode, ros_params
from user.bus.ros_types import parameter_descriptor, require_rclpy, ros_param_type
from user.config.strict import ConfigError, from_mapping

P = TypeVar("P")

# Declared by rclpy itself on every node (Humble: use_sim_time; Jazzy adds the type description service).
ROS_BUILTIN_PARAMETERS = frozenset({"use_sim_time", "start_type_description_service"})


class RosNodeParameters:
    """The declared settings of one rclpy node (none until `declare`)."""

    def __init__(self, node: Any) -> None:
        self.node = node
        self._name = str(node.get_name())
        self._store: ParameterStore[Any] | None = None

    def declare(self, spec: type[P], on_change: Callable[[P], None] | None = None) -> P:
        """Declare each leaf setting as a typed ROS parameter with its descriptor; return the settings.

        The node was made with `automatically_declare_parameters_from_overrides`, so what the launch file or
        `--ros-args -p` gave is declared already (untyped): it is read, checked with the settings' own
        rules, then declared again with its descriptor. A parameter the settings do not know is an error."""
        where = f"parameters of node {self._name!r}"
        table = ros_params(spec)
        given = {
            name: p.value
            for name, p in self.node.get_parameters_by_prefix("").items()
            if name not in ROS_BUILTIN_PARAMETERS
        }
        values = from_mapping(spec, decode(table, given), where=where)  # unknown names fail here
        current = {p.name: p.default for p in ros_params(spec, default=values)}
        for name in given:  # declared from the overrides, untyped: declared again below, typed
            self.node.undeclare_parameter(name)  # (keys of a free-form mapping live in its YAML parameter)
        for param in table:
            self._declare_one(param, current[param.name])
        self._store = ParameterStore(spec, values, on_change, where)
        self.node.add_on_set_parameters_callback(self._on_set_parameters)
        return values

    def _declare_one(self, param: RosParam, value: Any) -> None:
        descriptor = parameter_descriptor(param)
        try:
            if value is None:  # typed, without a value: the setting's default is None or empty
                self.node.declare_parameter(param.name, ros_param_type(param.kind), descriptor, ignore_override=True)
            else:
                self.node.declare_parameter(param.name, value, descriptor, ignore_override=True)
        except Exception as exc:  # rclpy's InvalidParameter* exceptions; the message names the parameter
            raise ConfigError(f"parameters of node {self._name!r}: {param.name}: {exc}") from exc

    def _on_set_parameters(self, parameters: list[Any]) -> Any:
        from rcl_interfaces.msg import SetParametersResult

        if self._store is None:
            return SetParametersResult(successful=True)
        try:
            self._store.apply({p.name: p.value for p in parameters})
        except ParameterRefusedError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    def set(self, changes: Mapping[str, Any]) -> None:
        """Change parameters by dotted name, all or nothing; `ParameterRefusedError` says why not."""
        if self._store is None:
            raise ParameterRefusedError(f"node {self._name!r} has declared no parameters")
        self._store.check(changes)  # the reason in our words before rclpy's
        table = self._store.table
        rclpy = require_rclpy()
        params = [
            rclpy.parameter.Parameter(name, ros_param_type(table[name].kind), value) for name, value in changes.items()
        ]
        result = self.node.set_parameters_atomically(params)
        if not result.successful:
            raise ParameterRefusedError(result.reason)
