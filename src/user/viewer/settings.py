"""The settings of the Foxglove live view."""

from __future__ import annotations

from dataclasses import dataclass

from user.config.strict import setting

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765  # Foxglove's default for a WebSocket data source


@dataclass
class ViewerSettings:
    """Where the WebSocket server listens and which topics it serves."""

    host: str = setting(DEFAULT_HOST, "address the WebSocket server binds to (0.0.0.0: every interface)")
    port: int = setting(DEFAULT_PORT, "TCP port of the WebSocket server; 0 = any free port", min=0, max=65535)
    topics: list[str] = setting([], "allow-list of topics or shell patterns ('/franka_left/*'); empty = every topic")
    rediscover_period_s: float = setting(2.0, "seconds between looks for topics that appeared since", min=0.1)
    discovery_window_s: float = setting(0.5, "seconds each look collects the graph's announcements", min=0.05)
    message_backlog: int = setting(1024, "messages queued per Foxglove client; the oldest is dropped when full", min=1)
