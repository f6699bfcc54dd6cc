"""The whole episodes of a segment file, read from its bytes alone: what is whole is found, what is not is named."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from test.buffer.factories import episode
from user.buffer.disk.segment_writer import SegmentWriter
from user.buffer.disk.segments import EVENT_TOPIC, TRANSITION_TOPIC, OutMessage
from user.buffer.repair.segment_episodes import segment_episodes
from user.interfaces import default_codec
from user.interfaces.domain import Transition, transition_to_msg
from user.interfaces.episode_events import EpisodeEvent, EpisodeKind, episode_event_to_msg

CODEC = default_codec()


def _event(robot: str, episode_id: int, kind: EpisodeKind, steps: int = 0) -> OutMessage:
    event = EpisodeEvent(robot, "peg_insertion", episode_id, kind, 5, steps=steps)
    return OutMessage(EVENT_TOPIC, CODEC.encode(episode_event_to_msg(event, CODEC)), 100 + episode_id)


def _step(t: Transition) -> OutMessage:
    return OutMessage(TRANSITION_TOPIC, CODEC.encode(transition_to_msg(t, CODEC)), 1000 + t.step)


def _whole(robot: str, episode_id: int, steps: int) -> list[OutMessage]:
    ts = episode(robot, episode_id, steps, images=False)
    return [
        _event(robot, episode_id, EpisodeKind.START),
        *map(_step, ts),
        _event(robot, episode_id, EpisodeKind.END, steps),
    ]


def _segment(path: Path, *episodes: list[OutMessage], finish: bool = True) -> Path:
    writer = SegmentWriter(path, CODEC, chunk_bytes=1 << 20, fsync_episodes=False, fsync_close=False)
    for messages in episodes:
        writer.write_episode(messages)
    if finish:
        writer.finish()
    else:
        writer.abandon()
    return path


def test_whole_episodes_are_found_with_the_rows_the_writer_makes(tmp_path: Path) -> None:
    path = _segment(tmp_path / "s.mcap", _whole("a", 4, 3), _whole("b", 9, 2))
    found = segment_episodes(path, CODEC)
    assert found.footer and found.problems == []
    assert [(e.robot_id, e.episode_id, len(e.rows)) for e in found.episodes] == [("a", 4, 3), ("b", 9, 2)]
    first = found.episodes[0]
    assert (first.start_wall_ns, first.end_wall_ns) == (104, 104) and first.start.offset < first.rows[0].offset
    row = first.rows[2]
    assert (row.robot_id, row.episode_id, row.step, row.wall_ns, row.truncated, row.done) == (
        "a",
        4,
        2,
        1002,
        True,
        True,
    )
    assert (row.index, row.segment_id, row.episode) == (-1, -1, -1)  # set when committed
    assert (found.first_wall_ns, found.last_wall_ns) == (104, 1002)


def test_what_is_not_whole_is_left_out_and_named(tmp_path: Path) -> None:
    no_end = _whole("a", 1, 2)[:-1]
    wrong_count = [*_whole("a", 2, 2)[:-1], _event("a", 2, EpisodeKind.END, 5)]
    skipped_step = [m for k, m in enumerate(_whole("a", 3, 3)) if k != 2]
    stray = [_step(episode("a", 7, 1, images=False)[0])]
    empty = [_event("a", 8, EpisodeKind.START), _event("a", 8, EpisodeKind.END, 0)]
    nan = episode("a", 6, 2, images=False)
    nan[1] = dataclasses.replace(nan[1], reward=float("nan"))
    not_finite = [_event("a", 6, EpisodeKind.START), *map(_step, nan), _event("a", 6, EpisodeKind.END, 2)]
    path = _segment(tmp_path / "s.mcap", no_end, wrong_count, skipped_step, _whole("a", 5, 1), stray, empty, not_finite)
    found = segment_episodes(path, CODEC)
    assert [e.episode_id for e in found.episodes] == [5]
    problems = [p.split(" (byte ")[0] for p in found.problems]
    assert problems == [
        "episode 1 of a: started again before its END",
        "episode 2 of a: an END of a's episode 2 after 5 steps, out of place",
        "episode 3 of a: a's episode 3 step 2 where step 1 was due",
        "a transition outside an episode",
        "episode 8 of a: an episode without steps",
        "episode 6 of a: step 1 has reward nan",
    ]


def test_a_cut_file_says_where_it_ends(tmp_path: Path) -> None:
    path = _segment(tmp_path / "s.mcap", _whole("a", 1, 2), _whole("a", 2, 2), finish=False)
    end = segment_episodes(path, CODEC).episodes[1].end
    path.write_bytes(path.read_bytes()[: end.offset + 5])  # inside the second episode's END record
    found = segment_episodes(path, CODEC)
    assert not found.footer and [e.episode_id for e in found.episodes] == [1]
    assert found.problems[-1].startswith("the file ends inside a record: record at byte ")
