"""Foreign bags: the real rosbag2 fixtures (sqlite3 and MCAP) read message by message, a bag cut short
reads up to the cut, and a bag of standard topics imports into whole episodes through a YAML mapping."""

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from mcap.reader import make_reader
from mcap.writer import CompressionType
from mcap.writer import Writer as McapWriter
from rosbags.rosbag2 import StoragePlugin, Writer

from test.buffer.factories import jpeg
from test.conftest import SHARED
from user.buffer.bags.bagread import BagReader
from user.buffer.bags.importer import BagImporter, ImportMapping
from user.buffer.errors import BagReadError, MappingError
from user.config.strict import ConfigError, from_mapping
from user.interfaces import default_codec
from user.interfaces.stamps import header

FIXTURES = SHARED / "fixtures" / "rosbag2"
CODEC = default_codec()
T0 = 1_700_000_000_000_000_000
STEP_NS = 100_000_000


@pytest.mark.parametrize("bag", ["humble_sqlite3_talker", "jazzy_mcap_talker"])
def test_reads_every_message_of_real_bags(bag: str) -> None:
    reader = BagReader(FIXTURES / bag)
    assert {t.name: t.type for t in reader.topics().values()} == {
        "/topic": "std_msgs/msg/String",
        "/rosout": "rcl_interfaces/msg/Log",
        "/parameter_events": "rcl_interfaces/msg/ParameterEvent",
    }
    messages = list(reader.messages())
    assert len(messages) == 20
    assert [m.log_time_ns for m in messages] == sorted(m.log_time_ns for m in messages)
    said = [reader.decode(m, CODEC).data for m in messages if m.topic == "/topic"]
    assert said == [f"Hello, world! {i}" for i in range(10)]
    logs = [reader.decode(m, CODEC) for m in messages if m.topic == "/rosout"]
    assert logs[3].msg == "Publishing: 'Hello, world! 3'"


def test_reads_a_single_storage_file_and_a_cut_mcap(tmp_path: Path) -> None:
    assert len(list(BagReader(FIXTURES / "humble_sqlite3_talker" / "talker.db3").messages())) == 20
    whole = tmp_path / "whole.mcap"
    with open(FIXTURES / "jazzy_mcap_talker" / "talker.mcap", "rb") as src, open(whole, "wb") as out:
        writer = McapWriter(out, chunk_size=300, compression=CompressionType.NONE)  # small chunks, as recorded
        writer.start(profile="ros2")
        reader = make_reader(src)
        summary = reader.get_summary()
        assert summary is not None
        for schema in summary.schemas.values():
            writer.register_schema(schema.name, schema.encoding, schema.data)
        for ch in summary.channels.values():
            writer.register_channel(ch.topic, ch.message_encoding, ch.schema_id, ch.metadata)
        for _, ch, msg in reader.iter_messages():
            writer.add_message(ch.id, msg.log_time, msg.data, msg.publish_time)
        writer.finish()  # type: ignore[no-untyped-call]  # mcap's writer leaves it unannotated
    data = whole.read_bytes()
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(data[: len(data) // 2])  # the recorder was killed: no summary, no footer
    messages = list(BagReader(cut).messages())
    assert 5 < len(messages) < 20
    assert [CODEC.decode(m.data, m.type).__msgtype__ for m in messages[:2]] == [
        "rcl_interfaces/msg/Log",
        "std_msgs/msg/String",
    ]


def test_not_a_bag(tmp_path: Path) -> None:
    with pytest.raises(BagReadError, match="not a rosbag2 bag"):
        BagReader(tmp_path / "nothing.txt")
    with pytest.raises(BagReadError, match="no .db3 or .mcap"):
        BagReader(tmp_path)


Tamper = Callable[[str, int, bytes], bytes]  # (topic, index of the message on it, CDR bytes) -> bytes written


def record_bag(
    path: Path, storage: StoragePlugin, steps: tuple[int, ...] = (5, 3), tamper: Tamper | None = None
) -> None:
    """What `ros2 bag record` of a teleoperated arm leaves: joint states, a command topic, a compressed and a
    raw camera, a reward; two episodes separated by a pause. `tamper` may change any message's bytes."""
    store = CODEC.typestore
    cls = CODEC.msg_class
    with Writer(path, version=8, storage_plugin=storage) as bag:
        topics = {
            "/joint_states": "sensor_msgs/msg/JointState",
            "/cmd": "std_msgs/msg/Float64MultiArray",
            "/wrist/compressed": "sensor_msgs/msg/CompressedImage",
            "/front/raw": "sensor_msgs/msg/Image",
            "/reward": "std_msgs/msg/Float32",
        }
        conns = {t: bag.add_connection(t, typ, typestore=store) for t, typ in topics.items()}
        written: dict[str, int] = {}

        def write(topic: str, stamp: int, data: bytes) -> None:
            index = written[topic] = written.get(topic, -1) + 1
            bag.write(conns[topic], stamp, tamper(topic, index, data) if tamper else data)

        now = T0
        for n, count in enumerate(steps):
            for step in range(count):
                pos = np.arange(3, dtype=np.float64) + 10 * n + step
                msgs = {
                    "/joint_states": cls("sensor_msgs/msg/JointState")(
                        header=header(now, "", CODEC), name=["a", "b", "c"], position=pos,
                        velocity=np.zeros(3), effort=np.zeros(3),
                    ),
                    "/wrist/compressed": cls("sensor_msgs/msg/CompressedImage")(
                        header=header(now, "wrist", CODEC), format="jpeg",
                        data=np.frombuffer(jpeg(step), dtype=np.uint8),
                    ),
                    "/front/raw": cls("sensor_msgs/msg/Image")(
                        header=header(now, "front", CODEC), height=4, width=2, encoding="rgb8", is_bigendian=0,
                        step=6, data=np.full(24, step, dtype=np.uint8),
                    ),
                }  # fmt: skip
                for offset, (topic, msg) in enumerate(msgs.items()):
                    write(topic, now + offset, CODEC.encode(msg))
                layout = cls("std_msgs/msg/MultiArrayLayout")(dim=[], data_offset=0)
                cmd = cls("std_msgs/msg/Float64MultiArray")(layout=layout, data=np.array([step, -step], dtype=float))
                write("/cmd", now + 10, CODEC.encode(cmd))
                reward = cls("std_msgs/msg/Float32")(data=1.0 if step == count - 1 else 0.0)
                write("/reward", now + 20, CODEC.encode(reward))
                now += STEP_NS
            now += 5_000_000_000  # operator resets the scene


MAPPING = {
    "robot_id": "arm",
    "task": "stack",
    "action": {"topic": "/cmd"},
    "state": [{"topic": "/joint_states", "field": "position", "indices": [0, 2]}],
    "images": [{"topic": "/wrist/compressed", "camera": "wrist"}, {"topic": "/front/raw", "camera": "front"}],
    "reward": {"topic": "/reward"},
    "episode_gap_s": 1.0,
}


@pytest.mark.parametrize("storage", [StoragePlugin.SQLITE3, StoragePlugin.MCAP])
def test_import_standard_topics_as_episodes(tmp_path: Path, storage: StoragePlugin) -> None:
    record_bag(tmp_path / "bag", storage)
    mapping = from_mapping(ImportMapping, MAPPING, where="mapping")
    importer = BagImporter(mapping, CODEC, as_demos=True, first_episode_id=7)
    episodes = list(importer.episodes(BagReader(tmp_path / "bag")))
    assert [len(e) for e in episodes] == [5, 3]
    first = episodes[0]
    assert [t.episode_id for t in first] == [7] * 5 and [t.step for t in first] == list(range(5))
    assert first[2].observation.state.tolist() == [2.0, 4.0]  # position[0], position[2] at that step
    assert first[2].action.data.tolist() == [2.0, -2.0]
    assert first[2].next_observation.state.tolist() == first[3].observation.state.tolist()
    assert [t.reward for t in first] == [0, 0, 0, 0, 1]
    assert first[-1].terminated and first[-1].success and all(t.is_demo for t in first)
    assert [img.camera for img in first[0].observation.images] == ["wrist", "front"]
    assert first[1].observation.images[0].data == jpeg(1)  # compressed frames are kept as they are
    assert first[1].observation.images[1].data[:2] == b"\xff\xd8"  # raw frames are stored as JPEG


def test_mapping_errors_name_the_problem(tmp_path: Path) -> None:
    record_bag(tmp_path / "bag", StoragePlugin.SQLITE3, steps=(2,))
    reader = BagReader(tmp_path / "bag")
    bad_topic = from_mapping(ImportMapping, {**MAPPING, "action": {"topic": "/nope"}}, where="m")
    with pytest.raises(MappingError, match="no topic /nope"):
        list(BagImporter(bad_topic, CODEC, as_demos=True).episodes(reader))
    bad_field = from_mapping(ImportMapping, {**MAPPING, "action": {"topic": "/cmd", "field": "layout"}}, where="m")
    with pytest.raises(MappingError, match="'layout' is a std_msgs/msg/MultiArrayLayout message"):
        list(BagImporter(bad_field, CODEC, as_demos=True).episodes(reader))
    with pytest.raises(ConfigError, match="unknown key 'topics'"):
        from_mapping(ImportMapping, {**MAPPING, "topics": []}, where="m")


def test_fixture_bags_are_untouched_by_reading(tmp_path: Path) -> None:
    copy = tmp_path / "talker"
    shutil.copytree(FIXTURES / "humble_sqlite3_talker", copy)
    before = {p.name: p.read_bytes() for p in copy.iterdir()}
    list(BagReader(copy).messages())
    assert {p.name: p.read_bytes() for p in copy.iterdir() if p.name in before} == before


def test_definitions_the_real_bags_carry() -> None:
    mcap = BagReader(FIXTURES / "jazzy_mcap_talker").definitions()
    assert sorted(mcap) == ["rcl_interfaces/msg/Log", "rcl_interfaces/msg/ParameterEvent", "std_msgs/msg/String"]
    assert mcap["std_msgs/msg/String"][0] == "ros2msg" and "string data" in mcap["std_msgs/msg/String"][1]
    assert BagReader(FIXTURES / "humble_sqlite3_talker").definitions() == {}  # Humble's sqlite3 has no such table
    reader = BagReader(FIXTURES / "jazzy_mcap_talker")
    codec = reader.codec(CODEC, {"/topic"})
    assert [reader.decode(m, codec).data for m in reader.messages({"/topic"})][:2] == [
        "Hello, world! 0",
        "Hello, world! 1",
    ]
    assert BagReader(FIXTURES / "humble_sqlite3_talker").codec(CODEC) is CODEC


def test_a_bag_is_known_by_its_messages(tmp_path: Path) -> None:
    record_bag(tmp_path / "db3", StoragePlugin.SQLITE3, steps=(2,))
    record_bag(tmp_path / "mcap", StoragePlugin.MCAP, steps=(2,))

    def flip(topic: str, index: int, data: bytes) -> bytes:
        return data[:-1] + bytes([data[-1] ^ 1]) if (topic, index) == ("/cmd", 1) else data

    record_bag(tmp_path / "flipped", StoragePlugin.MCAP, steps=(2,), tamper=flip)
    digests = {name: BagReader(tmp_path / name).digest() for name in ("db3", "mcap", "flipped")}
    assert digests["db3"] == digests["mcap"] != digests["flipped"]  # same recording in either storage; one byte off
