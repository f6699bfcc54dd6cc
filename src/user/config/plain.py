"""Settings objects back to the plain data they are loaded from: what a settings object is as YAML or as the text of
a YAML-valued ROS parameter (a typed section such as a robot node's `hardware`).

`dump_as_data(cls)` lets `yaml.safe_dump` write the objects of a settings class as that data; the typed sections
(`user.config.sections`) register each class they parse into, so that the settings holding them (a robot node's
parameters, whose `hardware` is one YAML-valued ROS parameter) can be given back as text.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import yaml

from user.config.strict import selection_of


def to_data(value: Any) -> Any:
    """The data `from_mapping` builds `value` from: a settings dataclass as the mapping of its settings (recursively),
    leaving out those of kinds not selected (which `from_mapping` refuses); tuples as lists, mappings with text keys.
    Anything else is returned as it is."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: to_data(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init and _selected(value, f)
        }
    if isinstance(value, (list, tuple)):
        return [to_data(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): to_data(item) for key, item in value.items()}
    return value


def _selected(value: Any, f: dataclasses.Field[Any]) -> bool:
    selection = selection_of(f)
    return selection is None or getattr(value, selection[0]) in selection[1]


def dump_as_data(cls: type[Any]) -> None:
    """Let `yaml.safe_dump` write settings objects of class `cls` as their data (`to_data`); idempotent."""
    if cls not in yaml.SafeDumper.yaml_representers:
        yaml.SafeDumper.add_representer(cls, _represent)


def _represent(dumper: yaml.SafeDumper, value: Any) -> yaml.Node:
    return dumper.represent_dict(to_data(value))
