"""Nested settings as flat dotted names, the way ROS 2 parameters name them: {"a": {"b": 1}} <-> {"a.b": 1}."""

from __future__ import annotations

from typing import Any


def flatten(params: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}. An empty mapping is kept as a value (it has no leaves to name)."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def unflatten(params: dict[str, Any]) -> dict[str, Any]:
    """Inverse of `flatten`: {"a.b": 1} -> {"a": {"b": 1}}."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        parts = key.split(".")
        cursor = out
        for part in parts[:-1]:
            cursor = cursor.setdefault(part, {})
        cursor[parts[-1]] = value
    return out
