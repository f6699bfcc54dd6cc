"""Announcer and Registry over a real Zenoh router, in one process (several sessions)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from test.conftest import wait_until
from user.bus.base import LATCHED
from user.bus.zenoh_bus import ZenohBus
from user.hardware.announce import Announcer
from user.hardware.descriptor import MSG_TYPE, ResourceDescriptor, to_msg
from user.hardware.errors import ResourcesNotFoundError
from user.hardware.keys import descriptor_topic, token_key
from user.hardware.registry import Registry, ResourceStatus
from user.interfaces import default_codec
from user.runtime.node import Node

MakeBus = Callable[..., ZenohBus]
DEADLINE_S = 10.0  # generous: discovery takes milliseconds on one host


def rid(prefix: str) -> str:
    """A resource id no other test (sharing the router) uses."""
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def robot(resource_id: str, site: str = "lab_a") -> ResourceDescriptor:
    return ResourceDescriptor(resource_id, "robot", model="franka_panda_sim", site=site, dof=7, control_rate_hz=10.0)


def status_of(registry: Registry, resource_id: str) -> ResourceStatus | None:
    """The resource as the registry lists it (alive or recently lost), None while it lists it not."""
    return next((s for s in registry.resources(include_lost=True) if s.resource_id == resource_id), None)


def lost(registry: Registry, resource_id: str) -> bool:
    """`resource_id` is not (or no longer) among the alive resources."""
    return all(s.resource_id != resource_id for s in registry.resources())


@pytest.fixture
def registry(make_bus: MakeBus) -> Iterator[Registry]:
    reg = Registry(Node(make_bus("registry")))
    yield reg
    reg.close()


def test_a_late_registry_receives_the_latched_descriptor(make_bus: MakeBus) -> None:
    d = robot(rid("franka"))
    announcer = Announcer(make_bus("announcer"), d)
    reg = Registry(Node(make_bus("late_registry")))
    try:
        (status,) = reg.wait_for([d.resource_id], DEADLINE_S)
        assert status.descriptor == d and status.health == "alive"
        assert status_of(reg, d.resource_id) is not None
        assert d in reg.descriptors(kind="robot")
        assert d not in reg.descriptors(kind="accelerator")
    finally:
        reg.close()
        announcer.close()


def test_appears_then_is_lost_when_the_announcer_closes(make_bus: MakeBus, registry: Registry) -> None:
    d = ResourceDescriptor(rid("gpu"), "accelerator", model="declared", site="cloud", memory_bytes=2**30)
    announcer = Announcer(Node(make_bus("announcer")), d)  # a Node works as well as a bare bus
    (status,) = registry.wait_for([d.resource_id], DEADLINE_S)
    assert status.descriptor == d
    before = time.time()
    announcer.close()
    assert wait_until(lambda: lost(registry, d.resource_id), DEADLINE_S)
    gone = {s.resource_id: s for s in registry.resources(include_lost=True)}[d.resource_id]
    assert gone.health == "lost" and gone.since >= before - 1.0
    announcer.close()  # idempotent


def test_a_resource_is_lost_when_its_session_ends_and_comes_back_when_reannounced(
    make_bus: MakeBus, registry: Registry
) -> None:
    d = robot(rid("arx"), site="lab_b")
    bus = make_bus("robot_process")
    Announcer(bus, d)
    registry.wait_for([d.resource_id], DEADLINE_S)
    bus.close()  # the whole process goes: its token goes with it
    assert wait_until(lambda: lost(registry, d.resource_id), DEADLINE_S)
    again = ResourceDescriptor(d.resource_id, "robot", model="arx_l5", site="lab_b", dof=6, control_rate_hz=10.0)
    Announcer(make_bus("restarted"), again)
    assert wait_until(
        lambda: (s := status_of(registry, d.resource_id)) is not None and s.descriptor == again, DEADLINE_S
    )
    assert status_of(registry, d.resource_id).health == "alive"  # type: ignore[union-attr]


def test_wait_for_names_what_is_missing_at_its_deadline(make_bus: MakeBus, registry: Registry) -> None:
    present = robot(rid("here"))
    Announcer(make_bus("announcer"), present)
    ghost = rid("ghost")
    start = time.monotonic()
    with pytest.raises(ResourcesNotFoundError) as info:
        registry.wait_for([present.resource_id, ghost], 0.5)
    assert time.monotonic() - start < 5.0
    assert info.value.missing == [ghost]
    assert ghost in str(info.value) and "user hardware list" in str(info.value)


def test_a_descriptor_that_contradicts_its_token_is_dropped(make_bus: MakeBus, registry: Registry) -> None:
    resource_id = rid("liar")
    bus = make_bus("liar")
    codec = default_codec()
    pub = bus.create_publisher(descriptor_topic(resource_id), MSG_TYPE, LATCHED)
    pub.publish(codec.encode(to_msg(robot("someone_else"), codec), MSG_TYPE))
    bus.declare_token(token_key("robot", resource_id))
    assert wait_until(lambda: resource_id in [p.resource_id for p in registry.pending()], DEADLINE_S)
    assert not registry.wait_settled(0.5)  # the token stays without an acceptable descriptor
    assert status_of(registry, resource_id) is None and status_of(registry, "someone_else") is None
