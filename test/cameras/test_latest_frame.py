"""`LatestFrame` without threads: newest-only, ages and staleness on a controlled clock, dead detection."""

from __future__ import annotations

import logging

import pytest

from test.cameras.sources import FakeClock, solid
from user.cameras import CameraDeadError, LatestFrame, NoFrameError, StaleFrameError

PERIOD = 0.1  # 10 Hz camera
WALL = 1_700_000_000_000_000_000


def holder(clock: FakeClock) -> LatestFrame:
    return LatestFrame("wrist", PERIOD, dead_after_periods=5, clock=clock, wall_clock=lambda: WALL)


def test_only_the_newest_frame_is_kept_and_unread_ones_are_counted() -> None:
    clock = FakeClock()
    frames = holder(clock)
    for value in (10, 20, 30):
        frames.put(solid(value), hardware_stamp_ns=value)
        clock.advance(0.01)
    frame = frames.latest(max_age_s=1.0)
    assert (frame.seq, frame.hardware_stamp_ns, int(frame.rgb[0, 0, 0])) == (3, 30, 30)
    assert frames.health().overwritten == 2  # frames 1 and 2 were replaced before anyone read them
    frames.put(solid(40))
    assert frames.health().overwritten == 2  # frame 3 had been read


def test_no_frame_yet_raises_a_stale_frame_error_naming_the_camera() -> None:
    frames = holder(FakeClock())
    assert frames.poll(0.1) is None
    with pytest.raises(NoFrameError, match="'wrist'") as info:
        frames.latest(0.1)
    assert isinstance(info.value, StaleFrameError)
    assert info.value.age_s is None


def test_age_and_staleness_follow_the_clock() -> None:
    clock = FakeClock()
    frames = holder(clock)
    frames.put(solid(1))
    clock.advance(0.05)
    fresh = frames.latest(max_age_s=0.1)
    assert fresh.age_s == pytest.approx(0.05)
    assert not fresh.stale
    clock.advance(0.1)
    with pytest.raises(StaleFrameError, match="150 ms old") as info:
        frames.latest(max_age_s=0.1)
    assert info.value.camera == "wrist"
    assert info.value.age_s == pytest.approx(0.15)
    flagged = frames.poll(max_age_s=0.1)
    assert flagged is not None and flagged.stale and flagged.age_s == pytest.approx(0.15)
    assert frames.latest(max_age_s=0.2).seq == 1  # a looser caller still gets it


def test_stamps_prefer_the_hardware_time() -> None:
    frames = holder(FakeClock())
    frames.put(solid(1))
    assert frames.latest(1.0).stamp_ns == WALL  # no hardware stamp: arrival time
    frames.put(solid(2), hardware_stamp_ns=123)
    frame = frames.latest(1.0)
    assert (frame.stamp_ns, frame.arrival_ns) == (123, WALL)


def test_frames_are_read_only() -> None:
    frames = holder(FakeClock())
    rgb = solid(1)
    rgb.flags.writeable = False
    frames.put(rgb)
    with pytest.raises(ValueError):
        frames.latest(1.0).rgb[0, 0, 0] = 5


def test_dead_after_n_periods_without_a_frame_and_alive_again(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    frames = holder(clock)
    frames.mark_started()
    clock.advance(0.49)
    assert not frames.check_dead()  # 4.9 periods: not yet
    clock.advance(0.02)
    with (
        caplog.at_level(logging.ERROR, logger="user.cameras"),
        pytest.raises(CameraDeadError, match="'wrist'.*no frame for 0.51 s") as info,
    ):
        frames.latest(0.1)
    assert info.value.age_s is None
    assert any("'wrist'" in r.getMessage() and "dead" in r.getMessage() for r in caplog.records)
    frames.put(solid(1))
    assert not frames.health().dead
    clock.advance(0.6)
    health = frames.health()
    assert health.dead and "no new frame" in health.dead_reason
    with pytest.raises(CameraDeadError, match="600 ms old"):
        frames.latest(0.1)
    assert frames.latest(1.0).seq == 1  # a caller that allows that age still gets the frame


def test_dead_is_reported_once_per_outage(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    frames = holder(clock)
    frames.mark_started()
    clock.advance(1.0)
    with caplog.at_level(logging.WARNING, logger="user.cameras"):
        for _ in range(5):
            frames.check_dead()
        frames.put(solid(1))
    messages = [r.getMessage() for r in caplog.records]
    assert sum("dead" in m for m in messages) == 1
    assert sum("arriving again" in m for m in messages) == 1


def test_a_stream_that_ended_is_dead_at_once() -> None:
    frames = holder(FakeClock())
    frames.mark_started()
    frames.mark_ended("file over")
    assert frames.health().dead_reason == "stream ended (file over)"


def test_errors_and_drops_are_counted_and_logged_throttled(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    frames = holder(clock)
    with caplog.at_level(logging.WARNING, logger="user.cameras"):
        for _ in range(3):
            frames.count_error(OSError("USB transfer failed"))
            frames.count_dropped(2)
        clock.advance(10.0)
        frames.count_error(OSError("again"))
    health = frames.health()
    assert (health.errors, health.dropped, health.last_error) == (4, 6, "again")
    errors = [r.getMessage() for r in caplog.records if "capture error" in r.getMessage()]
    assert errors == [
        "camera 'wrist': capture error (1 so far): USB transfer failed",
        "camera 'wrist': capture error (4 so far): again",
    ]
    assert sum("lost" in r.getMessage() for r in caplog.records) == 1


def test_measured_rate() -> None:
    clock = FakeClock()
    frames = holder(clock)
    for _ in range(20):
        frames.put(solid(1))
        clock.advance(0.1)
    assert frames.health().measured_rate_hz == pytest.approx(10.0)


def test_reset_forgets_everything() -> None:
    frames = holder(FakeClock())
    frames.put(solid(1))
    frames.count_error(OSError("x"))
    frames.reset()
    health = frames.health()
    assert (health.frames, health.errors, health.age_s, health.dead) == (0, 0, None, False)
    assert frames.poll(1.0) is None
