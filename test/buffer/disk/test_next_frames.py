"""Each camera frame stored once: what `next_frames` decides, and what readers do with records it wrote."""

from dataclasses import replace
from pathlib import Path

import pytest

from test.buffer.factories import elided, episode
from user.buffer import BufferConfig, RateLimiterConfig, ReplayBuffer, StorageConfig
from user.buffer.disk.next_frames import (
    IN_NEXT_STEP,
    chained,
    is_elided,
    restore,
    shared,
    stored_payloads,
    successor_problem,
)
from user.buffer.errors import CorruptRecordError
from user.interfaces import default_codec
from user.interfaces.domain import Transition, transition_to_msg

CODEC = default_codec()


def _wire(t: Transition) -> bytes:
    return CODEC.encode(transition_to_msg(t, CODEC))


def test_a_placeholder_keeps_camera_and_stamp_and_drops_the_bytes() -> None:
    t = episode("arm", 0, 3)[0]
    e = elided(t)
    assert [(i.camera, i.format, i.data, i.stamp_ns) for i in e.next_observation.images] == [
        (i.camera, IN_NEXT_STEP, b"", i.stamp_ns) for i in t.next_observation.images
    ]
    assert e.observation is t.observation and is_elided(e) and not is_elided(t)
    plain = episode("arm", 0, 2, images=False)[0]
    assert elided(plain) is plain and not is_elided(plain)


def test_the_chain_needs_equal_images_and_some() -> None:
    steps = episode("arm", 0, 3)
    assert chained(steps[0], steps[1]) and chained(steps[1], steps[2])
    assert not chained(steps[0], steps[2])  # another step's frames
    moved = replace(steps[1].observation.images[0], stamp_ns=1)
    assert not chained(steps[0], replace(steps[1], observation=replace(steps[1].observation, images=(moved,) * 2)))
    plain = episode("arm", 0, 3, images=False)
    assert not chained(plain[0], plain[1])  # nothing to store once


def test_stored_payloads_encode_whole_only_the_steps_off_the_chain() -> None:
    steps = episode("arm", 0, 4)
    given = [_wire(elided(t)) for t in steps]
    assert stored_payloads(steps, given, _wire) == [*given[:3], _wire(steps[3])]
    broken = list(steps)
    broken[2] = replace(steps[2], observation=replace(steps[2].observation, images=steps[0].observation.images))
    assert stored_payloads(broken, given, _wire) == [given[0], _wire(broken[1]), given[2], _wire(broken[3])]
    plain = episode("arm", 0, 3, images=False)
    raw = [b"a", b"b", b"c"]
    assert stored_payloads(plain, raw, _wire) == raw


def test_shared_steps_hold_their_successors_image_objects() -> None:
    steps = episode("arm", 0, 3)
    out = shared(steps)
    assert out[0].next_observation.images is steps[1].observation.images
    assert out[1].next_observation.images is steps[2].observation.images
    assert out[2] is steps[2]  # the last step keeps its own
    assert [_wire(t) for t in out] == [_wire(t) for t in steps]


def test_restore_gives_back_what_was_elided_and_checks_the_successor() -> None:
    steps = episode("arm", 0, 3)
    assert _wire(restore(elided(steps[0]), steps[1])) == _wire(steps[0])
    assert successor_problem(elided(steps[0]), steps[1]) is None
    assert "holds no next step" in str(successor_problem(elided(steps[0]), None))
    assert "stored in step 1 of its episode, but the next record is step ('arm', 0, 2)" in str(
        successor_problem(elided(steps[0]), steps[2])
    )
    other = episode("other", 0, 3)[1]
    assert "('other', 0, 1)" in str(successor_problem(elided(steps[0]), other))
    one_camera = replace(steps[1], observation=replace(steps[1].observation, images=steps[1].observation.images[:1]))
    assert "cameras ['wrist', 'front'], the next step's observation has ['wrist']" in str(
        successor_problem(elided(steps[0]), one_camera)
    )


def _config() -> BufferConfig:
    storage = StorageConfig(cache_size=1, segment_max_episodes=10, fsync="never")
    return BufferConfig(storage=storage, rate_limiter=RateLimiterConfig(min_size=1), batch_size=2, prefetch=0)


def test_a_buffer_round_trips_frames_stored_once(tmp_path: Path) -> None:
    steps = episode("arm", 0, 5) + episode("arm", 1, 4)
    with ReplayBuffer.open(tmp_path, _config()) as buf:
        for t in steps:
            buf.add(t)
    with ReplayBuffer.open(tmp_path, _config(), read_only=True) as ro:
        assert ro.verify().ok
        assert [_wire(t) for t in ro.storage.get([8, 0, 3, 1, 4, 2])] == [_wire(steps[k]) for k in (8, 0, 3, 1, 4, 2)]
        assert [_wire(ro.storage.read(k)) for k in range(9)] == [_wire(t) for t in steps]


def test_readers_name_an_elided_step_without_its_next_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer that left every step's next frames to a step after it (the last steps' too): verify names each
    broken link, and reading such a step is a `CorruptRecordError` saying why, never a transition without frames."""
    monkeypatch.setattr("user.buffer.records.stored_payloads", lambda ts, payloads, encode: list(payloads))
    monkeypatch.setattr("user.buffer.records.keeps_next", lambda ts: [False] * len(ts))  # nor their frames
    with ReplayBuffer.open(tmp_path, _config()) as buf:
        for t in episode("arm", 0, 3) + episode("arm", 1, 2):
            buf.add(t)
    with ReplayBuffer.open(tmp_path, _config(), read_only=True) as ro:
        problems = ro.verify().problems
        assert problems == [
            "transition 2: its next images are in the next step, but the record after it is episode 1 step 0",
            "transition 4: its next images are in the next step, which is not stored",
        ]
        assert _wire(ro.storage.read(1)) == _wire(episode("arm", 0, 3)[1])
        with pytest.raises(CorruptRecordError, match="transition 2: its next images are stored in step 3"):
            ro.storage.read(2)
        with pytest.raises(CorruptRecordError, match="transition 4: its next images are stored in the next step"):
            ro.storage.get([4])
