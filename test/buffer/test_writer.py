"""The episode writer alone: what one stored episode leaves in the index and the segment, which episodes it
refuses whole (and says why), when segments roll, what reaches stable storage, and how it continues."""

import logging
import os
import re
from dataclasses import replace
from pathlib import Path

import pytest
from mcap.reader import make_reader

from test.buffer.factories import episode, transition
from test.buffer.fsyncs import record_fsyncs
from user.buffer.config import StorageConfig
from user.buffer.disk.camera_topics import frame_from_payload, record
from user.buffer.disk.directory import segment_name, segment_path
from user.buffer.disk.metadata import read_metadata
from user.buffer.disk.next_frames import IN_NEXT_STEP
from user.buffer.disk.segments import EVENT_TOPIC, EVENT_TYPE, TRANSITION_TOPIC, TRANSITION_TYPE, Position
from user.buffer.errors import BufferError, EpisodeNotStoredError, InvalidTransitionError
from user.buffer.index import Index
from user.buffer.rows import TransitionRow
from user.buffer.storage import DiskStorage
from user.buffer.writer import EpisodeWriter
from user.interfaces import default_codec
from user.interfaces.domain import Transition, transition_from_msg, transition_to_msg
from user.interfaces.episode_events import EpisodeKind, episode_event_from_msg

CODEC = default_codec()


class Clock:
    """A wall clock that advances 1 µs per reading, so every stamp the writer takes is known."""

    def __init__(self, start: int = 5_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        self.now += 1000
        return self.now


def _writer(
    directory: Path, clock: Clock | None = None, points: list[str] | None = None, **storage: object
) -> EpisodeWriter:
    config = StorageConfig(**{"cache_size": 1000, "fsync": "never", **storage})  # type: ignore[arg-type]
    index = Index(directory, durable=False)
    disk = DiskStorage(directory, index, CODEC, config)
    return EpisodeWriter(disk, config, clock=clock or Clock(), fault_hook=None if points is None else points.append)


def _messages(path: Path, *, frames: bool = False) -> list[tuple[str, object]]:
    """(topic, decoded domain object) of every message of a segment file, in file order (camera frames too if
    `frames`)."""
    out: list[tuple[str, object]] = []
    with open(path, "rb") as f:
        for _schema, channel, message in make_reader(f).iter_messages(log_time_order=False):
            if channel.topic not in (EVENT_TOPIC, TRANSITION_TOPIC):
                if frames:
                    out.append((channel.topic, frame_from_payload(message.data, CODEC)))
                continue
            msg = CODEC.decode(message.data, EVENT_TYPE if channel.topic == EVENT_TOPIC else TRANSITION_TYPE)
            decoded = episode_event_from_msg(msg) if channel.topic == EVENT_TOPIC else transition_from_msg(msg)
            out.append((channel.topic, decoded))
    return out


def _wire(t: object) -> bytes:
    """A transition as CDR bytes: equal bytes, equal transitions (arrays included)."""
    return CODEC.encode(transition_to_msg(t, CODEC))  # type: ignore[arg-type]


def _as_stored(steps: list[Transition]) -> list[Transition]:
    """An episode's steps as its records hold them: each frame once, the next frames of all but the last step
    left to the step after it (`user.buffer.disk.next_frames`), the others on camera topics (`camera_topics`)."""
    return [record(t, keep_next=False) for t in steps[:-1]] + [record(t, keep_next=True) for t in steps[-1:]]


def _stored(w: EpisodeWriter, row: TransitionRow) -> Transition:
    """The transition in the segment file at the position `row` gives."""
    data = w.storage.read_payload(row.segment_id, Position(row.offset, row.length))
    return transition_from_msg(CODEC.decode(data, TRANSITION_TYPE))


def test_a_stored_episode_leaves_every_field_in_the_index(tmp_path: Path, writers: list[EpisodeWriter]) -> None:
    """Episode row: its aggregates (success if any step succeeded, the summed return, intervention count, demo
    only if every step is, the newest policy version) and the wall times of its first and last step; each
    transition row: its own fields and a position holding exactly its message."""
    w = _writer(tmp_path)
    writers.append(w)
    steps = [
        replace(t, reward=0.25 * (k + 1), is_demo=k != 1)
        for k, t in enumerate(episode("arm", 7, 4, success=True, version=3))
    ]
    steps[1] = replace(steps[1], action=replace(steps[1].action, intervened=True, policy_version=9))
    walls = [100, 200, 300, 400]
    numbers = [w.add(t, wall_ns=ns) for t, ns in zip(steps, walls, strict=True)]
    assert numbers == [None, None, None, 0]
    assert (w.episodes_committed, w.episodes_dropped) == (1, 0)
    [row] = w.index.episodes()
    assert (row.episode, row.robot_id, row.task, row.episode_id, row.steps, row.first_index) == (
        0, "arm", "peg_insertion", 7, 4, 0
    )  # fmt: skip
    assert row.success is True and row.episode_return == pytest.approx(2.5) and row.interventions == 1
    assert row.is_demo is False and row.policy_version == 9
    assert (row.start_wall_ns, row.end_wall_ns) == (100, 400)
    rows = w.index.transitions()
    assert [r.index for r in rows] == [0, 1, 2, 3] and {r.episode for r in rows} == {0}
    for r, t, ns, kept in zip(rows, steps, walls, _as_stored(steps), strict=True):
        assert (r.robot_id, r.task, r.episode_id, r.step, r.wall_ns, r.sim_ns) == (
            "arm", "peg_insertion", 7, t.step, ns, t.stamp_ns
        )  # fmt: skip
        assert (r.reward, r.terminated, r.truncated, r.success) == (t.reward, t.terminated, t.truncated, t.success)
        assert (r.intervened, r.is_demo, r.policy_version) == (t.action.intervened, t.is_demo, t.action.policy_version)
        assert _wire(_stored(w, r)) == _wire(kept)
        assert _wire(w.storage.read(r.index)) == _wire(t)


def test_the_segment_brackets_each_episode_with_start_and_end_events(
    tmp_path: Path, writers: list[EpisodeWriter]
) -> None:
    """START carries the first step's policy version and no totals; END carries steps, return, success,
    interventions and the last step's version; log times are the steps' wall times."""
    w = _writer(tmp_path)
    writers.append(w)
    steps = episode("arm", 2, 3, success=True, version=4, intervened=True)
    steps[-1] = replace(steps[-1], action=replace(steps[-1].action, policy_version=6))
    for k, t in enumerate(steps):
        w.add(t, wall_ns=1000 * (k + 1))
    w.roll()
    got = _messages(segment_path(tmp_path, segment_name(0)))
    assert [topic for topic, _ in got] == [
        EVENT_TOPIC,
        TRANSITION_TOPIC,
        TRANSITION_TOPIC,
        TRANSITION_TOPIC,
        EVENT_TOPIC,
    ]
    start, end = got[0][1], got[-1][1]
    assert (start.kind, start.steps, start.episode_return, start.success, start.interventions) == (  # type: ignore[attr-defined]
        EpisodeKind.START, 0, 0.0, False, 0
    )  # fmt: skip
    assert (start.policy_version, start.stamp_ns, start.episode_id, start.robot_id) == (4, 1000, 2, "arm")  # type: ignore[attr-defined]
    assert (end.kind, end.steps, end.episode_return, end.success, end.interventions) == (  # type: ignore[attr-defined]
        EpisodeKind.END, 3, 1.0, True, 3
    )  # fmt: skip
    assert (end.policy_version, end.stamp_ns) == (6, 3000)  # type: ignore[attr-defined]
    assert [_wire(t) for _, t in got[1:-1]] == [_wire(t) for t in _as_stored(steps)]


def test_steps_without_a_wall_time_take_the_writers_clock(tmp_path: Path, writers: list[EpisodeWriter]) -> None:
    clock = Clock(start=0)
    w = _writer(tmp_path, clock)
    writers.append(w)
    for t in episode("arm", 0, 2):
        w.add(t)
    w.add_episode(episode("arm", 1, 2))
    walls = [r.wall_ns for r in w.index.transitions()]
    # two live steps read the clock once each; the opened segment reads it between them; a whole episode
    # reads it once for all its steps
    assert walls[0] < walls[1] and walls[2] == walls[3] > walls[1]


def test_episodes_are_numbered_on_from_what_the_index_holds(tmp_path: Path, writers: list[EpisodeWriter]) -> None:
    first = _writer(tmp_path)
    for e in range(2):
        first.add_episode(episode("arm", e, 3))
    first.close()
    first.storage.close()
    first.index.close()
    again = _writer(tmp_path)
    writers.append(again)
    assert again.add_episode(episode("arm", 2, 4)) == 2
    assert [r.first_index for r in again.index.episodes()] == [0, 3, 6]
    assert [r.index for r in again.index.transitions()][-4:] == [6, 7, 8, 9]
    assert again.add_episode(episode("arm", 3, 1)) == 3  # the next episode and transition numbers follow on
    assert [r.index for r in again.index.transitions()][-1] == 10


@pytest.mark.parametrize(
    ("stream", "reason"),
    [
        (lambda: episode("arm", 0, 4)[1:], "first step received was 1, not 0"),
        (lambda: [episode("arm", 0, 4)[k] for k in (0, 1, 3)], "step 3 arrived where step 2 was due"),
        (lambda: episode("arm", 0, 4), "longer than max_episode_steps=3"),
    ],
    ids=["late-start", "gap", "too-long"],
)
def test_a_broken_episode_is_dropped_whole_and_says_why(
    tmp_path: Path, writers: list[EpisodeWriter], caplog: pytest.LogCaptureFixture, stream: object, reason: str
) -> None:
    w = _writer(tmp_path, max_episode_steps=3)
    writers.append(w)
    with caplog.at_level(logging.WARNING, logger="user.buffer.writer"):
        results = [w.add(t) for t in stream()]  # type: ignore[operator]
    assert results[-1] is None and (w.episodes_committed, w.episodes_dropped) == (0, 1)
    assert w.index.episodes() == [] and w.pending_steps() == {}
    assert "dropping robot arm's episode 0" in caplog.text and reason in caplog.text
    assert w.add_episode(episode("arm", 1, 3)) == 0  # the next good one is stored, numbered from 0


def test_an_episode_that_starts_before_the_last_one_ended_drops_the_unfinished_one(
    tmp_path: Path, writers: list[EpisodeWriter], caplog: pytest.LogCaptureFixture
) -> None:
    """Robots are independent: another robot's episode in progress is kept."""
    w = _writer(tmp_path)
    writers.append(w)
    w.add(transition("other", 5, 0, 2))
    for t in episode("arm", 0, 3)[:2]:
        w.add(t)
    with caplog.at_level(logging.WARNING, logger="user.buffer.writer"):
        for t in episode("arm", 1, 2):
            w.add(t)
    assert "episode 1 started before it ended" in caplog.text and "episode 0 (2 steps)" in caplog.text
    assert [(r.robot_id, r.episode_id) for r in w.index.episodes()] == [("arm", 1)]
    assert w.pending_steps() == {"other": 1} and w.episodes_dropped == 1
    assert w.add(transition("other", 5, 1, 2)) == 1


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: [], "episode is empty (an episode needs at least one transition)"),
        (
            lambda: [*episode("arm", 0, 2)[:1], transition("b", 0, 1, 2)],
            "arm/0: transition 1 belongs to another episode (b/0)",
        ),
        (
            lambda: [*episode("arm", 0, 2)[:1], transition("arm", 1, 1, 2)],
            "arm/0: transition 1 belongs to another episode (arm/1)",
        ),
        (lambda: [episode("arm", 0, 3)[k] for k in (0, 2)], "arm/0: step 2 is out of order (step 1 was due)"),
        (lambda: episode("arm", 0, 3)[:2], "arm/0: the last transition does not end the episode"),
        (lambda: episode("arm", 0, 4), "arm/0 is too long (4 steps, max_episode_steps=3)"),
    ],
    ids=["empty", "other-robot", "other-episode", "gap", "no-end", "too-long"],
)
def test_a_whole_episode_is_checked_before_anything_is_written(
    tmp_path: Path, writers: list[EpisodeWriter], make: object, message: str
) -> None:
    w = _writer(tmp_path, max_episode_steps=3)
    writers.append(w)
    with pytest.raises(BufferError, match=f"^{re.escape(message)}$"):
        w.add_episode(make())  # type: ignore[operator]
    assert w.index.segments() == [] and w.index.count() == (0, 0)


def test_an_episode_of_exactly_max_steps_is_stored(tmp_path: Path, writers: list[EpisodeWriter]) -> None:
    w = _writer(tmp_path, max_episode_steps=3)
    writers.append(w)
    assert w.add_episode(episode("arm", 0, 3)) == 0
    for t in episode("arm", 1, 3):
        w.add(t)
    assert w.index.count() == (6, 2)


def test_a_resent_episode_is_stored_beside_the_live_one(tmp_path: Path, writers: list[EpisodeWriter]) -> None:
    w = _writer(tmp_path)
    writers.append(w)
    live = episode("arm", 4, 3)
    w.add(live[0])
    assert w.add_episode(episode("arm", 3, 2)) == 0
    for t in live[1:]:
        w.add(t)
    assert [(r.episode, r.episode_id, r.first_index) for r in w.index.episodes()] == [(0, 3, 0), (1, 4, 2)]


def test_an_operator_reset_ends_the_episode_truncated(tmp_path: Path, writers: list[EpisodeWriter]) -> None:
    w = _writer(tmp_path)
    writers.append(w)
    steps = episode("arm", 0, 5)[:3]
    for t in steps:
        w.add(t)
    assert w.end_episode("arm", 0, 3) == 0
    rows = w.index.transitions()
    assert [r.truncated for r in rows] == [False, False, True] and w.pending_steps() == {}
    stored = w.storage.get([2])[0]
    assert stored.truncated and not stored.terminated and stored.step == 2
    assert _stored(w, rows[2]).truncated  # the file says so too
    assert w.end_episode("arm", 0, 3) is None and w.end_episode("nobody", 0, 3) is None
    assert len(w.index.episodes()) == 1


def test_a_reset_end_that_overtakes_its_steps_waits_for_them(tmp_path: Path, writers: list[EpisodeWriter]) -> None:
    w = _writer(tmp_path)
    writers.append(w)
    steps = episode("arm", 4, 5)[:3]
    assert w.end_episode("arm", 4, 3) is None  # the END event came before any step
    assert w.add(steps[0]) is None and w.add(steps[1]) is None
    assert w.end_episode("arm", 4, 3) is None  # again, after two of its three steps: still waiting
    assert w.add(steps[2]) == 0  # the last step completes it
    assert [r.truncated for r in w.index.transitions()] == [False, False, True] and w.pending_steps() == {}


def test_an_end_event_leaves_episodes_it_does_not_end_alone(tmp_path: Path, writers: list[EpisodeWriter]) -> None:
    w = _writer(tmp_path)
    writers.append(w)
    for t in episode("arm", 0, 3):  # ended with a done step; its END event arrives afterwards
        w.add(t)
    assert w.end_episode("arm", 0, 3) is None
    nxt = episode("arm", 1, 4)
    w.add(nxt[0])
    assert w.end_episode("arm", 0, 3) is None  # an older episode's END does not end the running one
    assert w.end_episode("arm", 1, 0) is None  # ended before its first step: nothing to store
    for t in nxt[1:]:
        w.add(t)
    as_sent = [t.truncated for t in [*episode("arm", 0, 3), *nxt]]  # no step was marked truncated by the writer
    assert [r.truncated for r in w.index.transitions()] == as_sent
    assert [e.steps for e in w.index.episodes()] == [3, 4]


def test_an_end_event_of_a_broken_episode_drops_it_now(tmp_path: Path, writers: list[EpisodeWriter]) -> None:
    w = _writer(tmp_path)
    writers.append(w)
    steps = episode("arm", 0, 5)
    w.add(steps[0])
    w.add(steps[2])  # step 1 was lost
    assert w.end_episode("arm", 0, 3) is None
    assert w.pending_steps() == {} and w.episodes_dropped == 1 and w.index.episodes() == []


def _payload(w: EpisodeWriter, row: TransitionRow) -> bytes:
    """The stored bytes of the transition `row` describes."""
    return w.storage.read_payload(row.segment_id, Position(row.offset, row.length))


def _padded(t: Transition) -> bytes:
    """CDR bytes of `t` that differ from what the writer would encode (two trailing alignment bytes, as some DDS
    serializers add) but decode to `t` all the same: stored as given, they show the writer did not re-encode."""
    return _wire(t) + b"\x00\x00"


def test_bytes_given_with_a_transition_are_stored_as_they_came(tmp_path: Path, writers: list[EpisodeWriter]) -> None:
    w = _writer(tmp_path)
    writers.append(w)
    steps = episode("arm", 0, 3, images=False)  # with images, see the next test
    first, last = _padded(steps[0]), _padded(steps[2])
    for t, payload in zip(steps, [first, None, last], strict=True):
        w.add(t, payload=payload)
    rows = w.index.transitions()
    assert [_payload(w, r) for r in rows] == [first, _wire(steps[1]), last]  # none given: encoded here
    assert [r.length for r in rows] == [len(first), len(_wire(steps[1])), len(last)]
    assert all(_wire(_stored(w, r)) == _wire(t) for r, t in zip(rows, steps, strict=True))


def test_bytes_given_with_images_are_stored_with_each_frame_once(tmp_path: Path, writers: list[EpisodeWriter]) -> None:
    """A step's next frames are the next step's observation frames: stored once, in the next step's record, the
    bytes given encoded again without them; the last step keeps its own. Read back, every step is whole."""
    w = _writer(tmp_path)
    writers.append(w)
    steps = episode("arm", 0, 3)
    for t in steps:
        w.add(t, payload=_padded(t))
    rows = w.index.transitions()
    assert [_payload(w, r) for r in rows] == [_wire(t) for t in _as_stored(steps)]
    w.roll()
    data = segment_path(tmp_path, segment_name(0)).read_bytes()
    frames = [t.observation.images for t in steps] + [steps[-1].next_observation.images]
    assert [data.count(f[0].data) for f in frames] == [2, 2, 2, 2]  # each step's frame, in both cameras, once
    assert [_wire(t) for t in w.storage.get([0, 1, 2])] == [_wire(t) for t in steps]
    assert [_wire(w.storage.read(r.index)) for r in rows] == [_wire(t) for t in steps]


def test_a_step_whose_next_frames_are_not_the_next_steps_keeps_them(
    tmp_path: Path, writers: list[EpisodeWriter]
) -> None:
    """A camera that gave step 1 another frame than step 0's next one breaks the chain there: step 0 is stored
    whole, and reads back as it came."""
    w = _writer(tmp_path)
    writers.append(w)
    steps = episode("arm", 0, 3)
    wrist, front = steps[1].observation.images
    other = replace(steps[1], observation=replace(steps[1].observation, images=(wrist, replace(front, data=b"x"))))
    steps[1] = other
    assert w.add_episode(steps) == 0
    rows = w.index.transitions()
    records = [record(steps[0], keep_next=True), record(steps[1], keep_next=False), record(steps[2], keep_next=True)]
    assert [_payload(w, r) for r in rows] == [_wire(t) for t in records]
    assert [_wire(w.storage.read(r.index)) for r in rows] == [_wire(t) for t in steps]


def test_an_image_in_the_placeholder_format_is_refused(tmp_path: Path, writers: list[EpisodeWriter]) -> None:
    w = _writer(tmp_path)
    writers.append(w)
    t = episode("arm", 0, 2)[0]
    bad = replace(t.observation.images[1], format=IN_NEXT_STEP)
    with pytest.raises(InvalidTransitionError, match="image of camera 'front' has format 'user/in-next-step'"):
        w.add(replace(t, observation=replace(t.observation, images=(t.observation.images[0], bad))))
    assert w.pending_steps() == {} and w.transitions_refused == 1


def test_an_operator_reset_encodes_the_step_it_changes(tmp_path: Path, writers: list[EpisodeWriter]) -> None:
    w = _writer(tmp_path)
    writers.append(w)
    steps = episode("arm", 0, 5, images=False)[:2]
    for t in steps:
        w.add(t, payload=_padded(t))
    assert w.end_episode("arm", 0, 2) == 0
    first, last = w.index.transitions()
    assert _payload(w, first) == _padded(steps[0])  # unchanged: as it came
    assert _payload(w, last) == _wire(replace(steps[1], truncated=True))  # changed: the new flags, encoded


def test_a_resent_episode_stores_the_bytes_given_with_it(tmp_path: Path, writers: list[EpisodeWriter]) -> None:
    w = _writer(tmp_path)
    writers.append(w)
    steps = episode("arm", 3, 3, images=False)
    given = [None, _padded(steps[1]), _padded(steps[2])]
    assert w.add_episode(steps, payloads=given) == 0
    rows = w.index.transitions()
    assert [_payload(w, r) for r in rows] == [_wire(steps[0]), given[1], given[2]]
    with pytest.raises(BufferError, match="2 payloads for an episode of 3 transitions"):
        w.add_episode(episode("arm", 4, 3), payloads=given[:2])
    assert w.index.count() == (3, 1)


def test_segments_roll_after_n_episodes_with_metadata_and_sizes(tmp_path: Path, writers: list[EpisodeWriter]) -> None:
    points: list[str] = []
    w = _writer(tmp_path, points=points, segment_max_episodes=2)
    writers.append(w)
    for e in range(3):
        w.add_episode(episode("arm", e, 2))
    segments = w.index.segments()
    assert [(s.name, s.state) for s in segments] == [("seg_000000", "closed"), ("seg_000001", "open")]
    closed = segment_path(tmp_path, "seg_000000")
    assert segments[0].bytes == os.path.getsize(closed) and segments[0].episodes == 2
    meta = read_metadata(closed.parent)
    assert meta.message_count == 2 * (2 + 2 + 6)  # two episodes of START, 2 transitions, END, 6 camera frames
    assert [r.segment_id for r in w.index.episodes()] == [segments[0].id, segments[0].id, segments[1].id]
    assert points == [
        *["episode:written", "episode:indexed"] * 2,
        "roll:finished", "roll:metadata", "roll:closed",
        "episode:written", "episode:indexed",
    ]  # fmt: skip


def test_segments_roll_by_size(tmp_path: Path, writers: list[EpisodeWriter]) -> None:
    w = _writer(tmp_path, segment_max_mb=0.001)  # 1 KiB: every episode of images overfills it
    writers.append(w)
    for e in range(3):
        w.add_episode(episode("arm", e, 2))
    assert [s.state for s in w.index.segments()] == ["closed"] * 3


def test_a_segment_directory_the_index_does_not_know_is_kept(tmp_path: Path, writers: list[EpisodeWriter]) -> None:
    w = _writer(tmp_path)
    writers.append(w)
    stray = segment_path(tmp_path, segment_name(0)).parent
    stray.mkdir(parents=True)
    (stray / "notes.txt").write_text("left by hand")
    segment_path(tmp_path, segment_name(1)).parent.mkdir()
    w.add_episode(episode("arm", 0, 2))
    assert [s.name for s in w.index.segments()] == ["seg_000002"]
    assert (stray / "notes.txt").read_text() == "left by hand"


def test_closing_drops_unfinished_episodes_and_closes_the_segment(
    tmp_path: Path, writers: list[EpisodeWriter], caplog: pytest.LogCaptureFixture
) -> None:
    w = _writer(tmp_path)
    writers.append(w)
    w.add_episode(episode("arm", 0, 2))
    w.add(transition("arm", 1, 0, 3))
    with caplog.at_level(logging.WARNING, logger="user.buffer.writer"):
        w.close()
    assert caplog.messages == [
        "dropping robot arm's episode 1 (1 steps): the buffer was closed before the episode ended"
    ]
    assert w.episodes_dropped == 1
    assert [s.state for s in w.index.segments()] == ["closed"] and w.pending_steps() == {}
    w.roll()  # nothing open: nothing to do
    assert len(w.index.segments()) == 1


@pytest.mark.parametrize(
    "case",
    [("episode", True, True), ("segment", False, True), ("never", False, False)],
    ids=["episode", "segment", "never"],
)
def test_the_fsync_policy_reaches_the_segment_and_metadata(
    tmp_path: Path, writers: list[EpisodeWriter], monkeypatch: pytest.MonkeyPatch, case: tuple[str, bool, bool]
) -> None:
    """(policy, the MCAP file fsynced per episode, it and metadata.yaml fsynced when the segment closes)"""
    policy, per_episode, at_close = case
    synced = record_fsyncs(monkeypatch)
    w = _writer(tmp_path, fsync=policy)
    writers.append(w)
    w.add_episode(episode("arm", 0, 2))
    mcap_file = str(segment_path(tmp_path, segment_name(0)))
    assert synced.count(mcap_file) == int(per_episode)
    w.roll()
    assert synced.count(mcap_file) == int(per_episode) + int(at_close)
    assert any(s.endswith(".metadata.yaml.tmp") for s in synced) is at_close


def test_a_failed_write_abandons_the_segment_and_the_next_episode_opens_a_new_one(
    tmp_path: Path, writers: list[EpisodeWriter], monkeypatch: pytest.MonkeyPatch
) -> None:
    w = _writer(tmp_path)
    writers.append(w)
    w.add_episode(episode("arm", 0, 2))
    segment = w._open_segment()

    def full(_messages: object) -> object:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(segment, "write_episode", full)
    with pytest.raises(EpisodeNotStoredError, match="robot arm's episode 1 .2 steps. was not stored: .*No space left"):
        w.add_episode(episode("arm", 1, 2))
    assert w.index.count() == (2, 1) and w.episodes_committed == 1 and w.episodes_lost == 1
    assert w.add_episode(episode("arm", 2, 2)) == 1
    assert [s.name for s in w.index.segments()] == ["seg_000000", "seg_000001"]
