"""Fixtures of the node tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from user.bus.zenoh_bus import ZenohBus
from user.runtime.node import Node
from user.runtime.node import started as configured_and_activated


@pytest.fixture
def nodes(make_bus: Callable[..., ZenohBus]) -> Iterator[Callable[..., Any]]:
    """Start nodes in this process, each on its own bus (`nodes(cls, name, params)`); destroyed in reverse order."""
    started: list[Node] = []

    def start(cls: type[Node], name: str, params: dict[str, Any]) -> Any:
        node = cls(make_bus(name, params))
        started.append(node)  # destroyed even when its configure or activate step fails
        configured_and_activated(node)
        return node

    yield start
    for node in reversed(started):
        node.destroy()
