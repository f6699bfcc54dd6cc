"""`LiveViewer`: a Foxglove WebSocket server serving every topic of the graph a bus sees.

`start()` opens the server, looks at the graph once and then again every `rediscover_period_s` on a thread of
its own, opening a channel for each new topic; `stop()` ends that thread (within a deadline), closes the
subscriptions and channels and stops the server. The bus stays the caller's.
"""

from __future__ import annotations

import logging
import threading

import foxglove
from foxglove.websocket import WebSocketServer

from user.bus.base import Bus, BusClosedError, BusError
from user.interfaces.codec import Codec, default_codec
from user.viewer.channels import TopicChannel
from user.viewer.selection import select_topics
from user.viewer.settings import ViewerSettings

_log = logging.getLogger(__name__)

SERVER_NAME = "user"
STOP_GRACE_S = 5.0  # beyond one discovery window, how long `stop` waits for the discovery thread


class ViewerError(RuntimeError):
    """The live view cannot start (the port is taken, the address cannot be bound, ...)."""


class LiveViewer:
    """Serves the topics `bus` sees to Foxglove clients over a WebSocket."""

    def __init__(self, bus: Bus, settings: ViewerSettings | None = None, codec: Codec | None = None) -> None:
        self.bus = bus
        self.settings = settings or ViewerSettings()
        self.codec = codec or default_codec()
        self._context = foxglove.Context()
        self._channels: dict[str, TopicChannel] = {}
        self._warned: set[str] = set()
        self._lock = threading.Lock()  # guards _channels between the discovery thread and stop()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._server: WebSocketServer | None = None

    @property
    def port(self) -> int:
        """The port the server listens on (the one chosen when the setting was 0)."""
        if self._server is None:
            raise ViewerError("the live view is not running")
        return int(self._server.port)

    @property
    def url(self) -> str:
        """What to open in Foxglove ("Open connection" -> "Foxglove WebSocket")."""
        return f"ws://{self.settings.host}:{self.port}"

    def topics(self) -> dict[str, str]:
        """The topics served now, with their types."""
        with self._lock:
            return {topic: ch.typename for topic, ch in self._channels.items()}

    def start(self) -> None:
        """Open the server, serve the topics there are now, and keep looking for new ones."""
        s = self.settings
        try:
            self._server = foxglove.start_server(
                name=SERVER_NAME,
                host=s.host,
                port=s.port,
                context=self._context,
                message_backlog_size=s.message_backlog,
            )
        except Exception as exc:  # the SDK raises its own error types for a port in use or a bad address
            raise ViewerError(f"cannot serve Foxglove on {s.host}:{s.port}: {exc}") from exc
        self.rediscover()
        self._thread = threading.Thread(target=self._keep_discovering, name="viewer-discovery", daemon=True)
        self._thread.start()

    def rediscover(self) -> list[str]:
        """Look at the graph once; open a channel for each new topic. Returns the topics opened."""
        announced = self.bus.topic_names_and_types(timeout_s=self.settings.discovery_window_s)
        with self._lock:
            selection = select_topics(announced, self._channels, self.settings.topics, self.codec)
        for topic, reason in selection.skipped.items():
            if topic not in self._warned:
                self._warned.add(topic)
                _log.warning("not serving %s: %s", topic, reason)
        opened = []
        for topic, typename in selection.to_open.items():
            if self._stop.is_set():
                break
            channel = TopicChannel(self._context, self.bus, self.codec, topic, typename)
            with self._lock:
                self._channels[topic] = channel
            opened.append(topic)
            _log.info("serving %s (%s)", topic, typename)
        return opened

    def _keep_discovering(self) -> None:
        while not self._stop.wait(self.settings.rediscover_period_s):
            try:
                self.rediscover()
            except BusClosedError:
                return
            except BusError as exc:  # a transient graph error: try again next period
                _log.warning("looking for new topics failed: %s", exc)

    def stop(self) -> None:
        """Stop looking for topics, close every channel and stop the server. Safe to call twice."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(self.settings.discovery_window_s + STOP_GRACE_S)
            if thread.is_alive():
                _log.warning("the topic discovery thread did not end within its deadline")
        with self._lock:
            channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            channel.close()
        server, self._server = self._server, None
        if server is not None:
            server.stop()
