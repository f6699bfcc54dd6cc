"""A node's settings while it runs: their current values as flat ROS-style parameters, and live changes.

Both runtimes keep one `ParameterStore` per node. A change names parameters by their dotted names; it is
refused when a named parameter is unknown or read-only (every setting not marked `live=True`), when the
new values fail the settings' own checks, or when the node's change handler refuses them. Nothing is
applied from a refused change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from user.bus.ros_params import RosParam, decode, ros_params
from user.config.strict import ConfigError, from_mapping, inactive_settings

P = TypeVar("P")

ChangeHandler = Callable[[Any], None]  # gets the node's whole new settings object; raises ConfigError to refuse


class ParameterRefusedError(ConfigError):
    """A parameter change was refused; the message says which parameter and why."""


class ParameterStore(Generic[P]):
    """The settings of one node (dataclass `spec`) and how changes to them are checked and applied."""

    def __init__(self, spec: type[P], values: P, on_change: ChangeHandler | None, where: str) -> None:
        self.spec = spec
        self.values = values
        self.where = where  # e.g. "parameters of node 'talker'", prefixes refusals
        self._on_change = on_change
        self.table: dict[str, RosParam] = {p.name: p for p in ros_params(spec)}

    def current(self) -> dict[str, Any]:
        """Every parameter's current value in ROS form (None: not set)."""
        return {p.name: p.default for p in ros_params(self.spec, default=self.values)}

    def check(self, changes: Mapping[str, Any]) -> P:
        """The settings object `changes` would give, or `ParameterRefusedError`."""
        for name in changes:
            param = self.table.get(name)
            if param is None:
                raise ParameterRefusedError(f"{self.where}: no parameter {name!r}")
            if param.read_only:
                raise ParameterRefusedError(
                    f"{self.where}: {name} is read-only while the node runs; "
                    "change it in the deployment file and restart the node"
                )
            if self._on_change is None:
                raise ParameterRefusedError(f"{self.where}: this node applies no changes while it runs")
        inactive = inactive_settings(self.values)  # settings of kinds not selected: given back, they are refused
        current = {
            k: v for k, v in self.current().items() if not any(k == n or k.startswith(f"{n}.") for n in inactive)
        }
        merged = {**current, **changes}
        try:
            return from_mapping(self.spec, decode(list(self.table.values()), merged), where=self.where)
        except ConfigError as exc:
            raise ParameterRefusedError(str(exc)) from None

    def apply(self, changes: Mapping[str, Any]) -> P:
        """Check `changes`, hand the new settings to the node, keep them; raises `ParameterRefusedError`."""
        new = self.check(changes)
        assert self._on_change is not None  # check() refuses changes without a handler
        try:
            self._on_change(new)
        except ConfigError as exc:
            raise ParameterRefusedError(f"{self.where}: {exc}") from None
        self.values = new
        return new
