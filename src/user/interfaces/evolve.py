"""Messages written with an older definition of their type: decode them as written, carry them to today's type.

Every file the project writes carries the ros2msg definitions of its messages (MCAP schemas: buffer segments,
spooled episodes, exported bags). When a definition changes (a field appended to user/msg/Action), bytes written
before no longer decode with today's codec: `codec_for` gives the codec that reads them, and `migrate` rebuilds
such a message as today's type, a field the old definition lacks taking its default (zero, empty), a field today's
definition dropped refused by name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rosbags.typesys.base import Nodetype  # type: ignore[attr-defined]

from user.interfaces.codec import Codec
from user.interfaces.convert import MessageDataError, field_default
from user.interfaces.typestore import types_from_definition, typestore_with


def codec_for(
    definitions: Mapping[str, tuple[str, str]],
    base: Codec,
    *,
    unparsable: Callable[[str, ValueError], None] | None = None,
) -> Codec:
    """The codec that decodes messages written with `definitions` (type -> (encoding, text)): `base` itself when
    each one is `base`'s own; else `base` with these, which describe the bytes and so win. A definition that does
    not parse is a `ValueError` naming it, unless `unparsable(type, error)` is given: it may raise, or let that type
    keep `base`'s definition. `ValueError` too for definitions that do not fit together."""
    changed = {
        name: (encoding, text)
        for name, (encoding, text) in definitions.items()
        if not (encoding == "ros2msg" and base.has_type(name) and text == base.definition(name))
    }
    types: dict[str, object] = {}
    for name, (encoding, text) in sorted(changed.items()):
        try:
            types.update(types_from_definition(name, encoding, text))
        except ValueError as exc:
            if unparsable is None:
                raise
            unparsable(name, exc)
    if not types:
        return base
    try:
        return Codec(typestore_with(types, base.typestore))
    except Exception as exc:  # rosbags raises several kinds while generating the types
        raise ValueError(f"the definitions of {', '.join(sorted(types))} do not fit together ({exc})") from exc


def migrate(msg: Any, old: Codec, new: Codec) -> Any:
    """`msg` (decoded with `old`) as a message of today's type of the same name (`new`); `MessageDataError`
    (a ValueError) names a field it holds that today's type has not."""
    if old is new:
        return msg
    return _migrated(msg, new.resolve(msg.__msgtype__), old, new, msg.__msgtype__)


def _migrated(msg: Any, typename: str, old: Codec, new: Codec, where: str) -> Any:
    _, fields = new.typestore.fielddefs[typename]
    names = {name for name, _ in fields}
    _, held = old.typestore.fielddefs[old.resolve(msg.__msgtype__)]
    dropped = [name for name, _ in held if name not in names]
    if dropped:
        raise MessageDataError(f"{where}: today's {typename} has no field {dropped[0]!r}")
    kwargs = {}
    for name, desc in fields:
        kwargs[name] = (
            _value(getattr(msg, name), desc, old, new, f"{where}.{name}")
            if hasattr(msg, name)
            else field_default(desc, new)
        )
    return new.msg_class(typename)(**kwargs)


def _value(value: Any, desc: Any, old: Codec, new: Codec, where: str) -> Any:
    kind, detail = desc
    if kind == Nodetype.NAME:
        return _migrated(value, detail, old, new, where)
    if kind in (Nodetype.ARRAY, Nodetype.SEQUENCE) and detail[0][0] == Nodetype.NAME:
        return [_migrated(v, detail[0][1], old, new, f"{where}[{i}]") for i, v in enumerate(value)]
    return value  # a number, a string, or an array of them (numpy), as decoded
