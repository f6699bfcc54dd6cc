"""Camera frames on a topic per camera: the rules of `camera_topics`, the bag a stored episode leaves (read by
rosbags' own rosbag2 reader), and what every reader does when a record's frames are not behind it."""

import logging
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from rosbags.rosbag2 import Reader

from test.buffer.factories import CAMERAS, elided, episode
from user.buffer import BufferConfig, RateLimiterConfig, ReplayBuffer, StorageConfig
from user.buffer.disk.camera_topics import (
    ON_CAMERA_TOPIC,
    attach,
    camera_frames,
    camera_topic,
    frame_count,
    frame_from_payload,
    frame_payload,
    frames_problem,
    image_problem,
    record,
)
from user.buffer.disk.directory import segment_path
from user.buffer.disk.mcapscan import MESSAGE_PREFIX
from user.buffer.disk.next_frames import IN_NEXT_STEP
from user.buffer.errors import CorruptRecordError
from user.buffer.index import Index
from user.buffer.repair.segment_episodes import segment_episodes
from user.interfaces import default_codec
from user.interfaces.codec import DecodeError
from user.interfaces.domain import EncodedImage, Transition, transition_to_msg

CODEC = default_codec()
SEG0 = "seg_000000"


def _wire(t: Transition) -> bytes:
    return CODEC.encode(transition_to_msg(t, CODEC))


def _config(**storage: object) -> BufferConfig:
    settings = {"cache_size": 1, "segment_max_episodes": 10, "fsync": "never", **storage}
    return BufferConfig(
        storage=StorageConfig(**settings),  # type: ignore[arg-type]
        rate_limiter=RateLimiterConfig(min_size=1),
        batch_size=2,
        prefetch=0,
    )


def test_a_camera_topic_is_the_robots_image_topic_and_always_a_valid_ros_name() -> None:
    assert camera_topic("arm", "wrist") == "/arm/wrist/image/compressed"
    assert camera_topic("franka left", "2nd cam!") == "/franka_left/_2nd_cam/image/compressed"
    assert camera_topic("a__b", "--") == "/a_b/unnamed/image/compressed"
    assert camera_topic("X", "_xray_X") == "/X/xray_X/image/compressed"


def test_a_record_leaves_placeholders_in_order_and_attach_puts_the_frames_back() -> None:
    t = episode("arm", 0, 3)[1]
    held, frames = record(t, keep_next=True), camera_frames(t, keep_next=True)
    assert frames == [*t.observation.images, *t.next_observation.images]
    for img in (*held.observation.images, *held.next_observation.images):
        assert (img.format, img.data) == (ON_CAMERA_TOPIC, b"")
    assert [(i.camera, i.stamp_ns) for i in held.observation.images] == [
        (i.camera, i.stamp_ns) for i in t.observation.images
    ]
    assert frame_count(held) == 4 and frames_problem(held, frames) is None
    assert _wire(attach(held, frames)) == _wire(t)
    kept = record(t, keep_next=False)  # next frames in the next step: only the observation's follow the record
    obs_only = camera_frames(t, keep_next=False)
    assert obs_only == list(t.observation.images) and frame_count(kept) == 2
    assert [i.format for i in kept.next_observation.images] == [IN_NEXT_STEP] * 2
    assert _wire(kept) == _wire(replace(held, next_observation=elided(t).next_observation))
    assert _wire(attach(kept, obs_only)) == _wire(elided(t))
    no_next = replace(t, next_observation=replace(t.next_observation, images=()))
    assert camera_frames(no_next, keep_next=True) == list(t.observation.images)
    no_obs = replace(t, observation=replace(t.observation, images=()))
    assert camera_frames(no_obs, keep_next=True) == list(t.next_observation.images)
    bare = episode("arm", 0, 2, images=False)[0]
    assert record(bare, keep_next=True) is bare and camera_frames(bare, keep_next=True) == []
    assert frame_count(bare) == 0


def test_a_record_with_images_on_one_side_only() -> None:
    bare = episode("arm", 0, 2, images=False)[0]
    assert record(bare, keep_next=False) is bare
    no_next = replace(bare, observation=episode("arm", 0, 2)[0].observation)
    assert [i.format for i in record(no_next, keep_next=True).observation.images] == [ON_CAMERA_TOPIC] * 2
    no_obs = replace(bare, next_observation=episode("arm", 0, 2)[0].next_observation)
    assert [i.format for i in record(no_obs, keep_next=False).next_observation.images] == [IN_NEXT_STEP] * 2


def test_frames_that_are_not_the_records_are_named() -> None:
    t = episode("arm", 0, 2)[0]
    held, frames = record(t, keep_next=True), camera_frames(t, keep_next=True)
    assert "waits for 4 camera frames, 3 follow it" in str(frames_problem(held, frames[:3]))
    swapped = [frames[1], frames[0], *frames[2:]]
    assert "camera frame 1 after it is camera 'front'" in str(frames_problem(held, swapped))
    late = [*frames[:3], replace(frames[3], stamp_ns=frames[3].stamp_ns + 1)]
    assert "camera frame 4 after it is camera 'front' at" in str(frames_problem(held, late))
    placeholder = [*frames[:3], replace(frames[3], format=ON_CAMERA_TOPIC)]
    assert "camera frame 4 after it is itself a placeholder" in str(frames_problem(held, placeholder))


def test_either_placeholder_format_is_refused_in_either_observation() -> None:
    t = episode("arm", 0, 2)[0]
    assert image_problem(t) is None
    assert "next observation image of camera 'wrist' has format 'user/in-next-step'" in str(image_problem(elided(t)))
    held = record(t, keep_next=True)
    assert "observation image of camera 'wrist' has format 'user/on-camera-topic'" in str(image_problem(held))


def test_a_segment_is_a_bag_with_a_topic_per_camera(tmp_path: Path) -> None:
    """rosbags' rosbag2 Reader (which trusts metadata.yaml) sees each camera's frames once, on the robot's image
    topic, in the order the camera took them: each step's frame, then the episode's last next frame."""
    episodes = [episode("arm", 0, 3), episode("arm", 1, 2)]
    with ReplayBuffer.open(tmp_path, _config(segment_max_episodes=2)) as buf:
        for ts in episodes:
            buf.add_episode(ts)
        assert buf.verify().ok
    with Reader(segment_path(tmp_path, SEG0).parent) as bag:
        types = {c.topic: c.msgtype for c in bag.connections}
        assert types == {
            "/transitions": "user/msg/Transition",
            "/episode_events": "user/msg/EpisodeEvent",
            **{camera_topic("arm", cam): "sensor_msgs/msg/CompressedImage" for cam in CAMERAS},
        }
        got: dict[str, list[tuple[str, int, bytes]]] = {}
        for connection, _, raw in bag.messages():
            if connection.msgtype.endswith("CompressedImage"):
                msg = CODEC.decode(raw, connection.msgtype)
                stamp = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
                got.setdefault(connection.topic, []).append((msg.header.frame_id, stamp, bytes(msg.data)))
        counts = {c.topic: c.msgcount for c in bag.connections}
    for k, cam in enumerate(CAMERAS):
        taken = [
            (img.camera, img.stamp_ns, img.data)
            for ts in episodes
            for img in [*(t.observation.images[k] for t in ts), ts[-1].next_observation.images[k]]
        ]
        assert got[camera_topic("arm", cam)] == taken
        assert counts[camera_topic("arm", cam)] == len(taken) == 3 + 1 + 2 + 1


def test_frames_follow_their_record_across_chunk_boundaries(tmp_path: Path) -> None:
    """Chunks far smaller than a step: a chunk still ends only between a record's group and the next one, so
    every transition reads back whole."""
    steps = episode("arm", 0, 6)
    with ReplayBuffer.open(tmp_path, _config(chunk_mb=0.0001)) as buf:
        buf.add_episode(steps)
        assert [_wire(buf.storage.read(i)) for i in range(6)] == [_wire(t) for t in steps]
        assert buf.verify().ok
    found = segment_episodes(segment_path(tmp_path, SEG0), CODEC)
    assert found.problems == [] and [len(e.rows) for e in found.episodes] == [6]


def test_records_without_camera_topics_still_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A buffer written before the frames moved to camera topics (its records hold their images): read as it was."""
    monkeypatch.setattr("user.buffer.commit.record", lambda t, keep_next: t if keep_next else elided(t))
    monkeypatch.setattr("user.buffer.records.camera_frames", lambda t, keep_next: [])
    steps = episode("arm", 0, 3)
    with ReplayBuffer.open(tmp_path, _config()) as buf:
        buf.add_episode(steps)
    monkeypatch.undo()
    with ReplayBuffer.open(tmp_path, _config(), read_only=True) as ro:
        assert [_wire(ro.storage.read(i)) for i in range(3)] == [_wire(t) for t in steps]
        assert ro.verify().ok
    assert len(segment_episodes(segment_path(tmp_path, SEG0), CODEC).episodes) == 1


def _frame_offsets(path: Path, needle: bytes) -> list[int]:
    data = path.read_bytes()
    out, at = [], data.find(needle)
    while at >= 0:
        out.append(at)
        at = data.find(needle, at + 1)
    return out


def _swap_camera_names(path: Path, frame: EncodedImage) -> None:
    """Overwrite, in place and at the same length, the camera name of the stored frame `frame` (its CDR bytes are
    unique in the file): the frame stays a frame, of another camera."""
    stored = frame_payload(frame, CODEC)
    [at] = _frame_offsets(path, stored)
    other = frame_payload(replace(frame, camera=frame.camera[::-1]), CODEC)
    data = bytearray(path.read_bytes())
    data[at : at + len(other)] = other
    path.write_bytes(bytes(data))


def test_a_record_whose_frames_are_not_its_own_is_named_by_every_reader(tmp_path: Path) -> None:
    """A frame overwritten with another camera's: reading it is a `CorruptRecordError` naming why, verify says
    which transition, and reindexing leaves its episode out; the other episode is untouched."""
    steps = episode("arm", 0, 3)
    with ReplayBuffer.open(tmp_path, _config()) as buf:
        buf.add_episode(steps)
        buf.add_episode(episode("arm", 1, 2))
    path = segment_path(tmp_path, SEG0)
    _swap_camera_names(path, steps[1].observation.images[0])
    with ReplayBuffer.open(tmp_path, _config(), read_only=True) as ro:
        with pytest.raises(CorruptRecordError, match="camera frame 1 after it is camera 'tsirw'"):
            ro.storage.read(1)
        with pytest.raises(CorruptRecordError, match="camera frame 1 after it is camera 'tsirw'"):
            ro.storage.read(0)  # its next frames are step 1's
        assert _wire(ro.storage.read(3)) == _wire(episode("arm", 1, 2)[0])
        problems = ro.verify().problems
    named = "transition 1: its camera frames: .*: transition 1: camera frame 1 after it is camera 'tsirw'"
    assert any(re.match(named, p) for p in problems), problems
    found = segment_episodes(path, CODEC)
    assert [e.episode_id for e in found.episodes] == [1]
    assert found.problems[0].startswith("its chunk does not match its CRC")


def test_reindex_leaves_out_an_episode_whose_frames_were_written_out_of_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks whose CRCs match but a writer that put step 1's frames in the wrong order: reindex names the step
    and keeps the other episode."""

    def swapped(t: Transition, keep_next: bool) -> list[EncodedImage]:
        frames = camera_frames(t, keep_next=keep_next)
        return frames[::-1] if t.step == 1 and t.episode_id == 0 else frames

    monkeypatch.setattr("user.buffer.records.camera_frames", swapped)
    with ReplayBuffer.open(tmp_path, _config()) as buf:
        buf.add_episode(episode("arm", 0, 3))
        buf.add_episode(episode("arm", 1, 2))
    found = segment_episodes(segment_path(tmp_path, SEG0), CODEC)
    assert [e.episode_id for e in found.episodes] == [1]
    assert found.problems[0].startswith("episode 0 of arm: step 1: camera frame 1 after it is camera 'front'")


def test_a_missing_frame_is_named_by_reading_and_verify(tmp_path: Path) -> None:
    """A record that waits for more frames than follow it (bytes lost after it): reading names the record and
    which frame is not there, verify names the transition, reindex leaves the episode out."""
    steps = episode("arm", 0, 2)
    with ReplayBuffer.open(tmp_path, _config()) as buf:
        buf.add_episode(steps)
    path = segment_path(tmp_path, SEG0)
    [at] = _frame_offsets(path, frame_payload(steps[0].observation.images[1], CODEC))
    data = bytearray(path.read_bytes())
    data[at - MESSAGE_PREFIX] = 0x04  # step 0's second frame is no longer a message record
    path.write_bytes(bytes(data))
    with ReplayBuffer.open(tmp_path, _config(), read_only=True) as ro:
        with pytest.raises(CorruptRecordError, match="camera frame 2 of 2 after the record at byte .* is not there"):
            ro.storage.read(0)
        assert _wire(ro.storage.read(1)) == _wire(steps[1])
        assert any(p.startswith("transition 0: its camera frames: ") for p in ro.verify().problems)
    assert segment_episodes(path, CODEC).episodes == []


def _undecodable(path: Path, frame: EncodedImage) -> None:
    """Overwrite the CDR encapsulation of the stored frame `frame` with one no reader knows."""
    [at] = _frame_offsets(path, frame_payload(frame, CODEC))
    data = bytearray(path.read_bytes())
    data[at : at + 2] = b"\xff\xff"
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (_swap_camera_names, "transition 2: camera frame 4 after it is camera 'tnorf'"),
        (_undecodable, "transition 2: a camera frame after it does not decode: .*encapsulation ffff"),
    ],
)
def test_recovery_without_chunk_crcs_checks_each_records_frames(
    tmp_path: Path, damage: Callable[[Path, EncodedImage], None], why: str, caplog: pytest.LogCaptureFixture
) -> None:
    """No chunk CRC to vouch for anything (a header that hides every chunk from the scan): recovery reads each
    record's frames after it and keeps only the episodes whose frames are theirs, naming why not."""
    with ReplayBuffer.open(tmp_path, _config()) as buf:
        buf.add_episode(episode("arm", 0, 3))
        buf.add_episode(episode("arm", 1, 2))
        offset = buf.storage.index.transitions()[2].offset
    path = segment_path(tmp_path, SEG0)
    damage(path, episode("arm", 0, 3)[2].next_observation.images[1])  # the last step's own next frame
    data = bytearray(path.read_bytes())
    data[9:17] = (1 << 40).to_bytes(8, "little")  # the header claims the whole file: no chunk is scanned
    path.write_bytes(bytes(data))
    index = Index(tmp_path, durable=False)
    index.reopen_segment(index.segments()[0].id)  # recovered as the segment a writer died in
    index.close()
    with caplog.at_level(logging.ERROR, logger="user.buffer.recovery"), ReplayBuffer.open(tmp_path, _config()) as buf:
        assert buf.recovery is not None and buf.recovery.lost == {SEG0: [0]}
        assert re.search(f"episode 0: {re.escape(str(path))}: bad record at byte {offset}: {why}", caplog.text)
        assert len(buf) == 2 and _wire(buf.storage.read(1)) == _wire(episode("arm", 1, 2)[1])
        assert [len(t.next_observation.images) for t in buf.storage.get([0, 1])] == [2, 2]
        assert buf.verify().ok


def test_a_frame_that_does_not_decode_is_named_by_reading_and_verify(tmp_path: Path) -> None:
    steps = episode("arm", 0, 2)
    with ReplayBuffer.open(tmp_path, _config()) as buf:
        buf.add_episode(steps)
    _undecodable(segment_path(tmp_path, SEG0), steps[1].observation.images[0])
    with ReplayBuffer.open(tmp_path, _config(), read_only=True) as ro:
        with pytest.raises(CorruptRecordError, match="a camera frame after it does not decode: .*encapsulation ffff"):
            ro.storage.read(1)
        assert any(p.startswith("transition 1: its camera frames: ") for p in ro.verify().problems)


@pytest.mark.parametrize(
    "img",
    [
        EncodedImage("wrist", "jpeg", b"\xff\xd8abc", 1_700_000_000_123_456_789),
        EncodedImage("", "", b"", 0),
        EncodedImage("cämera 7", "rgb8; jpeg compressed bgr8", bytes(range(256)) * 20, 5),
        EncodedImage("ab", "png", b"x", -1_500_000_000),
    ],
)
def test_frames_read_directly_are_what_the_codec_reads(img: EncodedImage) -> None:
    payload = frame_payload(img, CODEC)
    msg = CODEC.decode(payload, "sensor_msgs/msg/CompressedImage")
    assert frame_from_payload(payload, CODEC) == img
    assert (msg.header.frame_id, msg.format, bytes(msg.data)) == (img.camera, img.format, img.data)


def test_a_frame_cut_or_damaged_anywhere_is_a_decode_error() -> None:
    payload = frame_payload(EncodedImage("wrist", "jpeg", b"0123456789", 7), CODEC)
    for cut in range(4, len(payload) - 1):
        with pytest.raises(DecodeError, match="cannot decode sensor_msgs/msg/CompressedImage"):
            frame_from_payload(payload[:cut], CODEC)
    no_nul = bytearray(payload)
    no_nul[4 + 8 + 4 + 5] = ord("x")  # the camera name's closing NUL
    with pytest.raises(DecodeError, match="does not fit or does not end with NUL"):
        frame_from_payload(bytes(no_nul), CODEC)
    bad_utf8 = bytearray(payload)
    bad_utf8[4 + 8 + 4] = 0xFF
    with pytest.raises(DecodeError, match="utf-8"):
        frame_from_payload(bytes(bad_utf8), CODEC)
    big_endian = b"\x00\x00\x00\x00" + payload[4:]  # another encapsulation: the codec's to judge
    with pytest.raises(DecodeError):
        frame_from_payload(big_endian, CODEC)
