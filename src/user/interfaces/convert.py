"""Messages <-> plain Python data (dicts, lists, numbers), driven by the typestore's field definitions.

Used by `user topic echo` (print any registered type as YAML, like `ros2 topic echo`) and
`user topic pub` (build any registered type from YAML, like `ros2 topic pub`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from rosbags.typesys.base import Nodetype  # type: ignore[attr-defined]

from user.interfaces.codec import Codec

_NUMPY_DTYPES = {
    "bool": np.bool_,
    "byte": np.uint8,
    "char": np.uint8,
    "int8": np.int8,
    "uint8": np.uint8,
    "int16": np.int16,
    "uint16": np.uint16,
    "int32": np.int32,
    "uint32": np.uint32,
    "int64": np.int64,
    "uint64": np.uint64,
    "float32": np.float32,
    "float64": np.float64,
}


class MessageDataError(ValueError):
    """Plain data does not fit a message type; the message names the field path."""


def to_data(msg: Any, codec: Codec, *, max_array: int | None = None) -> dict[str, Any]:
    """A message as nested dicts/lists/scalars. Arrays longer than `max_array` become a summary string."""
    return _to_data(msg, codec.resolve(msg.__msgtype__), codec, max_array)


def _to_data(msg: Any, typename: str, codec: Codec, max_array: int | None) -> dict[str, Any]:
    _, fields = codec.typestore.fielddefs[typename]
    out: dict[str, Any] = {}
    for name, desc in fields:
        out[name] = _value_to_data(getattr(msg, name), desc, codec, max_array)
    return out


def _value_to_data(value: Any, desc: Any, codec: Codec, max_array: int | None) -> Any:
    kind, detail = desc
    if kind == Nodetype.BASE:
        return value.item() if isinstance(value, np.generic) else value
    if kind == Nodetype.NAME:
        return _to_data(value, detail, codec, max_array)
    sub, _ = detail
    if max_array is not None and len(value) > max_array:
        return f"<array of {len(value)} items>"
    if isinstance(value, np.ndarray):
        return value.tolist()
    return [_value_to_data(v, sub, codec, max_array) for v in value]


def from_data(typename: str, data: Mapping[str, Any] | None, codec: Codec) -> Any:
    """Build a message of `typename` from plain data; missing fields take ROS defaults (zero/empty)."""
    name = codec.resolve(typename)
    return _from_data(name, data or {}, codec, name)


def _from_data(typename: str, data: Any, codec: Codec, where: str) -> Any:
    if not isinstance(data, Mapping):
        raise MessageDataError(f"{where}: expected a mapping for {typename}, got {data!r}")
    _, fields = codec.typestore.fielddefs[typename]
    names = [n for n, _ in fields]
    unknown = [k for k in data if k not in names]
    if unknown:
        raise MessageDataError(f"{where}: {typename} has no field {unknown[0]!r} (fields: {', '.join(names)})")
    kwargs = {}
    for fname, desc in fields:
        sub = f"{where}.{fname}"
        kwargs[fname] = _value_from_data(desc, data[fname], codec, sub) if fname in data else _default(desc, codec)
    return codec.msg_class(typename)(**kwargs)


def _value_from_data(desc: Any, value: Any, codec: Codec, where: str) -> Any:
    kind, detail = desc
    if kind == Nodetype.BASE:
        return _base_from_data(detail[0], value, where)
    if kind == Nodetype.NAME:
        return _from_data(detail, value, codec, where)
    (sub_kind, sub_detail), length = detail
    if not isinstance(value, (list, tuple, np.ndarray)):
        raise MessageDataError(f"{where}: expected a list, got {value!r}")
    if kind == Nodetype.ARRAY and length and len(value) != length:
        raise MessageDataError(f"{where}: expected exactly {length} items, got {len(value)}")
    if sub_kind == Nodetype.BASE and sub_detail[0] in _NUMPY_DTYPES:
        items = [_base_from_data(sub_detail[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
        return np.array(items, dtype=_NUMPY_DTYPES[sub_detail[0]])
    return [_value_from_data((sub_kind, sub_detail), v, codec, f"{where}[{i}]") for i, v in enumerate(value)]


def _base_from_data(basetype: str, value: Any, where: str) -> Any:
    if basetype in {"string", "wstring"}:
        if not isinstance(value, str):
            raise MessageDataError(f"{where}: expected a string, got {value!r}")
        return value
    if basetype == "bool":
        if not isinstance(value, bool):
            raise MessageDataError(f"{where}: expected true or false, got {value!r}")
        return value
    if basetype.startswith("float"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise MessageDataError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise MessageDataError(f"{where}: expected an integer, got {value!r}")
    info = np.iinfo(_NUMPY_DTYPES[basetype])
    if not info.min <= value <= info.max:
        raise MessageDataError(f"{where}: {value} is out of range for {basetype}")
    return value


def field_default(desc: Any, codec: Codec) -> Any:
    """The ROS default (zero, empty) of a field described by `desc` (a typestore field description)."""
    return _default(desc, codec)


def _default(desc: Any, codec: Codec) -> Any:
    kind, detail = desc
    if kind == Nodetype.BASE:
        basetype = detail[0]
        if basetype in ("string", "wstring"):
            return ""
        if basetype == "bool":
            return False
        return 0.0 if basetype.startswith("float") else 0
    if kind == Nodetype.NAME:
        return _from_data(detail, {}, codec, detail)
    (sub_kind, sub_detail), length = detail
    if kind == Nodetype.ARRAY:
        if sub_kind == Nodetype.BASE and sub_detail[0] in _NUMPY_DTYPES:
            return np.zeros(length, dtype=_NUMPY_DTYPES[sub_detail[0]])
        return [_default((sub_kind, sub_detail), codec) for _ in range(length)]
    if sub_kind == Nodetype.BASE and sub_detail[0] in _NUMPY_DTYPES:
        return np.zeros(0, dtype=_NUMPY_DTYPES[sub_detail[0]])
    return []
