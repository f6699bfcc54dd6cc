"""The episode writer against bad data and failing storage (issue 13): values it cannot store are refused before
any byte is written, a (robot, episode) it holds already is not stored twice, and a full disk or a failing index
costs the one episode being written, never the ones before it nor the writer itself."""

import logging
import math
import sqlite3
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from test.buffer.factories import episode, transition
from test.buffer.full_disk import FullDisk, full_disk
from user.buffer.config import BufferConfig, StorageConfig
from user.buffer.disk.directory import segment_name, segment_path
from user.buffer.errors import DuplicateEpisodeError, EpisodeNotStoredError, InvalidTransitionError
from user.buffer.index import Index
from user.buffer.repair.verify import count_messages, verify
from user.buffer.replay import ReplayBuffer
from user.buffer.storage import DiskStorage
from user.buffer.writer import EpisodeWriter
from user.interfaces import default_codec
from user.interfaces.domain import Transition, transition_to_msg

CODEC = default_codec()
SEG0, SEG1 = segment_name(0), segment_name(1)


def _writer(directory: Path, **storage: object) -> EpisodeWriter:
    config = StorageConfig(**{"cache_size": 1000, "fsync": "never", **storage})  # type: ignore[arg-type]
    index = Index(directory, durable=False)
    return EpisodeWriter(DiskStorage(directory, index, CODEC, config), config)


@pytest.fixture
def w(tmp_path: Path, writers: list[EpisodeWriter]) -> EpisodeWriter:
    writers.append(_writer(tmp_path))
    return writers[-1]


def _size(directory: Path, name: str) -> int:
    return segment_path(directory, name).stat().st_size


ONE_EPISODE = 5 + 8  # messages of a 3-step episode: START, 3 steps, END, and each step's 2 frames + the last 2


def _messages_in(directory: Path, name: str) -> int:
    counts, _ = count_messages(segment_path(directory, name))
    return sum(counts.values())


def _stored(w: EpisodeWriter) -> list[tuple[str, int]]:
    return [(e.robot_id, e.episode_id) for e in w.index.episodes()]


def _reopened(directory: Path) -> list[tuple[str, int]]:
    """Open the buffer as the learner does (recovery first), check it, and return what it holds."""
    with ReplayBuffer.open(directory, BufferConfig(prefetch=0)) as buf:
        report = buf.verify()
        assert report.ok, report.problems
        assert len(buf.get(list(range(len(buf))))) == len(buf)  # every indexed transition reads back
        return [(e.robot_id, e.episode_id) for e in buf.storage.index.episodes()]


# ---- finding 2: values the index cannot hold are refused before anything is written ---------------------


def _with_reward(ts: list[Transition], k: int, reward: float) -> list[Transition]:
    return [replace(t, reward=reward) if t.step == k else t for t in ts]


def _with_state(ts: list[Transition], k: int, value: float, *, which: str = "observation") -> list[Transition]:
    out = list(ts)
    obs = getattr(out[k], which)
    state = obs.state.astype(np.float64)  # float64: a value beyond float32 stays what it is here
    state[3] = value
    out[k] = replace(out[k], **{which: replace(obs, state=state)})
    return out


def _with_action(ts: list[Transition], k: int, value: float) -> list[Transition]:
    out = list(ts)
    data = out[k].action.data.copy()
    data[1] = value
    out[k] = replace(out[k], action=replace(out[k].action, data=data))
    return out


def _with_robot(ts: list[Transition], robot: str) -> list[Transition]:
    return [
        replace(
            t,
            observation=replace(t.observation, robot_id=robot),
            next_observation=replace(t.next_observation, robot_id=robot),
            action=replace(t.action, robot_id=robot),
        )
        for t in ts
    ]


def _with_episode_id(ts: list[Transition], episode_id: int) -> list[Transition]:
    return [replace(t, observation=replace(t.observation, episode_id=episode_id)) for t in ts]


BAD_EPISODES: dict[str, tuple[Callable[[list[Transition]], list[Transition]], str]] = {
    "nan-reward": (lambda ts: _with_reward(ts, 1, math.nan), r"step 1: reward is not finite \(nan\)"),
    "inf-reward": (lambda ts: _with_reward(ts, 2, -math.inf), r"step 2: reward is not finite \(-inf\)"),
    "reward-beyond-float32": (lambda ts: _with_reward(ts, 0, 1e39), r"step 0: reward is out of range \(1e\+39,"),
    "nan-state": (
        lambda ts: _with_state(ts, 0, math.nan),
        r"step 0: observation\.state is not finite \(1 of 7 values, first nan at index 3\)",
    ),
    "state-beyond-float32": (
        lambda ts: _with_state(ts, 1, -1e39),
        r"step 1: observation\.state is out of range \(1 of 7 values, first -1e\+39 at index 3;",
    ),
    "inf-next-state": (
        lambda ts: _with_state(ts, 2, math.inf, which="next_observation"),
        r"step 2: next_observation\.state is not finite \(1 of 7 values, first inf at index 3\)",
    ),
    "nan-action": (
        lambda ts: _with_action(ts, 1, math.nan),
        r"step 1: action\.data is not finite \(1 of 4 values, first nan at index 1\)",
    ),
    "shape-changes": (
        lambda ts: [*ts[:2], replace(ts[2], observation=replace(ts[2].observation, state=np.zeros(3, np.float32)))],
        r"step 2: observation\.state changes shape in the episode \(\(3,\), step 0 had \(7,\)\)",
    ),
    "episode-id-overflows": (
        lambda ts: _with_episode_id(ts, 2**63),
        "step 0: observation.episode_id is out of range .9223372036854775808,",
    ),
    "policy-version-overflows": (
        lambda ts: [replace(t, action=replace(t.action, policy_version=2**32)) for t in ts],
        r"step 0: action\.policy_version is out of range \(4294967296, expected 0\.\.4294967295\)",
    ),
    "no-robot": (lambda ts: _with_robot(ts, ""), "step 0: observation.robot_id is empty"),
    "robot-not-utf8": (
        lambda ts: _with_robot(ts, "arm\udcff"),
        "step 0: observation.robot_id is not a name .'arm\\\\udcff'.",
    ),
}


@pytest.mark.parametrize("bad", BAD_EPISODES, ids=list(BAD_EPISODES))
def test_a_whole_episode_with_a_value_the_buffer_cannot_hold_is_refused_before_any_write(
    tmp_path: Path, w: EpisodeWriter, bad: str
) -> None:
    """issue 13, finding 2: a NaN reward used to be refused only by SQLite's NOT NULL, after its records were in
    the segment (verify then failed for good); inf/NaN states and actions were stored and poisoned training."""
    damage, reason = BAD_EPISODES[bad]
    w.add_episode(episode("arm", 0, 3))
    size = _size(tmp_path, SEG0)
    with pytest.raises(InvalidTransitionError, match=f"^episode .*/[0-9]+ refused: {reason}"):
        w.add_episode(damage(episode("arm", 1, 3)))
    assert _size(tmp_path, SEG0) == size and w.index.count() == (3, 1)
    assert w.add_episode(episode("arm", 2, 3)) == 1  # the writer goes on
    w.roll()
    assert verify(tmp_path, w.index, CODEC).ok


def test_a_wall_time_out_of_range_is_refused(w: EpisodeWriter) -> None:
    with pytest.raises(InvalidTransitionError, match=r"step 0: wall_ns is out of range \(9223372036854775808,"):
        w.add_episode(episode("arm", 0, 2), wall_ns=2**63)
    with pytest.raises(
        InvalidTransitionError, match=r"arm/1 step 0 refused: wall_ns is out of range \(-9223372036854775809,"
    ):
        w.add(transition("arm", 1, 0, 2), wall_ns=-(2**63) - 1)
    assert w.index.segments() == [] and w.pending_steps() == {}


def test_a_live_transition_with_a_nan_reward_changes_nothing(tmp_path: Path, w: EpisodeWriter) -> None:
    """A refused transition leaves the robot's episode in progress as it was: its real steps still complete it."""
    w.add_episode(episode("other", 0, 2))
    size = _size(tmp_path, SEG0)
    steps = episode("arm", 4, 4)
    w.add(steps[0])
    w.add(steps[1])
    forged = replace(steps[2], reward=math.nan)
    with pytest.raises(
        InvalidTransitionError, match=r"^transition arm/4 step 2 refused: reward is not finite \(nan\)$"
    ):
        w.add(forged)
    with pytest.raises(InvalidTransitionError, match=r"reward is not finite \(nan\)"):
        w.add(forged, payload=CODEC.encode(transition_to_msg(forged, CODEC)))  # its bytes as they came on the wire
    with pytest.raises(
        InvalidTransitionError,
        match=r"transition arm/9 step 0 refused: observation\.state is not finite .* inf at index 3",
    ):
        w.add(_with_state(episode("arm", 9, 2), 0, math.inf)[0])  # another episode id: the one in progress stays
    odd = replace(steps[2], observation=replace(steps[2].observation, state=np.zeros(2, np.float32)))
    with pytest.raises(
        InvalidTransitionError,
        match=r"step 2 refused: observation\.state changes shape in the episode \(\(2,\), step 0 had \(7,\)\)",
    ):
        w.add(odd)
    assert w.transitions_refused == 4 and w.pending_steps() == {"arm": 2}
    assert _size(tmp_path, SEG0) == size and w.index.count() == (2, 1)
    assert w.add(steps[2]) is None and w.add(steps[3]) == 1
    assert _stored(w) == [("other", 0), ("arm", 4)] and w.episodes_dropped == 0


def test_the_issues_nan_reward_leaves_a_buffer_that_verifies(tmp_path: Path) -> None:
    """The reproduction of finding 2 through the learner's API: a NaN reward among real episodes, then more real
    episodes; the buffer that results verifies OK, before and after it is closed and opened again."""
    with ReplayBuffer.open(tmp_path, BufferConfig(prefetch=0)) as buf:
        for e in range(3):
            for t in episode("franka_left", e, 4):
                buf.add(t)
        for t in _with_reward(episode("franka_left", 3, 4), 2, math.nan):
            try:
                buf.add(t)
            except InvalidTransitionError as exc:
                assert "reward is not finite (nan)" in str(exc)
        for t in episode("franka_left", 4, 4):
            buf.add(t)
        assert buf.verify().ok
    assert _reopened(tmp_path) == [("franka_left", e) for e in (0, 1, 2, 4)]


def test_an_index_that_refuses_an_episode_leaves_no_record_of_it_in_the_segment(
    tmp_path: Path, w: EpisodeWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What SQLite refuses after the segment write (disk full, a constraint) is cut from the segment: the index
    and the segment agree on every message, now and after the buffer is opened again."""
    w.add_episode(episode("arm", 0, 3))
    size = _size(tmp_path, SEG0)
    real = w.index.commit_episode

    def refuse(*_args: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(w.index, "commit_episode", refuse)
    with pytest.raises(
        EpisodeNotStoredError, match="episode 1 .3 steps. was not stored: the index refused it .database"
    ):
        w.add_episode(episode("arm", 1, 3))
    assert _size(tmp_path, SEG0) == size and _messages_in(tmp_path, SEG0) == ONE_EPISODE
    monkeypatch.setattr(w.index, "commit_episode", real)
    assert w.add_episode(episode("arm", 2, 3)) == 1
    assert [s.name for s in w.index.segments()] == [SEG0, SEG1] and w.episodes_lost == 1
    w.close()
    assert verify(tmp_path, w.index, CODEC).ok
    assert _reopened(tmp_path) == [("arm", 0), ("arm", 2)]


# ---- finding 4: a (robot, episode) is stored once ------------------------------------------------------


def test_a_respawned_robot_that_starts_again_at_episode_0_is_not_stored_twice(
    tmp_path: Path, w: EpisodeWriter, caplog: pytest.LogCaptureFixture
) -> None:
    """issue 13, finding 4: after a kill -9 a robot restarted at episode 0 and the buffer held 17 duplicated ids."""
    for e in range(2):
        for t in episode("arm", e, 3):
            w.add(t)
    size = _size(tmp_path, SEG0)
    with caplog.at_level(logging.WARNING, logger="user.buffer.writer"):
        results = [w.add(t) for t in episode("arm", 0, 3)]  # the respawned robot's first episode
    assert results == [None, None, None]
    assert "dropping robot arm's episode 0 (0 steps): the buffer holds it already (buffer episode 0)" in caplog.text
    assert (w.duplicates_refused, w.episodes_dropped) == (1, 1) and w.pending_steps() == {}
    assert _size(tmp_path, SEG0) == size and _stored(w) == [("arm", 0), ("arm", 1)]
    for t in episode("arm", 2, 3):
        w.add(t)
    assert _stored(w) == [("arm", 0), ("arm", 1), ("arm", 2)]


def test_a_resent_episode_the_buffer_holds_is_refused_and_nothing_is_written(tmp_path: Path, w: EpisodeWriter) -> None:
    assert w.add_episode(episode("arm", 5, 3)) == 0
    size = _size(tmp_path, SEG0)
    with pytest.raises(
        DuplicateEpisodeError, match=r"^episode arm/5 refused: the buffer holds it already \(episode 0\)$"
    ):
        w.add_episode(episode("arm", 5, 3))
    assert _size(tmp_path, SEG0) == size and w.index.count() == (3, 1) and w.duplicates_refused == 1
    assert w.add_episode(episode("other", 5, 3)) == 1  # the same id of another robot is another episode


def test_a_live_episode_stored_meanwhile_as_a_resent_one_is_dropped_at_its_end(
    tmp_path: Path, w: EpisodeWriter, caplog: pytest.LogCaptureFixture
) -> None:
    steps = episode("arm", 3, 3)
    w.add(steps[0])
    w.add_episode(steps)  # the robot re-sent it (no receipt) while its live steps were still arriving
    with caplog.at_level(logging.WARNING, logger="user.buffer.writer"):
        assert w.add(steps[1]) is None and w.add(steps[2]) is None
    assert "episode arm/3 refused: the buffer holds it already (episode 0)" in caplog.text
    assert _stored(w) == [("arm", 3)] and w.duplicates_refused == 1 and w.pending_steps() == {}


def test_duplicates_are_refused_across_a_restart_of_the_writer(tmp_path: Path, writers: list[EpisodeWriter]) -> None:
    first = _writer(tmp_path)
    first.add_episode(episode("arm", 0, 2))
    first.close()
    first.storage.close()
    first.index.close()
    again = _writer(tmp_path)
    writers.append(again)
    assert again.index.stored_episode("arm", 0) == 0 and again.index.stored_episode("arm", 1) is None
    with pytest.raises(DuplicateEpisodeError):
        again.add_episode(episode("arm", 0, 2))
    assert again.index.count() == (2, 1)


# ---- finding 7: a full disk costs the episode being written, not the writer -----------------------------


def _live(w: EpisodeWriter, ts: list[Transition]) -> int | None:
    result = None
    for t in ts:
        result = w.add(t)
    return result


def test_after_a_full_disk_the_next_episode_is_stored_once_space_is_freed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writers: list[EpisodeWriter]
) -> None:
    """issue 13, finding 7: after ENOSPC the writer stayed broken ('segment already closed') even with space
    freed, because abandon() raised. Now the failed episode is reported lost, what was committed stays intact
    and valid, and the next episode goes into a new segment."""
    disk: FullDisk = full_disk(monkeypatch)
    w = _writer(tmp_path)
    writers.append(w)
    assert _live(w, episode("arm", 0, 3)) == 0
    size = _size(tmp_path, SEG0)
    disk.full = True
    with pytest.raises(EpisodeNotStoredError, match="robot arm's episode 1 .3 steps. was not stored: .*No space left"):
        _live(w, episode("arm", 1, 3))
    assert w.episodes_lost == 1 and w.pending_steps() == {} and w.index.count() == (3, 1)
    assert _size(tmp_path, SEG0) == size and _messages_in(tmp_path, SEG0) == ONE_EPISODE  # cut back to episode 0
    assert verify(tmp_path, w.index, CODEC).ok
    disk.full = False  # space freed
    assert _live(w, episode("arm", 2, 3)) == 1
    assert w.add_episode(episode("arm", 1, 3)) == 2  # the robot re-sends the lost one
    assert [(s.name, s.state) for s in w.index.segments()] == [(SEG0, "open"), (SEG1, "open")]
    w.close()
    assert _reopened(tmp_path) == [("arm", 0), ("arm", 2), ("arm", 1)]


def test_a_segment_that_cannot_be_closed_keeps_its_committed_episodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writers: list[EpisodeWriter], caplog: pytest.LogCaptureFixture
) -> None:
    """The disk fills between an episode's commit and the roll that follows it: the episode is stored and said
    to be (no error for it), the segment stays open until recovery gives it its footer."""
    disk = full_disk(monkeypatch)
    config = StorageConfig(cache_size=10, fsync="never", segment_max_episodes=1)
    index = Index(tmp_path, durable=False)

    def fill_after_commit(point: str) -> None:
        disk.full = disk.full or point == "episode:indexed"

    w = EpisodeWriter(DiskStorage(tmp_path, index, CODEC, config), config, fault_hook=fill_after_commit)
    writers.append(w)
    with caplog.at_level(logging.ERROR, logger="user.buffer.writer"):
        assert w.add_episode(episode("arm", 0, 3)) == 0
    footer = f"{segment_path(tmp_path, SEG0)}: cannot write the footer (No space left on device)"
    assert caplog.messages == [
        f"segment {SEG0} could not be closed ({footer}); its 1 episodes stay readable and it is finished when the "
        "buffer is opened next"
    ]
    assert [(s.name, s.state) for s in w.index.segments()] == [(SEG0, "open")]
    assert _messages_in(tmp_path, SEG0) == ONE_EPISODE
    disk.full = False
    w._hook = lambda _point: None
    assert w.add_episode(episode("arm", 1, 3)) == 1
    assert [(s.name, s.state) for s in w.index.segments()] == [(SEG0, "open"), (SEG1, "closed")]
    w.close()
    assert _reopened(tmp_path) == [("arm", 0), ("arm", 1)]


def test_a_segment_that_cannot_be_opened_costs_only_that_episode(
    tmp_path: Path, w: EpisodeWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = w.index.add_segment

    def full(*_args: object) -> object:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(w.index, "add_segment", full)
    with pytest.raises(EpisodeNotStoredError, match="no segment could be opened .database or disk is full"):
        w.add_episode(episode("arm", 0, 2))
    monkeypatch.setattr(w.index, "add_segment", real)
    assert w.add_episode(episode("arm", 0, 2)) == 0 and w.episodes_lost == 1


# ---- what the writer says and counts, exactly ------------------------------------------------------------


def _unencodable(t: Transition) -> Transition:
    """Values the checks pass but the stored message cannot hold (a frame id that is no UTF-8 text)."""
    return replace(t, observation=replace(t.observation, frame_id="base\udc80"))


def test_a_transition_that_cannot_be_encoded_is_refused_like_a_bad_value(tmp_path: Path, w: EpisodeWriter) -> None:
    steps = episode("arm", 0, 3)
    w.add(steps[0])
    with pytest.raises(
        InvalidTransitionError, match=r"^transition arm/0 step 1 refused: cannot encode user/msg/Transition: 'utf-8'"
    ):
        w.add(_unencodable(steps[1]))
    assert w.pending_steps() == {"arm": 1} and w.transitions_refused == 1
    with pytest.raises(
        InvalidTransitionError, match=r"^episode arm/1 refused: step 2: cannot encode user/msg/Transition: 'utf-8'"
    ):
        w.add_episode([*episode("arm", 1, 3)[:2], _unencodable(episode("arm", 1, 3)[2])])
    assert w.index.segments() == []
    assert w.add(steps[1]) is None and w.add(steps[2]) == 0


def test_a_forged_one_step_episode_is_counted_each_time_it_is_refused(
    tmp_path: Path, w: EpisodeWriter, caplog: pytest.LogCaptureFixture
) -> None:
    """Finding 1's forged episode was one step long; live and re-sent copies of a stored one are counted apart."""
    assert w.add_episode(episode("arm", 7, 1)) == 0
    for _ in range(2):
        with pytest.raises(DuplicateEpisodeError, match=r"^episode arm/7 refused: the buffer holds it already"):
            w.add_episode(episode("arm", 7, 1))
    with caplog.at_level(logging.WARNING, logger="user.buffer.writer"):
        for _ in range(2):
            assert w.add(episode("arm", 7, 1)[0]) is None
    assert (w.duplicates_refused, w.episodes_dropped, w.episodes_committed) == (4, 2, 1)
    assert (
        caplog.messages
        == ["dropping robot arm's episode 7 (0 steps): the buffer holds it already (buffer episode 0)"] * 2
    )


def test_a_duplicate_ended_by_an_operator_reset_is_dropped_quietly(tmp_path: Path, w: EpisodeWriter) -> None:
    """The END event of a duplicated live episode (whose steps were never kept) drops it without an error."""
    w.add_episode(episode("arm", 2, 3))
    steps = episode("arm", 2, 5)[:2]
    for t in steps:
        assert w.add(t) is None
    assert w.end_episode("arm", 2, 2) is None
    assert w.pending_steps() == {} and w.episodes_dropped == 1 and w.index.count() == (3, 1)


def test_a_reset_end_that_came_before_any_step_stores_the_episode_with_its_last_step(w: EpisodeWriter) -> None:
    """The END event (2 steps) arrives first; the second step then completes the episode by itself."""
    assert w.end_episode("arm", 4, 2) is None and w.end_episode("arm", 4, 0) is None
    steps = episode("arm", 4, 5)[:2]
    assert w.add(steps[0]) is None
    assert w.add(steps[1]) == 0
    assert [r.truncated for r in w.index.transitions()] == [False, True] and w.pending_steps() == {}
    assert w.end_episode("arm", 5, 1) is None
    assert w.add(episode("arm", 5, 9)[0]) == 1  # a one-step episode ended by a reset
    assert [e.steps for e in w.index.episodes()] == [2, 1]


def test_a_lost_episode_is_said_once_in_the_log_as_in_the_error(
    tmp_path: Path, w: EpisodeWriter, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def refuse(*_args: object) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(w.index, "commit_episode", refuse)
    errors = []
    with caplog.at_level(logging.ERROR, logger="user.buffer.writer"):
        for e in range(2):
            with pytest.raises(EpisodeNotStoredError) as lost:
                w.add_episode(episode("arm", e, 1))
            errors.append(str(lost.value))
    assert errors[0] == (
        "robot arm's episode 0 (1 steps) was not stored: the index refused it (disk I/O error); its records were "
        "cut from the segment; the episodes stored before it are intact and the next one opens a new segment"
    )
    assert caplog.messages == errors and w.episodes_lost == 2 and w.episodes_committed == 0


def test_opening_and_closing_segments_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = StorageConfig(cache_size=10, fsync="never", segment_max_episodes=2)
    index = Index(tmp_path, durable=False)
    w = EpisodeWriter(DiskStorage(tmp_path, index, CODEC, config), config, clock=lambda: 123)
    assert w.index.segments() == []  # no segment before the first episode
    with caplog.at_level(logging.INFO, logger="user.buffer.writer"):
        for e in range(2):
            w.add_episode(episode("arm", e, 1))
    assert caplog.messages == [f"opened segment {SEG0}", f"closed segment {SEG0} (2 episodes)"]
    assert w.episodes_committed == 2 and w.index.segments()[0].closed_ns == 123
    w.close()
    w.storage.close()
    index.close()
