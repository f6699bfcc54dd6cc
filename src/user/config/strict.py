"""Build typed dataclasses from YAML/dict data, refusing anything that does not fit.

Every config in the project goes through `from_mapping`: an unknown key, a wrong type or a failed
validation is a `ConfigError` naming the file and the path of the offending key, so a setting can never
be silently ignored because it sits under the wrong key.

One of several kinds: a discriminator field (`algorithm`, `policy_kind`, `source`, `driver`) selects a kind,
and the fields that only one kind uses say so with `setting(..., when=("algorithm", "rlpd"))`. Such a field
given while another kind is selected is an error naming the key and the kind that is selected, never a
value quietly left unused; `inactive_settings` names the fields the selected kinds leave out. A section whose
class the selected kind decides, and a mapping of named sections, are `user.config.sections`; the help
listing of every leaf setting is `user.config.describe`.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar

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
        return build_at(tp, value, where)
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


class _Section(Protocol):
    """What `user.config.sections` keeps in a section field's metadata (under SECTION)."""

    def check_resolved(self, value: Any, where: str) -> None: ...


SECTION = "section"  # metadata key of a section field (`user.config.sections`): its data is parsed by its class


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
    section: Any = None,
) -> Any:
    """A dataclass field with a description and optional bounds, checked when loaded from data.

    `live=True` marks a setting a running node applies when it changes (a ROS parameter that is not
    read-only); every other setting is fixed for the life of the node. `when=(field, kinds)` marks a
    setting of some kinds only: giving it while the dataclass's `field` selects another kind is an error.
    `section` (`user.config.sections.KindSection` or `NamedSections`) makes the field a section whose class the
    other settings decide; the dataclass then calls `resolve_sections(self)` first in its `__post_init__`.
    Mutable defaults (lists, dicts) are copied per instance.
    """
    meta: dict[str, Any] = {"doc": doc}
    if section is not None:
        meta[SECTION] = section
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


def unknown_key(key: str, known: list[str]) -> str:
    """The message for an unknown `key`: the nearest known key when one is close (a typo), then all of them."""
    near = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    return f"unknown key {key!r}{hint} (known keys: {', '.join(sorted(known))})"


def build_at(cls: type[Any], value: Any, where: str, fixed: Mapping[str, tuple[Any, str]] | None = None) -> Any:
    """`cls` from the mapping `value`, errors naming the key path from `where` on (`from_mapping` adds the file).

    `fixed` gives fields their value from elsewhere (name -> (value, the path an error names)): the settings around
    a section that the section's class shares (`user.config.sections.KindSection`)."""
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise _at(where, f"expected a mapping for {cls.__name__}, got {type(value).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = [str(k) for k in value if k not in fields]
    if unknown:
        raise _at(where, unknown_key(unknown[0], list(fields)))
    given = {name: (data, _key(where, name)) for name, data in value.items()}
    kwargs = _field_values(cls, fields, {**(fixed or {}), **given}, where)
    _check_selected(cls, fields, [str(k) for k in value], kwargs, where)
    try:
        built = cls(**kwargs)
    except (ValueError, TypeError) as exc:  # validation in __post_init__ (ConfigError is a ValueError)
        raise _at(where, str(exc)) from exc
    for name, f in fields.items():
        section: _Section | None = f.metadata.get(SECTION)
        if section is not None:
            section.check_resolved(getattr(built, name), _key(where, name))
    return built


def _field_values(
    cls: type[Any], fields: Mapping[str, dataclasses.Field[Any]], given: Mapping[str, tuple[Any, str]], where: str
) -> dict[str, Any]:
    """The constructor arguments of `cls` from the data `given` (name -> (data, its key path)), converted and checked;
    a section's data is passed on as it is (its class depends on the other settings: parsed in `__post_init__`)."""
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        if name in given:
            data, path = given[name]
            kwargs[name] = data if SECTION in f.metadata else _convert(hints[name], data, path)
            if SECTION not in f.metadata:
                _check_bounds(f, kwargs[name], path)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise _at(_key(where, name), "required key is missing")
    return kwargs


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
            raise _at(_key(where, key), not_selected(selector, kinds, selected))


def not_selected(selector: str, kinds: tuple[str, ...], selected: Any) -> str:
    """The message for a setting of `kinds` given while `selector` selects another kind."""
    owners = " or ".join(repr(k) for k in kinds)
    return (
        f"a setting of {selector} {owners}, but {selector} {selected!r} is selected "
        f"(remove it, or select {selector}: {kinds[0]})"
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
