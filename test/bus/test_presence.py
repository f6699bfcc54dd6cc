"""`live_nodes`: the node names a router knows alive in one domain, read without announcing a node."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from test.conftest import free_port
from user.bus.presence import PresenceProbeError, live_nodes
from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import ZenohSettings


def test_live_nodes_of_a_domain_and_only_of_it(router_endpoint: str, make_bus: Callable[..., ZenohBus]) -> None:
    make_bus("presence_a")
    other = ZenohBus("presence_b", ZenohSettings(router=[router_endpoint], domain="presence_other"))
    try:
        here = live_nodes([router_endpoint], "")
        there = live_nodes([router_endpoint], "presence_other")
    finally:
        other.close()
    assert "presence_a" in here and "presence_b" not in here, here
    assert there == ["presence_b"], there
    assert "presence_b" not in live_nodes([router_endpoint], "presence_other")  # closed: its token is gone


def test_no_router_is_a_probe_error() -> None:
    with pytest.raises(PresenceProbeError, match="no Zenoh router answers at tcp/127.0.0.1:"):
        live_nodes([f"tcp/127.0.0.1:{free_port()}"], "", listen_s=0.5)
