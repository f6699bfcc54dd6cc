"""Build typed dataclasses from YAML/dict data, refusing anything that does not fit.

Every config in the project goes through `from_mapping`: an unknown key, a wrong type or a failed
validation is a `ConfigError` naming the file and the path of the offending key, so a setting can never
be silently ignored because it sits under the wrong key.

One of several kinds: a discriminator field (`algorithm`, `policy_kind`, `source`, `driver`) selects a kind,
and the fields that only one kind uses say so with `setting(..., when=("algorithm", "rlpd"))`. Such a field
given while another kind is selected is an error naming the key and the kind that is selected, never a
value quietly left unused; `inactive_settings` names the fields the selected kinds leave out.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration value is missing, unknown, mistyped or invalid. The message names where."""


def load_yaml(path: str | Path) -> Any:
    """Read a YAML file; an unreadable file, bytes that are not UTF-8 text or a syntax error are one `ConfigError`
    line that names the file (and where in it)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read config file ({exc.strerror or exc})") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"{p}: not UTF-8 text: byte 0x{data[exc.start]:02x} at line {line} (offset {exc.start}); "
            "save the file as UTF-8"
        ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML: {_yaml_problem(exc)}") from None


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error in one line: what is wrong and where (PyYAML's own text spans several lines)."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}"
        context = f" ({exc.context})" if exc.context else ""
        return f"{exc.problem}{context} at {where}"
    return " ".join(str(exc).split())


def from_mapping(cls: type[T], data: Any, *, where: str) -> T:
    """Build dataclass `cls` from `data`; `where` (e.g. the file name) prefixes every error message,
    followed by the path of the offending key: "config/a.yaml: nodes[0].params: unknown key 'x' ..."."""
    try:
        return typing.cast(T, _convert(cls, data, ""))
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}" if where else str(exc)) from None


def _at(path: str, message: str) -> ConfigError:
    return ConfigError(f"{path}: {message}" if path else message)


def _key(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _convert(tp: Any, value: Any, where: str) -> Any:
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _build_dataclass(tp, value, where)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin is typing.Union or origin is types.UnionType:
        return _convert_union(args, value, where)
    if origin is typing.Literal:
        if value not in args:
            raise _at(where, f"{value!r} is not one of {', '.join(repr(a) for a in args)}")
        return value
    if origin in (list, tuple) or tp in (list, tuple):
        return _convert_sequence(tp, origin, args, value, where)
    if origin is dict or tp is dict:
        if not isinstance(value, Mapping):
            raise _at(where, f"expected a mapping, got {type(value).__name__}")
        vt = args[1] if args else Any
        return {str(k): _convert(vt, v, _key(where, str(k))) for k, v in value.items()}
    return _convert_scalar(tp, value, where)


def _convert_union(args: tuple[Any, ...], value: Any, where: str) -> Any:
    if value is None:
        if type(None) in args:
            return None
        raise _at(where, "a value is required")
    errors = []
    for arg in args:
        if arg is type(None):
            continue
        try:
            return _convert(arg, value, where)
        except ConfigError as exc:
            errors.append(str(exc))
    raise ConfigError(errors[0] if len(errors) == 1 else f"{where}: {value!r} fits none of the allowed types")


def _convert_sequence(tp: Any, origin: Any, args: tuple[Any, ...], value: Any, where: str) -> Any:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise _at(where, f"expected a list, got {type(value).__name__}")
    if (origin or tp) is tuple and args and args[-1] is not Ellipsis:
        if len(args) != len(value):
            raise _at(where, f"expected {len(args)} items, got {len(value)}")
        return tuple(_convert(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value, strict=True)))
    item_tp = args[0] if args else Any
    items = [_convert(item_tp, v, f"{where}[{i}]") for i, v in enumerate(value)]
    return tuple(items) if (origin or tp) is tuple else items


def _convert_scalar(tp: Any, value: Any, where: str) -> Any:
    if tp is bool:
        if not isinstance(value, bool):
            raise _at(where, f"expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _at(where, f"expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _at(where, f"expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise _at(where, f"expected a string, got {value!r}")
        return value
    if isinstance(tp, type) and isinstance(value, tp):
        return value
    raise _at(where, f"cannot use {value!r} as {getattr(tp, '__name__', tp)}")


def _check_bounds(f: dataclasses.Field[Any], value: Any, where: str) -> None:
    """Apply the `min`, `max` and `choices` a field declares in its metadata (see `setting`)."""
    meta = f.metadata
    if "min" in meta and value < meta["min"]:
        raise _at(where, f"{value!r} is below the minimum {meta['min']!r}")
    if "max" in meta and value > meta["max"]:
        raise _at(where, f"{value!r} is above the maximum {meta['max']!r}")
    if "choices" in meta and value not in meta["choices"]:
        raise _at(where, f"{value!r} is not one of {', '.join(map(repr, meta['choices']))}")


def setting(
    default: Any,
    doc: str,
    *,
    min: Any = None,
    max: Any = None,
    choices: tuple[Any, ...] | None = None,
    live: bool = False,
    when: tuple[str, str | tuple[str, ...]] | None = None,
) -> Any:
    """A dataclass field with a description and optional bounds, checked when loaded from data.

    `live=True` marks a setting a running node applies when it changes (a ROS parameter that is not
    read-only); every other setting is fixed for the life of the node. `when=(field, kinds)` marks a
    setting of some kinds only: giving it while the dataclass's `field` selects another kind is an error.
    Mutable defaults (lists, dicts) are copied per instance.
    """
    meta: dict[str, Any] = {"doc": doc}
    if live:
        meta["live"] = True
    if when is not None:
        selector, kinds = when
        meta["when"] = (selector, (kinds,) if isinstance(kinds, str) else tuple(kinds))
    if min is not None:
        meta["min"] = min
    if max is not None:
        meta["max"] = max
    if choices is not None:
        meta["choices"] = choices
    if isinstance(default, (list, dict, set)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def describe_settings(
    cls: type[Any], prefix: str = "", values: Any = None, only: str = ""
) -> list[tuple[str, str, Any, str]]:
    """(name, type, default, description) of each leaf setting of dataclass `cls`, for help output.

    Nested settings are listed one by one under their dotted names, the names ROS parameters have
    (`learning.sac.gamma`: the `gamma` of the `sac` section of `learning`), each with the default its section's
    default gives it. A setting of one kind says so at the end of its description ("[only with learning.algorithm
    sac]"). `values` (a `cls` instance) supplies the defaults of a nested section; `only` its kind condition.
    """
    hints = typing.get_type_hints(cls)
    rows = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        tp, name = hints[f.name], f"{prefix}{f.name}"
        value = getattr(values, f.name) if values is not None else default_of(f)
        selection = selection_of(f)
        condition = f"only with {prefix}{selection[0]} {' or '.join(selection[1])}" if selection else only
        section = _dataclass_in(tp)
        if section is not None:
            rows.extend(describe_settings(section, f"{name}.", value, condition))
            continue
        doc = str(f.metadata.get("doc", "")) + (f" [{condition}]" if condition else "")
        rows.append((name, _type_name(tp), value, doc))
    return rows


def _dataclass_in(tp: Any) -> type[Any] | None:
    """The settings dataclass a field's annotation names (`X` or `X | None`); None for any other type."""
    args = [a for a in typing.get_args(tp) if a is not type(None)] if _is_union(tp) else [tp]
    inner = args[0] if len(args) == 1 else None
    return inner if isinstance(inner, type) and dataclasses.is_dataclass(inner) else None


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def _type_name(tp: Any) -> str:
    """`float`, `int | None`, `Literal['a', 'b']`, `tuple[int, ...]`: an annotation as a reader writes it."""
    return tp.__name__ if isinstance(tp, type) and not typing.get_args(tp) else str(tp).replace("typing.", "")


def unknown_key(key: str, known: list[str]) -> str:
    """The message for an unknown `key`: the nearest known key when one is close (a typo), then all of them."""
    near = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    return f"unknown key {key!r}{hint} (known keys: {', '.join(sorted(known))})"


def _build_dataclass(cls: type[Any], value: Any, where: str) -> Any:
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise _at(where, f"expected a mapping for {cls.__name__}, got {type(value).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = [str(k) for k in value if k not in fields]
    if unknown:
        raise _at(where, unknown_key(unknown[0], list(fields)))
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        sub = _key(where, name)
        if name in value:
            kwargs[name] = _convert(hints[name], value[name], sub)
            _check_bounds(f, kwargs[name], sub)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise _at(sub, "required key is missing")
    _check_selected(cls, fields, [str(k) for k in value], kwargs, where)
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as exc:  # validation in __post_init__ (ConfigError is a ValueError)
        raise _at(where, str(exc)) from exc


def selection_of(f: dataclasses.Field[Any]) -> tuple[str, tuple[str, ...]] | None:
    """(selector field, kinds) of a setting marked `when=...`; None for a setting of every kind."""
    when: tuple[str, tuple[str, ...]] | None = f.metadata.get("when")
    return when


def _selected_kind(fields: Mapping[str, dataclasses.Field[Any]], selector: str, given: Mapping[str, Any]) -> Any:
    if selector in given:
        return given[selector]
    f = fields.get(selector)
    if f is None:
        raise TypeError(f"`when` names {selector!r}, which is no field of the same settings")
    return default_of(f)


def _check_selected(
    cls: type[Any], fields: Mapping[str, dataclasses.Field[Any]], keys: list[str], given: Mapping[str, Any], where: str
) -> None:
    """A key given for a kind that is not the selected one is an error naming it and the selected kind."""
    for key in keys:
        selection = selection_of(fields[key])
        if selection is None:
            continue
        selector, kinds = selection
        selected = _selected_kind(fields, selector, given)
        if selected not in kinds:
            owners = " or ".join(repr(k) for k in kinds)
            raise _at(
                _key(where, key),
                f"a setting of {selector} {owners}, but {selector} {selected!r} is selected "
                f"(remove it, or select {selector}: {kinds[0]})",
            )


def default_of(f: dataclasses.Field[Any]) -> Any:
    """The default value of a dataclass field (a fresh one for a default factory; None when it has none)."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def inactive_settings(values: Any, prefix: str = "") -> list[str]:
    """Dotted names of the settings the selected kinds leave out, in the settings object `values` and the
    settings nested in it: what a round trip of its values (e.g. a ROS parameter change) must not give back."""
    out: list[str] = []
    flds = {f.name: f for f in dataclasses.fields(values) if f.init}
    for name, f in flds.items():
        selection = selection_of(f)
        if selection is not None and getattr(values, selection[0]) not in selection[1]:
            out.append(f"{prefix}{name}")
            continue
        inner = getattr(values, name)
        if dataclasses.is_dataclass(inner) and not isinstance(inner, type):
            out.extend(inactive_settings(inner, f"{prefix}{name}."))
    return out
