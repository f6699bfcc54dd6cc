"""metadata.yaml: Humble's version-5 layout when written, any version when read (real rosbag2 fixtures)."""

from pathlib import Path

import pytest
import yaml

from test.conftest import SHARED
from user.buffer.disk.metadata import (
    HUMBLE_VERSION,
    BagMetadata,
    FileInfo,
    TopicInfo,
    qos_profile_yaml,
    read_metadata,
    to_yaml,
    write_metadata,
)
from user.buffer.errors import BagReadError

FIXTURES = SHARED / "fixtures" / "rosbag2"
# Fields Humble's rosbag2 (version 5) writes, in its order; nothing from later versions.
HUMBLE_KEYS = [
    "version",
    "storage_identifier",
    "duration",
    "starting_time",
    "message_count",
    "topics_with_message_count",
    "compression_format",
    "compression_mode",
    "relative_file_paths",
    "files",
]


def _meta() -> BagMetadata:
    return BagMetadata(
        storage_identifier="mcap",
        relative_file_paths=("seg_000000_0.mcap",),
        topics=(TopicInfo("/transitions", "user/msg/Transition", "cdr", qos_profile_yaml(), 7),),
        starting_time_ns=1_700_000_000_123_456_789,
        duration_ns=5_000_000_000,
        message_count=7,
        files=(FileInfo("seg_000000_0.mcap", 1_700_000_000_123_456_789, 5_000_000_000, 7),),
    )


def test_written_metadata_has_humbles_version_5_layout(tmp_path: Path) -> None:
    write_metadata(tmp_path, _meta())
    doc = yaml.safe_load((tmp_path / "metadata.yaml").read_text())
    info = doc["rosbag2_bagfile_information"]
    assert list(info) == HUMBLE_KEYS
    assert info["version"] == HUMBLE_VERSION == 5
    topic = info["topics_with_message_count"][0]
    assert list(topic) == ["topic_metadata", "message_count"]
    assert list(topic["topic_metadata"]) == ["name", "type", "serialization_format", "offered_qos_profiles"]
    assert isinstance(topic["topic_metadata"]["offered_qos_profiles"], str)  # a list here breaks Humble
    assert info["files"][0] == {
        "path": "seg_000000_0.mcap",
        "starting_time": {"nanoseconds_since_epoch": 1_700_000_000_123_456_789},
        "duration": {"nanoseconds": 5_000_000_000},
        "message_count": 7,
    }
    assert not list(tmp_path.glob(".*tmp"))  # written through a temporary file, renamed


def test_qos_string_has_the_fields_real_recorders_store() -> None:
    fixture = yaml.safe_load((FIXTURES / "humble_sqlite3_talker" / "metadata.yaml").read_text())
    real = fixture["rosbag2_bagfile_information"]["topics_with_message_count"][0]["topic_metadata"]
    ours, theirs = yaml.safe_load(qos_profile_yaml()), yaml.safe_load(real["offered_qos_profiles"])
    assert [list(p) for p in ours] == [list(p) for p in theirs]


def test_round_trip(tmp_path: Path) -> None:
    write_metadata(tmp_path, _meta())
    back = read_metadata(tmp_path)
    assert back == _meta()


@pytest.mark.parametrize("bag", ["humble_sqlite3_talker", "jazzy_mcap_talker"])
def test_reads_real_rosbag2_metadata(bag: str) -> None:
    meta = read_metadata(FIXTURES / bag)
    assert meta.version == 4
    assert meta.message_count == 20
    assert {t.name: t.message_count for t in meta.topics} == {"/topic": 10, "/rosout": 10, "/parameter_events": 0}


def test_reads_version_9_qos_lists(tmp_path: Path) -> None:
    text = to_yaml(_meta()).replace("version: 5", "version: 9")
    doc = yaml.safe_load(text)
    doc["rosbag2_bagfile_information"]["topics_with_message_count"][0]["topic_metadata"]["offered_qos_profiles"] = [
        {"history": "keep_last", "depth": 10}
    ]
    (tmp_path / "metadata.yaml").write_text(yaml.safe_dump(doc))
    meta = read_metadata(tmp_path)
    assert meta.version == 9
    assert "keep_last" in meta.topics[0].offered_qos_profiles


def test_bad_metadata_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "metadata.yaml").write_text("rosbag2_bagfile_information: {version: 5}\n")
    with pytest.raises(BagReadError, match="metadata.yaml: malformed"):
        read_metadata(tmp_path)
    with pytest.raises(BagReadError, match="cannot read"):
        read_metadata(tmp_path / "nowhere")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"rosbag2_bagfile_information:\n  version: \xff\xfe\n", r"not UTF-8 text \(byte 40: invalid start byte\)$"),
        (b"[" * 5000, r"not valid YAML: nested too deeply$"),
        (b"rosbag2_bagfile_information: {version: [", r"not valid YAML: while parsing a flow node .*$"),
        (
            b"rosbag2_bagfile_information: {version: 5, storage_identifier: mcap, starting_time: [1]}",
            r"malformed metadata \(AttributeError: ",
        ),
    ],
)
def test_damaged_metadata_is_one_line_naming_the_file(tmp_path: Path, text: bytes, message: str) -> None:
    """A segment's metadata.yaml overwritten by anything: a `BagReadError` of one line, never another exception."""
    (tmp_path / "metadata.yaml").write_bytes(text)
    with pytest.raises(BagReadError, match=rf"^{tmp_path / 'metadata.yaml'}: {message}") as exc:
        read_metadata(tmp_path)
    assert "\n" not in str(exc.value)
