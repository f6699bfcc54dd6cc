"""`OwnThread` services, on both runtimes: a handler that waits runs beside the node's callbacks, not in front
of them. The handler here waits for a message that only a subscription of the same bus can deliver: under
the callback lock (a plain handler) that message would queue behind the handler and it would give up."""

from __future__ import annotations

import threading
from collections.abc import Callable

from test.conftest import wait_until
from user.bus.base import Bus, OwnThread, ServiceError
from user.interfaces import default_codec

MakeBus = Callable[..., Bus]
CODEC = default_codec()
STRING = "std_msgs/msg/String"
SRV = "user/srv/Checkpoint"  # request: a string tag; response: success, message, path, updates
HANDLER_WAIT_S = 8.0  # the handler's own deadline for the message (it answers "gave up" after it)


def _text(s: str) -> bytes:
    return CODEC.encode(CODEC.msg_class(STRING)(data=s), STRING)


def _request(tag: str) -> bytes:
    return CODEC.encode(CODEC.msg_class(f"{SRV}_Request")(tag=tag), f"{SRV}_Request")


def _response(message: str) -> bytes:
    reply = CODEC.msg_class(f"{SRV}_Response")(success=True, message=message, path="", updates=0)
    return CODEC.encode(reply, f"{SRV}_Response")


def _answer(payload: bytes) -> str:
    return str(CODEC.decode(payload, f"{SRV}_Response").message)


class WaitingServer:
    """A service whose handler waits until the bus's own subscription has seen a message."""

    def __init__(self, bus: Bus, topic: str) -> None:
        self.seen = threading.Event()
        self.waiting = threading.Event()
        bus.create_subscription(topic, STRING, lambda _payload: self.seen.set())
        bus.create_service(f"{topic}_srv", SRV, OwnThread(self._handle))

    def _handle(self, payload: bytes) -> bytes:
        tag = CODEC.decode(payload, f"{SRV}_Request").tag
        if tag == "ping":
            return _response("pong")
        self.waiting.set()
        return _response("saw the message" if self.seen.wait(HANDLER_WAIT_S) else "gave up")


def _answers(bus: Bus, name: str) -> bool:
    try:
        return _answer(bus.call_service(name, SRV, _request("ping"), 1.0)) == "pong"
    except ServiceError:
        return False


def test_a_waiting_own_thread_handler_lets_the_subscriptions_of_its_bus_run(make_any_bus: MakeBus, topic: str) -> None:
    server_bus, client, sender = make_any_bus("server"), make_any_bus("client"), make_any_bus("sender")
    server = WaitingServer(server_bus, topic)
    pub = sender.create_publisher(topic, STRING)
    assert wait_until(lambda: _answers(client, f"{topic}_srv"), 10.0)
    assert pub.wait_for_subscribers(10.0)  # type: ignore[attr-defined]
    answers: list[str] = []
    call = threading.Thread(
        target=lambda: answers.append(_answer(client.call_service(f"{topic}_srv", SRV, _request("wait"), 20.0)))
    )
    call.start()
    assert server.waiting.wait(10.0)
    pub.publish(_text("go"))  # delivered while the handler waits
    call.join(20.0)
    assert answers == ["saw the message"]


def test_own_thread_services_keep_answering_after_a_raising_handler(make_any_bus: MakeBus, topic: str) -> None:
    server, client = make_any_bus("server"), make_any_bus("client")
    calls: list[str] = []

    def handler(payload: bytes) -> bytes:
        tag = CODEC.decode(payload, f"{SRV}_Request").tag
        calls.append(tag)
        if tag == "fail":
            raise ValueError("bad request")
        return _response("pong" if tag == "ping" else f"done {tag}")

    server.create_service(topic, SRV, OwnThread(handler))
    assert wait_until(lambda: _answers(client, topic), 10.0)
    try:
        client.call_service(topic, SRV, _request("fail"), 2.0)  # Zenoh: an error reply; ROS: an empty response
    except ServiceError as exc:
        assert "bad request" in str(exc)
    assert _answer(client.call_service(topic, SRV, _request("b"), 2.0)) == "done b"
    assert "fail" in calls
