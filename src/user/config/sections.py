"""Typed sections: settings whose class the other settings decide, parsed into that class when they are loaded.

- `KindSection(kinds)`: one section whose class is the settings class of the kind another field selects, read from a
  table of kinds (`user.config.kinds.Kinds`): the robot node's `hardware` is a `FrankaLibfrankaConfig` with driver
  franka and an `ArxSdkConfig` with driver arx; its `task_params` the config of the task `task` names.
- `NamedSections(cls, key=...)`: a mapping of names to sections of one class, each name filling the field `key`
  (`camera_configs`: camera name -> `CameraConfig`, whose `name` is its key).

A field is made a section with `setting(default, doc, section=...)`, and its dataclass calls `resolve_sections(self)`
first in `__post_init__`. That turns the data given (a mapping from a file or from parameters; None for a section left
out) into settings objects, with the strict loader's rules: an unknown key (with the near match), a wrong type or a
failed check is a `ConfigError` naming the key path (`hardware.safety.workspace_min: ...`). Settings objects given in
code are checked to fit. `user.config.describe` lists every leaf of every kind's class under its dotted name, and
`yaml.safe_dump` writes a section as its data (`user.config.plain`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from user.config.kinds import Kinds, load_attribute
from user.config.plain import dump_as_data
from user.config.strict import SECTION, ConfigError, build_at, not_selected, selection_of, unknown_key

T = TypeVar("T")


@dataclass(frozen=True)
class KindSection:
    """A section whose class is the settings class (`Kinds`) of the kind the field `by` selects.

    `shared` names settings of the dataclass around the section that the section's class has too (a driver's
    `robot_id`, `control_rate_hz`): they are given around it, not in it, and the section gets their values (a key
    given in the section too is refused unless it says the same). A section left out is the selected class's
    defaults, or None when `optional` (the thing then uses its own defaults; an empty mapping counts as left out)."""

    kinds: Kinds[Any]
    by: str = ""  # the field that selects the kind; "" = the table's `what` (e.g. driver)
    shared: tuple[str, ...] = ()
    optional: bool = False

    @property
    def selector(self) -> str:
        return self.by or self.kinds.what

    @property
    def empty(self) -> Any:
        return None

    def resolve(self, owner: Any, name: str, value: Any) -> Any:
        """The settings object of section `name` of `owner` from `value` (its data, a settings object or None)."""
        kind = getattr(owner, self.selector)
        cls = self.kinds.settings_class(kind)
        if cls is None:
            if value is None:
                return None
            having = ", ".join(self.kinds.with_settings())
            raise ConfigError(f"{name}: {self.selector} {kind!r} has no settings here (only {having} have)")
        if self.optional and (value is None or (isinstance(value, Mapping) and not value)):
            return None
        dump_as_data(cls)  # the section is given back as text (a YAML-valued ROS parameter) as its data
        names = {f.name for f in dataclasses.fields(cls) if f.init}
        shared = {key: getattr(owner, key) for key in self.shared if key in names}
        if isinstance(value, cls):
            _check_shared(name, {key: getattr(value, key) for key in shared}, shared)
            return value
        data = _mapping(cls, {} if value is None else value, name)
        unknown = [str(key) for key in data if key not in names]
        if unknown:  # known keys: those of the section itself
            raise ConfigError(f"{name}: {unknown_key(unknown[0], sorted(names - set(shared)))}")
        _check_shared(name, {key: data[key] for key in shared if key in data}, shared)
        rest = {key: item for key, item in data.items() if key not in shared}
        return build_at(cls, rest, name, {key: (item, f"{key} (given to {name})") for key, item in shared.items()})

    def check_resolved(self, value: Any, where: str) -> None:
        if value is not None and not _is_settings(value):
            raise TypeError(f"{where}: section not parsed; its dataclass must call resolve_sections(self)")


@dataclass(frozen=True)
class NamedSections:
    """A mapping of names to sections of class `entries` ("module:Class" is imported when first needed); each
    section's name fills its field `key` ("" = none), where a different name given is refused."""

    entries: type[Any] | str
    key: str = ""

    @property
    def empty(self) -> Any:
        return {}

    def entry_class(self) -> type[Any]:
        cls = self.entries if isinstance(self.entries, type) else load_attribute(self.entries)
        if not isinstance(cls, type):
            raise TypeError(f"{self.entries} is not a class")
        return cls

    def resolve(self, owner: Any, name: str, value: Any) -> dict[str, Any]:
        del owner
        cls = self.entry_class()
        dump_as_data(cls)
        if not isinstance(value, Mapping):
            raise ConfigError(f"{name}: expected a mapping of names to {cls.__name__} settings, got {value!r}")
        return {str(key): self._entry(cls, f"{name}.{key}", str(key), item) for key, item in value.items()}

    def _entry(self, cls: type[Any], where: str, key: str, value: Any) -> Any:
        if isinstance(value, cls):
            if self.key and getattr(value, self.key) != key:
                raise ConfigError(f"{where}.{self.key}: {getattr(value, self.key)!r} differs from its key {key!r}")
            return value
        data = _mapping(cls, {} if value is None else value, where)
        if self.key:
            if self.key in data and data[self.key] != key:
                raise ConfigError(f"{where}.{self.key}: {data[self.key]!r} differs from its key; leave {self.key} out")
            data = {**data, self.key: key}
        return build_at(cls, data, where)

    def check_resolved(self, value: Any, where: str) -> None:
        if not isinstance(value, Mapping) or not all(_is_settings(item) for item in value.values()):
            raise TypeError(f"{where}: sections not parsed; their dataclass must call resolve_sections(self)")


def resolve_sections(owner: Any) -> None:
    """Parse the section fields of dataclass instance `owner` (`setting(..., section=...)`) into their settings
    objects, in place (frozen dataclasses too): the first step of its `__post_init__`."""
    for f in dataclasses.fields(owner):
        section: KindSection | NamedSections | None = f.metadata.get(SECTION)
        if section is None:
            continue
        value = getattr(owner, f.name)
        selection = selection_of(f)
        if selection is not None and getattr(owner, selection[0]) not in selection[1]:
            if value is not None and value != section.empty:  # from data, `from_mapping` has refused it already
                raise ConfigError(f"{f.name}: {not_selected(*selection, getattr(owner, selection[0]))}")
            continue
        object.__setattr__(owner, f.name, section.resolve(owner, f.name, value))


def settings_of(value: object, cls: type[T], what: str) -> T:
    """`value` (a resolved section) as `cls`; a `TypeError` naming `what` when it is something else (a bug)."""
    if not isinstance(value, cls):
        raise TypeError(f"{what}: expected {cls.__name__}, got {type(value).__name__}")
    return value


def _mapping(cls: type[Any], value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: expected the {cls.__name__} settings (a mapping), got {value!r}")
    return value


def _check_shared(name: str, given: Mapping[str, Any], around: Mapping[str, Any]) -> None:
    for key, value in given.items():
        if value != around[key]:
            raise ConfigError(f"{name}.{key}: set it as `{key}` beside {name} (there it is {around[key]!r})")


def _is_settings(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)
