"""Wire compatibility with CycloneDDS sites (many Humble labs run rmw_cyclonedds_cpp, not on PyPI): a
participant of the `cyclonedds` Python package, using ROS 2's topic and type name mangling (`rt/<topic>`,
`user::msg::dds_::Transition_`), exchanges `user/msg/Transition` both ways with a node of the ROS runtime
on Fast DDS, over loopback.

The Cyclone side's types are built from the same msg/ definitions (our typestore), field by field, so what
is compared is what each DDS implementation put on the wire. `lo` has no multicast here: Cyclone uses
unicast discovery (Peers 127.0.0.1), as `../shared/ros2/README.md` found.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from rosbags.interfaces import Nodetype

from test.conftest import wait_until
from user.bus.base import Bus
from user.interfaces import default_codec
from user.interfaces.domain import Action, EncodedImage, Observation, Transition, transition_from_msg, transition_to_msg

pytestmark = pytest.mark.ros

CODEC = default_codec()
TRANSITION = "user/msg/Transition"
CYCLONE_CONFIG = (
    '<CycloneDDS><Domain id="any"><General><Interfaces><NetworkInterface name="lo"/></Interfaces>'
    "<AllowMulticast>false</AllowMulticast></General><Discovery><ParticipantIndex>auto</ParticipantIndex>"
    '<MaxAutoParticipantIndex>30</MaxAutoParticipantIndex><Peers><Peer address="127.0.0.1"/></Peers>'
    "</Discovery></Domain></CycloneDDS>"
)


def dds_type_name(typename: str) -> str:
    """ROS 2's DDS type name: user/msg/Transition -> user::msg::dds_::Transition_."""
    package, kind, name = typename.split("/")
    return f"{package}::{kind}::dds_::{name}_"


class CycloneTypes:
    """Cyclone IDL structs for ROS message types, built from the typestore's field definitions."""

    def __init__(self) -> None:
        from cyclonedds.idl import types

        self._t: Any = types  # cyclonedds' array/sequence are subscripted at run time; mypy sees no generics
        self._structs: dict[str, Any] = {}
        self._base = {
            "bool": bool, "byte": types.uint8, "char": types.uint8, "int8": types.int8, "uint8": types.uint8,
            "int16": types.int16, "uint16": types.uint16, "int32": types.int32, "uint32": types.uint32,
            "int64": types.int64, "uint64": types.uint64, "float32": types.float32, "float64": types.float64,
            "string": str,
        }  # fmt: skip

    def _field(self, node: Any) -> Any:
        kind, spec = node
        if kind == Nodetype.BASE:
            return self._base[spec[0]]
        if kind == Nodetype.NAME:
            return self.struct(spec)
        inner, size = spec
        if kind == Nodetype.ARRAY:
            return self._t.array[self._field(inner), size]
        return self._t.sequence[self._field(inner), size] if size else self._t.sequence[self._field(inner)]

    def struct(self, typename: str) -> Any:
        from cyclonedds.idl import make_idl_struct

        if typename not in self._structs:
            _consts, fields = CODEC.typestore.fielddefs[typename]
            members = {name: self._field(node) for name, node in fields} or {
                "structure_needs_at_least_one_member": self._t.uint8
            }
            self._structs[typename] = make_idl_struct(
                typename.rsplit("/", maxsplit=1)[-1], dds_type_name(typename), members
            )
        return self._structs[typename]


def to_cyclone(types: CycloneTypes, msg: Any, typename: str) -> Any:
    """A rosbags message as the Cyclone struct of the same type (recursively)."""
    _consts, fields = CODEC.typestore.fielddefs[typename]
    values = {}
    for name, desc in fields:
        value = getattr(msg, name)
        match desc:
            case (Nodetype.NAME, str() as sub):  # a nested message
                value = to_cyclone(types, value, sub)
            case (Nodetype.SEQUENCE, ((Nodetype.NAME, str() as sub), _)):  # a sequence of messages
                value = [to_cyclone(types, v, sub) for v in value]
            case _ if isinstance(value, np.ndarray):
                value = value.tolist()
        values[name] = value
    return types.struct(typename)(**values)


def from_cyclone(sample: Any, typename: str) -> Any:
    """A Cyclone struct back as a rosbags message."""
    _consts, fields = CODEC.typestore.fielddefs[typename]
    values = {}
    for name, desc in fields:
        value = getattr(sample, name)
        match desc:
            case (Nodetype.NAME, str() as sub):
                value = from_cyclone(value, sub)
            case (Nodetype.SEQUENCE, ((Nodetype.NAME, str() as sub), _)):
                value = [from_cyclone(v, sub) for v in value]
            case (Nodetype.SEQUENCE, ((Nodetype.BASE, (base, _)), _)) if base != "string":
                value = np.asarray(value, dtype=np.dtype(_NUMPY[base]))
        values[name] = value
    return CODEC.msg_class(typename)(**values)


_NUMPY = {"uint8": "uint8", "float32": "float32", "float64": "float64", "int32": "int32", "uint32": "uint32"}


def sample_transition(episode: int) -> Transition:
    image = EncodedImage("wrist", "jpeg", bytes(range(200)), 1_700_000_000_000_000_123)
    obs = Observation(
        robot_id="cyclone_arm",
        task="peg_insertion",
        episode_id=episode,
        step=3,
        state=np.arange(7, dtype=np.float32) / 7,
        stamp_ns=1_700_000_000_000_000_000,
        images=(image,),
        state_names=tuple(f"s{i}" for i in range(7)),
        embodiment_id=1,
        policy_version=12,
    )
    action = Action(
        "cyclone_arm", episode, 3, np.full(7, 0.25, np.float32), 1_700_000_000_050_000_000, policy_version=12
    )
    return Transition(
        observation=obs,
        action=action,
        reward=-0.5,
        terminated=False,
        truncated=True,
        success=False,
        is_demo=True,
        next_observation=obs,
        stamp_ns=1_700_000_000_100_000_000,
    )


@pytest.fixture
def cyclone(tmp_path: Any) -> Iterator[Any]:
    """A Cyclone DDS participant in this test run's ROS domain, unicast on loopback."""
    pytest.importorskip("cyclonedds")
    os.environ["CYCLONEDDS_URI"] = CYCLONE_CONFIG
    from cyclonedds.domain import DomainParticipant

    participant = DomainParticipant(int(os.environ["ROS_DOMAIN_ID"]))
    try:
        yield participant
    finally:
        os.environ.pop("CYCLONEDDS_URI", None)
        del participant


def test_a_cyclone_writer_reaches_a_ros_runtime_node(
    cyclone: Any, make_ros_bus: Callable[..., Bus], topic: str
) -> None:
    from cyclonedds.pub import DataWriter
    from cyclonedds.qos import Policy, Qos
    from cyclonedds.topic import Topic

    got: list[bytes] = []
    make_ros_bus("fastdds_learner").create_subscription(topic, TRANSITION, got.append)
    types = CycloneTypes()
    reliable = Qos(Policy.Reliability.Reliable(max_blocking_time=1_000_000_000), Policy.History.KeepAll)
    writer = DataWriter(cyclone, Topic(cyclone, "rt" + topic, types.struct(TRANSITION)), qos=reliable)
    sent = sample_transition(41)
    sample = to_cyclone(types, transition_to_msg(sent, CODEC), TRANSITION)

    def delivered() -> bool:
        writer.write(sample)
        return bool(got)

    assert wait_until(delivered, 30.0, 0.2), "no Transition from the Cyclone participant reached the Fast DDS node"
    received = transition_from_msg(CODEC.decode(got[0], TRANSITION))
    assert received.episode_id == 41 and received.robot_id == "cyclone_arm" and received.truncated
    assert np.array_equal(received.observation.state, sent.observation.state)
    assert received.observation.images[0].data == sent.observation.images[0].data
    assert received.observation.state_names == sent.observation.state_names
    assert np.array_equal(received.action.data, sent.action.data) and received.reward == -0.5


def test_a_ros_runtime_node_reaches_a_cyclone_reader(
    cyclone: Any, make_ros_bus: Callable[..., Bus], topic: str
) -> None:
    from cyclonedds.qos import Policy, Qos
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic

    types = CycloneTypes()
    reliable = Qos(Policy.Reliability.Reliable(max_blocking_time=1_000_000_000), Policy.History.KeepAll)
    reader = DataReader(cyclone, Topic(cyclone, "rt" + topic, types.struct(TRANSITION)), qos=reliable)
    pub = make_ros_bus("fastdds_robot").create_publisher(topic, TRANSITION)
    sent = sample_transition(42)
    payload = CODEC.encode(transition_to_msg(sent, CODEC), TRANSITION)
    samples: list[Any] = []
    lock = threading.Lock()

    def delivered() -> bool:
        pub.publish(payload)
        with lock:
            samples.extend(reader.take(N=10))
        return bool(samples)

    assert wait_until(delivered, 30.0, 0.2), "no Transition from the Fast DDS node reached the Cyclone reader"
    received = transition_from_msg(from_cyclone(samples[0], TRANSITION))
    assert received.episode_id == 42 and received.is_demo and received.task == "peg_insertion"
    assert np.array_equal(received.observation.state, sent.observation.state)
    assert received.observation.images[0].data == sent.observation.images[0].data
    assert received.action.policy_version == 12
    time.sleep(0.1)
