"""A record and the messages joined to it (a transition and its camera frames) in a segment file: the chunks never
split them, camera topics get one channel each, and `SegmentReader.read_following` reads them back or says
which one is not there."""

from pathlib import Path

import mcap.writer
import pytest
from mcap.reader import make_reader

from user.buffer.disk.mcapscan import MESSAGE_PREFIX, scan_file
from user.buffer.disk.segment_writer import SegmentWriter
from user.buffer.disk.segments import (
    EVENT_TOPIC,
    EVENT_TYPE,
    FRAME_READ_AHEAD,
    FRAME_TYPE,
    TRANSITION_TOPIC,
    TRANSITION_TYPE,
    OutMessage,
    Position,
    SegmentReader,
    topic_type,
)
from user.buffer.errors import CorruptRecordError, SegmentError, SegmentWriteError, TruncatedSegmentError
from user.interfaces import default_codec

CODEC = default_codec()
WRIST, FRONT = "/arm/wrist/image/compressed", "/arm/front/image/compressed"
START = OutMessage(EVENT_TOPIC, b"start-event", 1)
END = OutMessage(EVENT_TOPIC, b"end", 9)


def _group(k: int, frames: tuple[bytes, ...] = (b"wrist-frame", b"front-frame")) -> list[OutMessage]:
    """Transition `k` (its bytes tell which) and its frames, joined to it."""
    record = OutMessage(TRANSITION_TOPIC, f"transition-{k}".encode(), 2 + k)
    return [record, *(OutMessage(t, f, 2 + k, joined=True) for t, f in zip((WRIST, FRONT), frames, strict=False))]


def _writer(path: Path, chunk_bytes: int) -> SegmentWriter:
    return SegmentWriter(path, CODEC, chunk_bytes=chunk_bytes, fsync_episodes=False, fsync_close=False)


def _record(msg: OutMessage) -> int:
    return MESSAGE_PREFIX + len(msg.data)


def _chunks(path: Path) -> list[list[bytes]]:
    """The payloads in each chunk of a finished segment file, chunk by chunk in file order."""
    with open(path, "rb") as f:
        summary = make_reader(f).get_summary()
    assert summary is not None
    bounds = sorted((c.chunk_start_offset, c.chunk_start_offset + c.chunk_length) for c in summary.chunk_indexes)
    data = path.read_bytes()
    out: list[list[bytes]] = [[] for _ in bounds]
    for m in scan_file(str(path)).messages:
        [k] = [k for k, (lo, hi) in enumerate(bounds) if lo <= m.offset < hi]
        out[k].append(data[m.offset + MESSAGE_PREFIX : m.offset + MESSAGE_PREFIX + m.length])
    return out


def test_the_type_of_each_topic_a_segment_holds() -> None:
    assert topic_type(TRANSITION_TOPIC) == TRANSITION_TYPE and topic_type(EVENT_TOPIC) == EVENT_TYPE
    assert topic_type(WRIST) == FRAME_TYPE
    for stranger in ("/arm/joint_states", "arm/wrist/image/compressed"):
        with pytest.raises(SegmentError, match=f"topic '{stranger}' is not one a segment holds"):
            topic_type(stranger)


def _written(path: Path, chunk_bytes: int, episodes: list[list[OutMessage]]) -> list[list[Position]]:
    w = _writer(path, chunk_bytes)
    positions = [w.write_episode(messages) for messages in episodes]
    w.finish()
    return positions


def test_a_chunk_ends_once_it_is_full_and_only_before_a_record_that_is_not_joined(tmp_path: Path) -> None:
    g1, g2 = _group(1), _group(2)
    full_after_start = _record(START)
    _written(tmp_path / "a.mcap", full_after_start, [[START, *g1, *g2, END]])
    assert _chunks(tmp_path / "a.mcap") == [
        [b"start-event"],
        [b"transition-1", b"wrist-frame", b"front-frame"],  # over full after its record: its frames stay with it
        [b"transition-2", b"wrist-frame", b"front-frame"],
        [b"end"],
    ]
    _written(tmp_path / "b.mcap", full_after_start + 1, [[START, *g1, END], [START, *g2, END]])
    assert _chunks(tmp_path / "b.mcap") == [  # not full after START, and each episode starts a chunk empty
        [b"start-event", b"transition-1", b"wrist-frame", b"front-frame"],
        [b"end"],
        [b"start-event", b"transition-2", b"wrist-frame", b"front-frame"],
        [b"end"],
    ]
    full_after_a_group = _record(START) + sum(_record(m) for m in g1)
    _written(tmp_path / "c.mcap", full_after_a_group, [[START, *g1, *g2, END]])
    assert _chunks(tmp_path / "c.mcap") == [
        [b"start-event", b"transition-1", b"wrist-frame", b"front-frame"],
        [b"transition-2", b"wrist-frame", b"front-frame", b"end"],
    ]
    a_group = sum(_record(m) for m in g1)
    _written(tmp_path / "d.mcap", a_group + 1, [[START, *g1, *g2, *_group(3), END]])
    assert [[p[:12] for p in chunk] for chunk in _chunks(tmp_path / "d.mcap")] == [  # a cut chunk starts empty
        [b"start-event", b"transition-1", b"wrist-frame", b"front-frame"],
        [b"transition-2", b"wrist-frame", b"front-frame", b"transition-3", b"wrist-frame", b"front-frame"],
        [b"end"],
    ]


def test_joined_messages_have_no_position_of_their_own_and_follow_their_record(tmp_path: Path) -> None:
    g1, g2 = _group(1), _group(2, (b"w",))
    [positions] = _written(tmp_path / "s.mcap", 1 << 20, [[START, *g1, *g2, END]])
    assert len(positions) == 4  # START, two transitions, END
    with SegmentReader(tmp_path / "s.mcap") as reader:
        assert [reader.read(p) for p in positions] == [b"start-event", b"transition-1", b"transition-2", b"end"]
        assert reader.read_following(positions[1], 2) == [b"wrist-frame", b"front-frame"]
        assert reader.read_following(positions[2], 1) == [b"w"]
        assert reader.read_following(positions[1], 0) == []


def test_each_camera_topic_has_one_channel_and_the_frame_type_one_schema(tmp_path: Path) -> None:
    path = tmp_path / "s.mcap"
    _written(path, 1 << 20, [[START, *_group(1), END], [START, *_group(2), END]])
    with open(path, "rb") as f:
        summary = make_reader(f).get_summary()
    assert summary is not None
    assert sorted(c.topic for c in summary.channels.values()) == sorted([TRANSITION_TOPIC, EVENT_TOPIC, WRIST, FRONT])
    assert sorted(s.name for s in summary.schemas.values()) == sorted([TRANSITION_TYPE, EVENT_TYPE, FRAME_TYPE])


def test_an_episode_cannot_begin_with_a_joined_message(tmp_path: Path) -> None:
    w = _writer(tmp_path / "s.mcap", 1 << 20)
    with pytest.raises(SegmentError, match="an episode's first message cannot be joined to one before it"):
        w.write_episode([OutMessage(WRIST, b"frame", 1, joined=True)])
    w.abandon()


def test_a_group_the_mcap_writer_split_is_caught_before_anyone_learns_its_positions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer library that ended a chunk inside a group (the frames would not follow their record)."""
    add = mcap.writer.Writer.add_message

    def splitting(self: mcap.writer.Writer, channel_id: int, log_time: int, data: bytes, **kw: int) -> None:
        if data == b"front-frame":
            self.flush()  # type: ignore[no-untyped-call]
        add(self, channel_id, log_time, data, **kw)

    monkeypatch.setattr(mcap.writer.Writer, "add_message", splitting)
    w = _writer(tmp_path / "s.mcap", 1 << 20)
    with pytest.raises(SegmentWriteError, match="does not follow the one before it"):
        w.write_episode([START, *_group(1), END])


def test_groups_larger_than_a_default_chunk_stay_whole(tmp_path: Path) -> None:
    """Frames of 300 kB, four groups: well past the mcap writer's own 1 MiB chunks, still one chunk and read back."""
    big = [(bytes([k]) * 300_000, bytes([k + 1]) * 300_001) for k in range(4)]
    messages = [START, *(m for k, frames in enumerate(big) for m in _group(k, frames)), END]
    [positions] = _written(tmp_path / "s.mcap", 64 << 20, [messages])
    assert len(_chunks(tmp_path / "s.mcap")) == 1
    with SegmentReader(tmp_path / "s.mcap") as reader:
        assert [reader.read_following(p, 2) for p in positions[1:-1]] == [list(f) for f in big]


def test_frames_of_any_size_read_back_beyond_the_read_ahead(tmp_path: Path) -> None:
    sizes = [(FRAME_READ_AHEAD - 5, 3), (0, FRAME_READ_AHEAD + 7), (2 * FRAME_READ_AHEAD, 1)]
    frames = [(b"a" * n, b"b" * m) for n, m in sizes]
    [positions] = _written(
        tmp_path / "s.mcap", 1 << 20, [[START, *(x for k, f in enumerate(frames) for x in _group(k, f)), END]]
    )
    with SegmentReader(tmp_path / "s.mcap") as reader:
        assert [reader.read_following(p, 2) for p in positions[1:-1]] == [list(f) for f in frames]
    last = positions[-2]  # the last group's big frame ending the file: read to its last byte, no further
    _cut(tmp_path / "s.mcap", last.offset + 2 * MESSAGE_PREFIX + last.length + 2 * FRAME_READ_AHEAD)
    with SegmentReader(tmp_path / "s.mcap") as reader:
        assert reader.read_following(last, 1) == [frames[-1][0]]


def _cut(path: Path, size: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(size)


def test_frames_that_are_not_there_are_named_with_the_file_and_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "s.mcap"
    [positions] = _written(path, 1 << 20, [[START, *_group(1), END]])
    record = positions[1]
    first = record.offset + MESSAGE_PREFIX + record.length  # where its first frame's record begins
    second = first + MESSAGE_PREFIX + len(b"wrist-frame")
    end = second + MESSAGE_PREFIX + len(b"front-frame") + MESSAGE_PREFIX + len(b"end")  # the chunk's messages end
    with SegmentReader(path) as reader:
        assert reader.read_following(record, 3)[2] == b"end"  # a message record: only its reader can tell
        with pytest.raises(CorruptRecordError, match=rf"{path}.*byte {end}.*camera frame 4 of 4 after the record "
                           rf"at byte {record.offset} is not there \(opcode 0x7, "):  # fmt: skip
            reader.read_following(record, 4)
    data = bytearray(path.read_bytes())
    data[second + 1 : second + 9] = (5).to_bytes(8, "little")  # shorter than a message record's own fields
    path.write_bytes(bytes(data))
    with SegmentReader(path) as reader, pytest.raises(CorruptRecordError, match="is not there \\(opcode 0x5, 14 B\\)"):
        reader.read_following(record, 2)
    data[second + 1 : second + 9] = (MESSAGE_PREFIX - 9 + len(b"front-frame")).to_bytes(8, "little")
    data[second] = 0x04
    path.write_bytes(bytes(data))
    with (
        SegmentReader(path) as reader,
        pytest.raises(CorruptRecordError, match="frame 2 of 2 .* is not there \\(opcode 0x4"),
    ):
        reader.read_following(record, 2)
    data[second] = 0x05
    path.write_bytes(bytes(data[: second + 9]))  # the second frame's opcode and length are there, nothing more
    with SegmentReader(path) as reader:
        need = MESSAGE_PREFIX + len(b"front-frame")
        with pytest.raises(
            TruncatedSegmentError, match=f"{path}: .*byte {second}.*frame 2 of 2 .* needs {need} B, 9 present"
        ):
            reader.read_following(record, 2)
    _cut(path, second + 8)
    with (
        SegmentReader(path) as reader,
        pytest.raises(
            TruncatedSegmentError, match=f"{path}: .*byte {second}: the file ends before camera frame 2 of 2"
        ),
    ):
        reader.read_following(record, 2)
    _cut(path, first)
    with (
        SegmentReader(path) as reader,
        pytest.raises(TruncatedSegmentError, match="the file ends before camera frame 1 of 2"),
    ):
        reader.read_following(record, 2)


def test_a_damaged_length_is_not_read_as_a_huge_frame(tmp_path: Path) -> None:
    path = tmp_path / "s.mcap"
    [positions] = _written(path, 1 << 20, [[START, *_group(1), END]])
    record = positions[1]
    first = record.offset + MESSAGE_PREFIX + record.length
    data = bytearray(path.read_bytes())
    data[first + 1 : first + 9] = (1 << 60).to_bytes(8, "little")
    path.write_bytes(bytes(data))
    present = len(data) - first
    with (
        SegmentReader(path) as reader,
        pytest.raises(TruncatedSegmentError, match=f"needs {(1 << 60) + 9} B, {present} present"),
    ):
        reader.read_following(record, 1)


def test_reading_frames_through_a_closed_reader_is_a_segment_error(tmp_path: Path) -> None:
    path = tmp_path / "s.mcap"
    [positions] = _written(path, 1 << 20, [[START, *_group(1), END]])
    reader = SegmentReader(path)
    reader.close()
    with pytest.raises(SegmentError, match=r"cannot read byte \d+ \(Bad file descriptor\)"):
        reader.read_following(positions[1], 2)
