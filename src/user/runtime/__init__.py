"""The node runtime: a small base class giving each node its bus, typed parameters, timers and logging."""

from user.runtime.node import Node, TypedPublisher

__all__ = ["Node", "TypedPublisher"]
