"""`user buffer import-bag` imports a bag whole or not at all, once, and decodes the custom types a bag carries
the definitions of (issue 13, finding 9)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from mcap.writer import Writer as McapWriter
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import get_types_from_msg
from rosbags.typesys.store import Typestore

from test.buffer.bags.test_bagread import CODEC, MAPPING, STEP_NS, T0, record_bag
from user.buffer import BufferConfig, ReplayBuffer, StorageConfig
from user.buffer.bags.bag_import import STAGING_DIR, import_bag
from user.buffer.bags.bagread import BagReader
from user.buffer.bags.import_ledger import LEDGER_FILE
from user.buffer.bags.importer import BagImporter, ImportMapping
from user.buffer.errors import BagReadError, MappingError
from user.cli.main import main
from user.config.strict import from_mapping
from user.interfaces.codec import Codec
from user.interfaces.domain import Transition
from user.interfaces.stamps import header
from user.interfaces.typestore import build_typestore

BAG_MAPPING = from_mapping(ImportMapping, MAPPING, where="mapping")


def _import(tmp_path: Path, bag: Path, *extra: str, mapping: dict[str, Any] = MAPPING) -> int:
    path = tmp_path / "mapping.yaml"
    path.write_text(yaml.safe_dump(mapping))
    return main(["buffer", "import-bag", str(bag), "--into", str(tmp_path / "buf"), "--mapping", str(path), *extra])


def _stored(buffer: Path) -> list[tuple[str, int, int]]:
    """(robot, episode id, steps) of every stored episode; the buffer verifies."""
    with ReplayBuffer.open(buffer, read_only=True) as buf:
        assert buf.verify().ok
        return [(e.robot_id, e.episode_id, e.steps) for e in buf.storage.index.episodes()]


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def _truncate(topic: str, index: int) -> Any:
    return lambda t, i, data: data[:12] if (t, i) == (topic, index) else data


# ------------------------------------------------------------------------------------------------ whole or nothing


def test_a_corrupt_message_mid_bag_stores_nothing_and_says_where_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    bag = tmp_path / "bag"
    record_bag(bag, StoragePlugin.MCAP, tamper=_truncate("/joint_states", 6))  # episode 2, step 1
    assert _import(tmp_path, bag) == 2
    (line,) = _errors(caplog)
    assert "\n" not in line and "Traceback" not in capsys.readouterr().err
    assert line.startswith(f"{bag}: /joint_states message 6 (log time 1700000005.600000000): cannot decode")
    assert "sensor_msgs/msg/JointState" in line
    assert _stored(tmp_path / "buf") == []  # episode 1 was whole, yet nothing of the bag is stored
    assert not (tmp_path / "buf" / STAGING_DIR).exists() and not (tmp_path / "buf" / LEDGER_FILE).exists()
    record_bag(tmp_path / "good", StoragePlugin.MCAP)
    assert _import(tmp_path, tmp_path / "good") == 0  # no episode id was taken by the failed import
    assert _stored(tmp_path / "buf") == [("arm", 0, 5), ("arm", 1, 3)]


def test_a_non_finite_value_is_refused_before_anything_is_stored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    nan = CODEC.encode(CODEC.msg_class("std_msgs/msg/Float32")(data=float("nan")))
    record_bag(tmp_path / "bag", StoragePlugin.SQLITE3, tamper=lambda t, i, d: nan if (t, i) == ("/reward", 6) else d)
    assert _import(tmp_path, tmp_path / "bag") == 2
    (line,) = _errors(caplog)
    assert "/reward message 6 (log time 1700000005.600000020): 'data' is not finite: nan at entry 0" in line
    assert _stored(tmp_path / "buf") == []


def test_an_action_that_changes_size_is_refused(tmp_path: Path) -> None:
    cls = CODEC.msg_class
    wide = cls("std_msgs/msg/Float64MultiArray")(
        layout=cls("std_msgs/msg/MultiArrayLayout")(dim=[], data_offset=0), data=np.zeros(3)
    )
    record_bag(
        tmp_path / "bag", StoragePlugin.MCAP, tamper=lambda t, i, d: CODEC.encode(wide) if (t, i) == ("/cmd", 2) else d
    )
    importer = BagImporter(BAG_MAPPING, CODEC, as_demos=True)
    with pytest.raises(Exception, match=r"/cmd message 2 .*the action has 3 values where earlier messages had 2"):
        list(importer.episodes(BagReader(tmp_path / "bag")))


def test_an_episode_longer_than_the_buffer_allows_is_refused_whole(tmp_path: Path) -> None:
    record_bag(tmp_path / "bag", StoragePlugin.MCAP)  # episodes of 5 and 3 steps
    config = BufferConfig(prefetch=0, storage=StorageConfig(max_episode_steps=4))
    with pytest.raises(MappingError, match="episode 0 has 5 steps, more than .*max_episode_steps=4"):
        import_bag(tmp_path / "bag", tmp_path / "buf", BAG_MAPPING, as_demos=True, config=config)
    assert _stored(tmp_path / "buf") == []


# ------------------------------------------------------------------------------------------------ once


def test_importing_the_same_bag_again_is_a_no_op_that_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record_bag(tmp_path / "bag", StoragePlugin.MCAP)
    assert _import(tmp_path, tmp_path / "bag", "--as-demos") == 0
    assert "imported 2 demonstration episodes (8 transitions)" in capsys.readouterr().out
    shutil.copytree(tmp_path / "bag", tmp_path / "copy")  # the same recording from elsewhere
    for again, extra in ((tmp_path / "bag", ["--as-demos"]), (tmp_path / "copy", [])):
        assert _import(tmp_path, again, *extra) == 0
        out = capsys.readouterr().out
        assert f"{again} is already in {tmp_path / 'buf'}" in out and "nothing imported" in out
        assert f"imported from {tmp_path / 'bag'}: episodes 0..1 of arm, 8 transitions" in out
    assert "with another mapping or --as-demos" in out  # the copy was offered as online data
    assert _stored(tmp_path / "buf") == [("arm", 0, 5), ("arm", 1, 3)]


def test_an_interrupted_import_is_finished_by_the_same_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record_bag(tmp_path / "bag", StoragePlugin.MCAP)
    record_bag(tmp_path / "other", StoragePlugin.MCAP, steps=(2,))
    add = ReplayBuffer.add
    added = []

    def interrupted_in_episode_two(buf: ReplayBuffer, transition: Transition, *args: Any, **kwargs: Any) -> Any:
        added.append(transition)
        if len(added) == 7:  # Ctrl-C on the second step of the second episode
            raise KeyboardInterrupt
        return add(buf, transition, *args, **kwargs)

    monkeypatch.setattr(ReplayBuffer, "add", interrupted_in_episode_two)
    with pytest.raises(KeyboardInterrupt):
        import_bag(tmp_path / "bag", tmp_path / "buf", BAG_MAPPING, as_demos=True)
    monkeypatch.undo()
    assert _stored(tmp_path / "buf") == [("arm", 0, 5)]
    other = import_bag(tmp_path / "other", tmp_path / "buf", BAG_MAPPING, as_demos=True)
    assert other.outcome == "imported" and other.record.first_episode_id == 2  # 0..1 stay the interrupted bag's
    assert _stored(tmp_path / "buf") == [("arm", 0, 5), ("arm", 2, 2)]
    wrong = {**MAPPING, "episode_gap_s": 0.0}
    with pytest.raises(Exception, match="interrupted import of this bag .* used another mapping"):
        import_bag(tmp_path / "bag", tmp_path / "buf", from_mapping(ImportMapping, wrong, where="m"), as_demos=True)
    done = import_bag(tmp_path / "bag", tmp_path / "buf", BAG_MAPPING, as_demos=True)
    assert (done.outcome, done.already_stored, done.record.state) == ("resumed", 1, "done")
    assert _stored(tmp_path / "buf") == [("arm", 0, 5), ("arm", 2, 2), ("arm", 1, 3)]
    assert import_bag(tmp_path / "bag", tmp_path / "buf", BAG_MAPPING, as_demos=True).outcome == "already"


def test_a_damaged_record_of_imports_is_one_error(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    record_bag(tmp_path / "bag", StoragePlugin.MCAP, steps=(2,))
    (tmp_path / "buf").mkdir()
    (tmp_path / "buf" / LEDGER_FILE).write_text('{"format": 1, "bags": [{"digest": 3}]}')
    assert _import(tmp_path, tmp_path / "bag") == 2
    (line,) = _errors(caplog)
    assert f"{tmp_path / 'buf' / LEDGER_FILE}: bags[0]: a record needs exactly the keys" in line


# ------------------------------------------------------------------------------------------------ custom types

CUSTOM = {
    "arm_teleop_msgs/msg/Gripper": "float64 width\nbool closed\n",
    "arm_teleop_msgs/msg/ArmCommand": "std_msgs/Header header\nfloat64[3] linear\narm_teleop_msgs/Gripper gripper\n",
}
CUSTOM_MAPPING = {
    "robot_id": "arx",
    "action": {"topic": "/arm_cmd", "field": ["linear", "gripper.width"]},
    "state": [{"topic": "/joint_states", "field": "position"}],
}


def _custom_store() -> Typestore:
    store = build_typestore()
    for name, text in CUSTOM.items():
        store.register(get_types_from_msg(text, name))
    return store


def _custom_messages(codec: Codec, steps: int) -> list[tuple[str, int, bytes]]:
    """(topic, log time, CDR) of a teleoperated arm sending arm_teleop_msgs/ArmCommand."""
    cls = codec.msg_class
    out = []
    for step in range(steps):
        now = T0 + step * STEP_NS
        joints = cls("sensor_msgs/msg/JointState")(
            header=header(now, "", codec), name=["j"], position=np.array([float(step)]), velocity=np.zeros(1),
            effort=np.zeros(1),
        )  # fmt: skip
        grip = cls("arm_teleop_msgs/msg/Gripper")(width=0.01 * step, closed=False)
        cmd = cls("arm_teleop_msgs/msg/ArmCommand")(
            header=header(now, "", codec), linear=np.full(3, step, float), gripper=grip
        )
        out += [("/joint_states", now, codec.encode(joints)), ("/arm_cmd", now + 1, codec.encode(cmd))]
    return out


@pytest.mark.parametrize("storage", [StoragePlugin.MCAP, StoragePlugin.SQLITE3])
def test_a_bag_of_custom_types_imports_with_the_definitions_it_carries(tmp_path: Path, storage: StoragePlugin) -> None:
    store = _custom_store()
    codec = Codec(store)
    assert not CODEC.has_type("arm_teleop_msgs/msg/ArmCommand")  # unknown here: no .msg file, no USER_INTERFACE_DIR
    with Writer(tmp_path / "bag", version=8, storage_plugin=storage) as bag:
        types = {"/joint_states": "sensor_msgs/msg/JointState", "/arm_cmd": "arm_teleop_msgs/msg/ArmCommand"}
        conns = {topic: bag.add_connection(topic, typ, typestore=store) for topic, typ in types.items()}
        for topic, stamp, data in _custom_messages(codec, 3):
            bag.write(conns[topic], stamp, data)
    assert _import(tmp_path, tmp_path / "bag", mapping=CUSTOM_MAPPING) == 0
    assert _stored(tmp_path / "buf") == [("arx", 0, 3)]
    with ReplayBuffer.open(tmp_path / "buf", read_only=True) as buf:
        actions = np.stack([t.action.data for t in buf.get(list(range(3)))])
    assert np.allclose(actions, np.array([[0, 0, 0, 0], [1, 1, 1, 0.01], [2, 2, 2, 0.02]]))


IDL = """\
================================================================================
IDL: arm_teleop_msgs/msg/ArmCommand
#include "arm_teleop_msgs/msg/Gripper.idl"
#include "std_msgs/msg/Header.idl"

module arm_teleop_msgs {
  module msg {
    struct ArmCommand {
      std_msgs::msg::Header header;
      double linear[3];
      arm_teleop_msgs::msg::Gripper gripper;
    };
  };
};
================================================================================
IDL: arm_teleop_msgs/msg/Gripper
module arm_teleop_msgs {
  module msg {
    struct Gripper {
      double width;
      boolean closed;
    };
  };
};
"""


def test_an_mcap_file_with_ros2idl_schemas_decodes(tmp_path: Path) -> None:
    codec = Codec(_custom_store())
    path = tmp_path / "idl.mcap"
    with open(path, "wb") as f:
        writer = McapWriter(f)
        writer.start(profile="ros2")
        schemas = {
            "/arm_cmd": writer.register_schema("arm_teleop_msgs/msg/ArmCommand", "ros2idl", IDL.encode()),
            "/joint_states": writer.register_schema(  # as another tool writes it: a comment more than here
                "sensor_msgs/msg/JointState",
                "ros2msg",
                ("# recorded elsewhere\n" + codec.definition("sensor_msgs/msg/JointState")).encode(),
            ),
        }
        channels = {topic: writer.register_channel(topic, "cdr", schema) for topic, schema in schemas.items()}
        for topic, stamp, data in _custom_messages(codec, 2):
            writer.add_message(channels[topic], stamp, data, stamp)
        writer.finish()  # type: ignore[no-untyped-call]  # mcap's writer leaves it unannotated
    reader = BagReader(path)
    assert reader.definitions()["arm_teleop_msgs/msg/ArmCommand"] == ("ros2idl", IDL)
    bag_codec = reader.codec(CODEC, {"/arm_cmd"})
    commands = [reader.decode(m, bag_codec) for m in reader.messages({"/arm_cmd"})]
    assert [c.gripper.width for c in commands] == [0.0, 0.01] and commands[1].linear.tolist() == [1, 1, 1]
    assert reader.codec(CODEC, {"/joint_states"}) is not CODEC  # its own definitions win, even of standard types
    states = [reader.decode(m, reader.codec(CODEC, {"/joint_states"})) for m in reader.messages({"/joint_states"})]
    assert len(states) == 2 and all(s.__msgtype__ == "sensor_msgs/msg/JointState" for s in states)


def test_a_definition_that_does_not_parse_is_named_unless_the_type_is_known_here(tmp_path: Path) -> None:
    path = tmp_path / "bad.mcap"
    with open(path, "wb") as f:
        writer = McapWriter(f)
        writer.start(profile="ros2")
        for topic, typename in (("/reward", "std_msgs/msg/Float32"), ("/cmd", "arm_teleop_msgs/msg/ArmCommand")):
            schema = writer.register_schema(typename, "ros2msg", b"float32[ data\n")
            writer.add_message(writer.register_channel(topic, "cdr", schema), T0, b"\x00\x01\x00\x00", T0)
        writer.finish()  # type: ignore[no-untyped-call]  # mcap's writer leaves it unannotated
    reader = BagReader(path)
    assert reader.codec(CODEC, {"/reward"}) is CODEC  # Float32 is known here: decoded as Humble defines it
    with pytest.raises(BagReadError, match=r"bad.mcap: ros2msg definition of arm_teleop_msgs/msg/ArmCommand does not"):
        reader.codec(CODEC, {"/cmd"})
