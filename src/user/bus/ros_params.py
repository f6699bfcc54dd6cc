"""A node's settings as ROS 2 parameters: one typed, described parameter per leaf setting, dotted names.

`learning.sac.gamma` is the `gamma` field of the `sac` section of the `learning` section. Each parameter
has the ROS type its field's annotation calls for (bool, integer, double, string and their arrays); a
setting ROS parameters cannot type (a mapping, a list of pairs, `Any`) is one string parameter holding
YAML. A setting is read-only unless its field says `live=True` (see `user.config.strict.setting`).

Nothing here imports rclpy: the rclpy adapter (`user.bus.ros_node_params`) declares `RosParam`s with descriptors,
and the ROS launch file encodes a deployment's values with `encode`, both from the same table.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import types
import typing
from dataclasses import dataclass
from typing import Any

import yaml

from user.config.flat import unflatten
from user.config.strict import ConfigError, default_of, from_mapping, selection_of

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class ParamKind(enum.Enum):
    """ROS 2 parameter types (rcl_interfaces/msg/ParameterType), plus YAML held in a string."""

    BOOL = "bool"
    INTEGER = "integer"
    DOUBLE = "double"
    STRING = "string"
    BOOL_ARRAY = "bool_array"
    INTEGER_ARRAY = "integer_array"
    DOUBLE_ARRAY = "double_array"
    STRING_ARRAY = "string_array"
    YAML = "yaml"  # a string parameter whose text is YAML (mappings, lists of lists, free-form values)

    @property
    def is_array(self) -> bool:
        return self.value.endswith("_array")


_SCALARS: dict[type, ParamKind] = {
    bool: ParamKind.BOOL,
    int: ParamKind.INTEGER,
    float: ParamKind.DOUBLE,
    str: ParamKind.STRING,
}
_ARRAY_OF = {
    ParamKind.BOOL: ParamKind.BOOL_ARRAY,
    ParamKind.INTEGER: ParamKind.INTEGER_ARRAY,
    ParamKind.DOUBLE: ParamKind.DOUBLE_ARRAY,
    ParamKind.STRING: ParamKind.STRING_ARRAY,
}
_ELEMENT_OF = {array: element for element, array in _ARRAY_OF.items()}


@dataclass(frozen=True)
class RosParam:
    """One ROS parameter standing for one leaf setting."""

    name: str  # dotted path of the setting, e.g. "learning.sac.gamma"
    kind: ParamKind  # its ROS type
    default: Any  # the default in ROS form; None: declared without a value (the default is None or empty)
    description: str  # the field's doc
    read_only: bool  # False only for settings marked live (applied by the node while it runs)
    constraints: str = ""  # human-readable bounds and choices, shown by `ros2 param describe`
    minimum: float | None = None  # numeric bounds (ROS integer/floating-point ranges)
    maximum: float | None = None


def _unwrap_optional(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _scalar_kind(tp: Any) -> ParamKind | None:
    if typing.get_origin(tp) is typing.Literal:
        kinds = {_SCALARS.get(type(a)) for a in typing.get_args(tp)}
        return kinds.pop() if len(kinds) == 1 else None
    return _SCALARS.get(tp) if isinstance(tp, type) else None


def kind_of(tp: Any) -> ParamKind:
    """The ROS parameter kind of a (non-dataclass) field annotation."""
    tp = _unwrap_optional(tp)
    scalar = _scalar_kind(tp)
    if scalar is not None:
        return scalar
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (list, tuple) and args:
        items = [a for a in args if a is not Ellipsis]
        kinds = {_scalar_kind(a) for a in items}
        if len(kinds) == 1 and None not in kinds:
            return _ARRAY_OF[kinds.pop()]  # type: ignore[index]
    return ParamKind.YAML


def _plain(value: Any) -> Any:
    """Tuples as lists, recursively (what YAML and ROS arrays hold)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def to_ros(kind: ParamKind, value: Any, name: str) -> Any:
    """A setting's value in the form a ROS parameter of `kind` holds (None stays None)."""
    if value is None:
        return None
    if kind is ParamKind.YAML:
        return yaml.safe_dump(_plain(value), default_flow_style=True, sort_keys=False, width=10_000).strip()
    if kind.is_array:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name}: expected a list, got {value!r}")
        return [to_ros(_ELEMENT_OF[kind], v, name) for v in value]
    if kind is ParamKind.DOUBLE and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def from_ros(kind: ParamKind, value: Any, name: str) -> Any:
    """A ROS parameter's value as setting data for `from_mapping` (YAML text parsed)."""
    if value is None:
        return None
    if kind is ParamKind.YAML:
        if not isinstance(value, str):
            return value  # already structured (e.g. a list given on the command line)
        try:
            return yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{name}: not valid YAML: {exc}") from None
    if kind.is_array:
        return [from_ros(_ELEMENT_OF[kind], v, name) for v in value] if isinstance(value, (list, tuple)) else value
    return to_ros(kind, value, name)  # an integer given for a double parameter becomes a double


def _bounds(f: dataclasses.Field[Any], kind: ParamKind) -> tuple[str, float | None, float | None]:
    meta = f.metadata
    parts = []
    if "choices" in meta:
        parts.append("one of: " + ", ".join(map(str, meta["choices"])))
    lo, hi = meta.get("min"), meta.get("max")
    if kind in (ParamKind.INTEGER, ParamKind.DOUBLE):  # ROS shows numeric bounds as the parameter's range
        return "; ".join(parts), lo, hi
    parts += [f"min {lo}"] if lo is not None else []
    parts += [f"max {hi}"] if hi is not None else []
    return "; ".join(parts), None, None


def _literal_choices(tp: Any) -> str:
    tp = _unwrap_optional(tp)
    if typing.get_origin(tp) is typing.Literal:
        return "one of: " + ", ".join(map(str, typing.get_args(tp)))
    return ""


def _only_when(f: dataclasses.Field[Any], outer: str) -> str:
    """'only with algorithm rlpd' for a setting of one kind (or inside a section of one kind)."""
    selection = selection_of(f)
    if selection is None:
        return outer
    return f"only with {selection[0]} " + " or ".join(selection[1])


def ros_params(spec: type[Any], prefix: str = "", default: Any = None, only_when: str = "") -> list[RosParam]:
    """Every leaf setting of dataclass `spec` as a ROS parameter, in field order."""
    hints = typing.get_type_hints(spec)
    out: list[RosParam] = []
    for f in dataclasses.fields(spec):
        if not f.init:
            continue
        tp = hints[f.name]
        value = getattr(default, f.name) if default is not None else default_of(f)
        name = f"{prefix}{f.name}"
        inner = _unwrap_optional(tp)
        if dataclasses.is_dataclass(inner) and isinstance(inner, type):
            out.extend(ros_params(inner, f"{name}.", value, _only_when(f, only_when)))
            continue
        kind = kind_of(tp)
        constraints, lo, hi = _bounds(f, kind)
        constraints = "; ".join(c for c in (_only_when(f, only_when), _literal_choices(tp), constraints) if c)
        ros_default = to_ros(kind, value, name)
        if kind.is_array and ros_default == []:
            ros_default = None  # ROS infers no type from an empty list: declared typed, without a value
        out.append(
            RosParam(
                name=name,
                kind=kind,
                default=ros_default,
                description=str(f.metadata.get("doc", "")) + (" (YAML)" if kind is ParamKind.YAML else ""),
                read_only=not f.metadata.get("live", False),
                constraints=constraints,
                minimum=lo,
                maximum=hi,
            )
        )
    return out


def _leaves(spec: type[Any], values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """The leaf settings present in `values` (nested data of `spec`), by dotted name."""
    hints = typing.get_type_hints(spec)
    fields = {f.name: f for f in dataclasses.fields(spec) if f.init}
    out: dict[str, Any] = {}
    for key, value in values.items():
        inner = _unwrap_optional(hints[fields[key].name])
        if dataclasses.is_dataclass(inner) and isinstance(inner, type) and isinstance(value, dict):
            out.update(_leaves(inner, value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def encode(spec: type[Any], values: dict[str, Any], *, where: str) -> dict[str, Any]:
    """The settings given in `values` (nested, as in a deployment file) as flat ROS parameter values.

    Checked first with `from_mapping`, so a bad value fails here, before any process starts. A null
    cannot travel as a ROS parameter; it is left out when it is the default, and refused otherwise.
    """
    from_mapping(spec, values, where=where)
    table = {p.name: p for p in ros_params(spec)}
    out: dict[str, Any] = {}
    for name, value in _leaves(spec, values).items():
        param = table[name]
        ros_value = to_ros(param.kind, value, name)
        if param.kind.is_array and ros_value == []:
            ros_value = None
        if ros_value is None:
            if param.default is not None:
                raise ConfigError(
                    f"{where}: {name}: an empty or null value cannot be passed as a ROS 2 parameter "
                    f"(its default is {param.default!r}); give a value"
                )
            continue
        out[name] = ros_value
    return out


def decode(params: list[RosParam], values: dict[str, Any]) -> dict[str, Any]:
    """Flat ROS parameter values (by dotted name) as nested setting data for `from_mapping`.

    Names that are not parameters of the spec are kept, so `from_mapping` reports them as unknown keys.
    """
    table = {p.name: p for p in params}
    data: dict[str, Any] = {}
    for name, value in values.items():
        param = table.get(name)
        converted = value if param is None else from_ros(param.kind, value, name)
        if converted is not None:
            data[name] = converted
    return unflatten(data)


def check_finite_bounds(param: RosParam) -> tuple[float, float]:
    """The numeric range of a parameter with open ends filled in (ROS ranges need both ends)."""
    lo = param.minimum if param.minimum is not None else (-math.inf if param.kind is ParamKind.DOUBLE else INT64_MIN)
    hi = param.maximum if param.maximum is not None else (math.inf if param.kind is ParamKind.DOUBLE else INT64_MAX)
    return lo, hi
