"""A node's parameter services on the Zenoh runtime, as rclpy serves them on ROS 2.

`/NODE/list_parameters`, `/NODE/get_parameters` and `/NODE/set_parameters` with rcl_interfaces' service types,
so that `user param` (and `ros2 param` behind zenoh-bridge-ros2dds) reads and changes a running node's settings.
A change is applied all or nothing (one `ParameterStore.apply`): every result of a refused change carries the
refusal reason. The Humble typestore has rcl_interfaces' messages but not its services: `ensure_types` adds the
three services' request and response types to a codec.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from rosbags.typesys import get_types_from_msg

from user.bus.names import is_token
from user.bus.parameters import ParameterRefusedError, ParameterStore
from user.bus.ros_params import ParamKind
from user.interfaces.codec import Codec, default_codec
from user.interfaces.convert import from_data, to_data

if TYPE_CHECKING:
    from user.bus.base import Handle
    from user.bus.zenoh_bus import ZenohBus

LIST = "rcl_interfaces/srv/ListParameters"
GET = "rcl_interfaces/srv/GetParameters"
SET = "rcl_interfaces/srv/SetParameters"
SERVICE_OF = {LIST: "list_parameters", GET: "get_parameters", SET: "set_parameters"}  # /NODE/<this>

# the services' definitions, request and response (rcl_interfaces/srv/*.srv of Humble, constants left out)
_DEFINITIONS = {
    LIST: ("string[] prefixes\nuint64 depth\n", "rcl_interfaces/ListParametersResult result\n"),
    GET: ("string[] names\n", "rcl_interfaces/ParameterValue[] values\n"),
    SET: ("rcl_interfaces/Parameter[] parameters\n", "rcl_interfaces/SetParametersResult[] results\n"),
}

NOT_SET = 0  # rcl_interfaces/msg/ParameterType.PARAMETER_NOT_SET
# ParameterValue.type -> the field holding the value (rcl_interfaces/msg/ParameterType)
FIELD_OF_TYPE = {
    1: "bool_value",
    2: "integer_value",
    3: "double_value",
    4: "string_value",
    5: "byte_array_value",
    6: "bool_array_value",
    7: "integer_array_value",
    8: "double_array_value",
    9: "string_array_value",
}
TYPE_OF_KIND = {
    ParamKind.BOOL: 1,
    ParamKind.INTEGER: 2,
    ParamKind.DOUBLE: 3,
    ParamKind.STRING: 4,
    ParamKind.YAML: 4,  # YAML text in a string parameter
    ParamKind.BOOL_ARRAY: 6,
    ParamKind.INTEGER_ARRAY: 7,
    ParamKind.DOUBLE_ARRAY: 8,
    ParamKind.STRING_ARRAY: 9,
}

_types_lock = threading.Lock()
_log = logging.getLogger(__name__)


def service_name(node: str, srv: str) -> str:
    """The name of node `node`'s parameter service of type `srv`, e.g. '/talker/get_parameters'."""
    return f"/{node.strip('/')}/{SERVICE_OF[srv]}"


def ensure_types(codec: Codec) -> None:
    """Add the request and response types of the three parameter services to `codec` (once)."""
    with _types_lock:
        if codec.has_type(f"{SET}_Response"):
            return
        types: dict[str, Any] = {}
        for srv, halves in _DEFINITIONS.items():
            for half, text in zip(("Request", "Response"), halves, strict=True):
                name = f"{srv}_{half}"
                package, _, leaf = name.split("/")
                parsed = get_types_from_msg(text, name)  # filed under pkg/srv/msg/: services keep pkg/srv/
                types.update({name if k == f"{package}/srv/msg/{leaf}" else k: v for k, v in parsed.items()})
        codec.typestore.register(types)


def infer_type(value: Any) -> int:
    """The ParameterValue type a plain value (parsed from YAML) has, as `ros2 param set` infers it; NOT_SET when
    no ROS type holds it (a mapping, a mixed or nested list): send its YAML text as a string then."""
    for tp, check in ((1, bool), (2, int), (3, float), (4, str)):
        if type(value) is check:
            return tp
    if isinstance(value, list) and value:
        kinds = {infer_type(v) for v in value}
        if len(kinds) == 1 and kinds <= {1, 2, 4}:
            return {1: 6, 2: 7, 4: 9}[kinds.pop()]
        if kinds <= {2, 3}:
            return 8
    return NOT_SET


def to_value_data(value: Any, tp: int) -> dict[str, Any]:
    """A ParameterValue as data for `from_data`: `value` in the field of type `tp` (None: NOT_SET)."""
    if value is None or tp == NOT_SET:
        return {"type": NOT_SET}
    if tp == 3:
        value = float(value)
    elif tp == 8:
        value = [float(v) for v in value]
    return {"type": tp, FIELD_OF_TYPE[tp]: value}


def value_of(data: dict[str, Any]) -> Any:
    """The plain value of a ParameterValue given as data (`to_data`); None when not set."""
    field = FIELD_OF_TYPE.get(int(data.get("type", NOT_SET)))
    return None if field is None else data.get(field)


class ParameterServices:
    """The three services of one node, answering from its `ParameterStore` and applying through its bus."""

    def __init__(self, bus: ZenohBus, store: ParameterStore[Any], codec: Codec | None = None) -> None:
        self._bus = bus
        self._store = store
        self._codec = codec or default_codec()
        ensure_types(self._codec)
        handlers = {LIST: self._list, GET: self._get, SET: self._set}
        self.handles: list[Handle] = [
            bus.create_service(service_name(bus.name, srv), srv, self._typed(srv, handler))
            for srv, handler in handlers.items()
        ]

    def _typed(self, srv: str, handler: Any) -> Any:
        codec = self._codec

        def on_request(payload: bytes) -> bytes:
            request = to_data(codec.decode(payload, f"{srv}_Request"), codec)
            return codec.encode(from_data(f"{srv}_Response", handler(request), codec), f"{srv}_Response")

        return on_request

    def _list(self, request: dict[str, Any]) -> dict[str, Any]:
        prefixes = [p.rstrip(".") for p in request.get("prefixes", []) if p]
        names = [n for n in self._store.table if not prefixes or any(n == p or n.startswith(f"{p}.") for p in prefixes)]
        groups = sorted({n.rsplit(".", 1)[0] for n in names if "." in n})
        return {"result": {"names": names, "prefixes": groups}}

    def _get(self, request: dict[str, Any]) -> dict[str, Any]:
        current = self._store.current()
        values = []
        for name in request.get("names", []):
            param = self._store.table.get(name)
            tp = TYPE_OF_KIND[param.kind] if param is not None else NOT_SET
            values.append(to_value_data(current.get(name), tp))
        return {"values": values}

    def _set(self, request: dict[str, Any]) -> dict[str, Any]:
        parameters = request.get("parameters", [])
        changes = {p["name"]: value_of(p["value"]) for p in parameters}
        unset = [name for name, value in changes.items() if value is None]
        reason = ""
        try:
            if unset:
                raise ParameterRefusedError(f"{self._store.where}: cannot unset {', '.join(unset)} (give a value)")
            self._bus.set_parameters(changes)
        except ParameterRefusedError as exc:
            reason = str(exc)
            _log.info("refused a parameter change: %s", reason)
        return {"results": [{"successful": not reason, "reason": reason} for _ in parameters]}

    def close(self) -> None:
        for handle in self.handles:
            handle.close()


def serve_parameters(bus: ZenohBus, store: ParameterStore[Any]) -> ParameterServices | None:
    """Serve `store` as `bus`'s node's parameters; None (logged) when the node name cannot be a service name."""
    if not all(is_token(part) for part in bus.name.strip("/").split("/")):
        _log.debug("node %r: no parameter services (its name is no ROS name)", bus.name)
        return None
    return ParameterServices(bus, store)
