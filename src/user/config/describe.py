"""Every leaf setting of a settings dataclass, for help output (`user node KIND --describe`).

Nested settings are listed one by one under their dotted names, the names ROS parameters have (`learning.sac.gamma`:
the `gamma` of the `sac` section of `learning`), each with the default its section's default gives it. A setting of
one kind says so at the end of its description ("[only with learning.algorithm sac]"). A section whose class the
selected kind decides (`user.config.sections.KindSection`) lists the leaves of every kind's class, each once, with the
kinds it belongs to ("hardware.safety.workspace_min ... [only with driver franka or franka_ros or arx]"); named
sections (`NamedSections`) list their class's leaves under a placeholder name (`camera_configs.<name>.width`).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, NamedTuple

from user.config.sections import KindSection, NamedSections
from user.config.strict import SECTION, default_of, selection_of

ONLY = "only with "


class Row(NamedTuple):
    """One leaf setting."""

    name: str  # dotted name
    type: str  # its annotation as a reader writes it
    default: Any
    doc: str
    condition: str  # "only with driver franka" when only some kinds have it; "" for every kind


def describe_settings(
    cls: type[Any], prefix: str = "", values: Any = None, only: str = ""
) -> list[tuple[str, str, Any, str]]:
    """(name, type, default, description) of each leaf setting of dataclass `cls`, the description ending with the
    kinds the setting belongs to ("[only with learning.algorithm sac]"). `values` (a `cls` instance) supplies the
    defaults of a nested section; `only` its kind condition."""
    return [
        (row.name, row.type, row.default, row.doc + (f" [{row.condition}]" if row.condition else ""))
        for row in rows(cls, prefix, values, only)
    ]


def rows(cls: type[Any], prefix: str = "", values: Any = None, only: str = "") -> list[Row]:
    """The leaf settings of dataclass `cls` (see `describe_settings`)."""
    hints = typing.get_type_hints(cls)
    out: list[Row] = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        tp, name = hints[f.name], f"{prefix}{f.name}"
        selection = selection_of(f)
        own = f"{ONLY}{prefix}{selection[0]} {' or '.join(selection[1])}" if selection else ""
        section = f.metadata.get(SECTION)
        if isinstance(section, KindSection):
            same_selector = selection is not None and selection[0] == section.selector
            out.extend(_kind_rows(section, name, prefix, only if same_selector else _both(only, own)))
            continue
        if isinstance(section, NamedSections):
            out.extend(_named_rows(section, name, _both(only, own)))
            continue
        value = getattr(values, f.name) if values is not None else default_of(f)
        inner = _dataclass_in(tp)
        if inner is not None:
            out.extend(rows(inner, f"{name}.", value, _both(only, own)))
            continue
        out.append(Row(name, _type_name(tp), value, str(f.metadata.get("doc", "")), _both(only, own)))
    return out


def _kind_rows(section: KindSection, name: str, prefix: str, outer: str) -> list[Row]:
    """The leaves of every kind's class, each once with the kinds that have it; shared settings left out (they are
    the enclosing settings' own)."""
    shared = {f"{name}.{key}" for key in section.shared}
    kinds_of: dict[tuple[str, str, str, str, str], list[str]] = {}
    first: dict[tuple[str, str, str, str, str], Row] = {}
    for kind in section.kinds.with_settings():
        cls = section.kinds.settings_class(kind)
        for row in rows(cls, f"{name}.", None, "") if cls is not None else []:
            if row.name in shared:
                continue
            key = (row.name, row.type, repr(row.default), row.doc, row.condition)
            kinds_of.setdefault(key, []).append(kind)
            first.setdefault(key, row)
    selector = f"{prefix}{section.selector}"
    return [
        row._replace(condition=_both(outer, _both(f"{ONLY}{selector} {' or '.join(kinds_of[key])}", row.condition)))
        for key, row in first.items()
    ]


def _named_rows(section: NamedSections, name: str, outer: str) -> list[Row]:
    """The leaves of the sections' class under `<name>` (its key field left out: the name fills it)."""
    placeholder = f"{name}.<{section.key or 'name'}>."
    listed = rows(section.entry_class(), placeholder, None, outer)
    return [row for row in listed if not section.key or row.name != f"{placeholder}{section.key}"]


def _both(outer: str, inner: str) -> str:
    """Two kind conditions as one ("only with driver franka and hardware.mode a")."""
    if not outer or not inner:
        return outer or inner
    return f"{outer} and {inner.removeprefix(ONLY)}"


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
