"""`LiveViewer` in this process on a bus of its own: the allow-list limits what is served, and `stop()` closes the
server and the subscriptions."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from websockets.exceptions import ConnectionClosed

from test.conftest import wait_until
from test.viewer.client import FoxgloveClient
from user.bus.base import RawPublisher
from user.bus.zenoh_bus import ZenohBus
from user.interfaces.codec import default_codec
from user.viewer import LiveViewer, ViewerSettings

pytestmark = pytest.mark.timeout(120)

STRING = "std_msgs/msg/String"


class Publishing:
    """Publishes numbered strings on some topics from a thread until stopped."""

    def __init__(self, publishers: list[RawPublisher]) -> None:
        self._publishers = publishers
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        codec = default_codec()
        n = 0
        while not self._stop.wait(0.05):
            for pub in self._publishers:
                pub.publish(codec.encode(codec.msg_class(STRING)(data=f"{pub.topic} {n}"), STRING))
            n += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


@pytest.fixture
def publishing(make_bus: Callable[..., ZenohBus]) -> Iterator[list[str]]:
    bus = make_bus("viewer_source")
    topics = ["/allowed_a", "/allowed_b", "/other_c"]
    running = Publishing([bus.create_publisher(t, STRING) for t in topics])
    yield topics
    running.stop()


def test_the_allow_list_limits_what_is_served_and_stop_closes_everything(
    publishing: list[str], make_bus: Callable[..., ZenohBus]
) -> None:
    codec = default_codec()
    bus = make_bus("viewer_in_process")
    assert wait_until(lambda: set(publishing) <= set(bus.topic_names_and_types(0.3)), 20.0)
    viewer = LiveViewer(bus, ViewerSettings(port=0, topics=["/allowed_*"], rediscover_period_s=0.2))
    viewer.start()
    client = FoxgloveClient(viewer.url)
    try:
        assert viewer.url == f"ws://127.0.0.1:{viewer.port}"
        assert viewer.topics() == {"/allowed_a": STRING, "/allowed_b": STRING}
        assert client.pump_until(lambda: {c["topic"] for c in client.channels.values()} >= set(viewer.topics()), 20.0)
        assert {c["topic"] for c in client.channels.values()} == {"/allowed_a", "/allowed_b"}
        sub = client.subscribe(next(c["id"] for c in client.channels.values() if c["topic"] == "/allowed_b"))
        assert client.pump_until(lambda: len(client.messages_of(sub)) >= 2, 20.0)
        texts = {codec.decode(m.payload, STRING).data.split()[0] for m in client.messages_of(sub)}
        assert texts == {"/allowed_b"}
        assert bus.count_subscribers("/allowed_b", 0.3) == 1 and bus.count_subscribers("/other_c", 0.3) == 0
        viewer.rediscover()  # a look after start finds nothing new to open
        assert set(viewer.topics()) == {"/allowed_a", "/allowed_b"}
    finally:
        viewer.stop()
    assert viewer.topics() == {}
    assert wait_until(lambda: bus.count_subscribers("/allowed_b", 0.3) == 0, 20.0), "a subscription outlived stop()"
    with pytest.raises(ConnectionClosed):
        client.pump_until(lambda: False, 10.0)
    client.close()
    viewer.stop()  # twice is harmless
