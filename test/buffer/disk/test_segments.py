"""Segments: MCAP files that an independent reader decodes, messages at the offsets the writer reports."""

from pathlib import Path

import pytest
from mcap.reader import NonSeekingReader, make_reader
from mcap_ros2.decoder import DecoderFactory

from test.buffer.factories import episode
from user.buffer.disk.mcapscan import scan_file
from user.buffer.disk.segment_writer import SegmentWriter
from user.buffer.disk.segments import (
    EVENT_TOPIC,
    TRANSITION_TOPIC,
    TRANSITION_TYPE,
    OutMessage,
    Position,
    SegmentReader,
)
from user.buffer.errors import CorruptRecordError, TruncatedSegmentError
from user.interfaces import default_codec
from user.interfaces.domain import transition_from_msg, transition_to_msg

CODEC = default_codec()


def _write(path: Path, episodes: int = 3, steps: int = 4, finish: bool = True) -> list[list[Position]]:
    writer = SegmentWriter(path, CODEC, chunk_bytes=1 << 20, fsync_episodes=False, fsync_close=False)
    out = []
    for e in range(episodes):
        msgs = [OutMessage(EVENT_TOPIC, b"\x00\x01\x00\x00" + bytes(40), 1000 * e)]
        for t in episode("arm", e, steps):
            msgs.append(OutMessage(TRANSITION_TOPIC, CODEC.encode(transition_to_msg(t, CODEC)), 1000 * e + t.step + 1))
        out.append(writer.write_episode(msgs))
    if finish:
        writer.finish()
    else:
        writer.abandon()
    return out


def test_positions_read_back_the_transitions(tmp_path: Path) -> None:
    path = tmp_path / "s_0.mcap"
    positions = _write(path)
    with SegmentReader(path) as reader:
        for e, eps in enumerate(positions):
            for step, pos in enumerate(eps[1:]):
                t = transition_from_msg(CODEC.decode(reader.read(pos), TRANSITION_TYPE))
                assert (t.episode_id, t.step) == (e, step)


def test_independent_reader_decodes_with_ros2msg_schemas(tmp_path: Path) -> None:
    path = tmp_path / "s_0.mcap"
    _write(path)
    with open(path, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        assert reader.get_header().profile == "ros2"
        summary = reader.get_summary()
        assert summary is not None
        assert {s.encoding for s in summary.schemas.values()} == {"ros2msg"}
        assert {c.message_encoding for c in summary.channels.values()} == {"cdr"}
        assert all("offered_qos_profiles" in c.metadata for c in summary.channels.values())
        decoded = [(c.topic, m) for _, c, _, m in reader.iter_decoded_messages(topics=[TRANSITION_TOPIC])]
    assert len(decoded) == 12
    last = decoded[-1][1]
    assert (last.episode_id, last.step, last.truncated) == (2, 3, True)
    assert bytes(last.observation.images[0].data[:2]) == b"\xff\xd8"  # JPEG, kept compressed


def test_cut_segment_reads_up_to_the_cut(tmp_path: Path) -> None:
    path = tmp_path / "s_0.mcap"
    positions = _write(path, finish=False)  # no footer, as after kill -9
    with open(path, "r+b") as f:
        f.truncate(positions[2][2].offset + 5)  # inside the last episode's chunk
    scanned = scan_file(str(path))
    assert not scanned.footer and scanned.problem is not None
    assert len(scanned.messages) == 10  # two whole episodes (event + 4 transitions each)
    with open(path, "rb") as f:
        seen = 0
        with pytest.raises(Exception):  # noqa: B017 - whatever the cut raises, the messages before it came out
            for _ in NonSeekingReader(f).iter_messages(log_time_order=False):
                seen += 1
    assert seen == 10
    with SegmentReader(path) as reader:
        reader.read(positions[1][-1])
        with pytest.raises(TruncatedSegmentError, match="truncated at byte"):
            reader.read(positions[2][-1])


def test_wrong_position_is_a_corrupt_record(tmp_path: Path) -> None:
    path = tmp_path / "s_0.mcap"
    positions = _write(path, episodes=1)
    pos = positions[0][1]
    with SegmentReader(path) as reader:
        with pytest.raises(CorruptRecordError, match="expected a message record"):
            reader.read(Position(pos.offset + 3, pos.length))
        with pytest.raises(CorruptRecordError, match="bytes, expected"):
            reader.read(Position(pos.offset, pos.length - 1))
