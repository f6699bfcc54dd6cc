"""The whole episodes a segment file holds, read from its bytes alone (no index): what `user buffer reindex` rebuilds
the index from.

A segment holds each episode as consecutive messages: an EpisodeEvent START, the transitions (steps 0..n-1 of
the same robot and episode, each followed without a gap by the camera frames its record waits for:
`camera_topics`), an EpisodeEvent END counting them. Messages are found by scanning the file in
salvage mode with every chunk's CRC checked; an episode is whole when all its messages are there, in chunks
whose CRC matches, decode, and agree with each other. Anything else (a damaged chunk, a cut tail, an episode
without its END) is left out and named, one line per broken stretch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from user.buffer.disk.camera_topics import frame_count, frame_from_payload, frames_problem
from user.buffer.disk.mcapscan import MESSAGE_PREFIX, MessageSpan, mapped, scan
from user.buffer.disk.segment_schemas import segment_codec
from user.buffer.disk.segments import (
    CAMERA_TOPIC_SUFFIX,
    EVENT_TOPIC,
    EVENT_TYPE,
    TRANSITION_TOPIC,
    TRANSITION_TYPE,
    WRITER_CHANNELS,
    Position,
)
from user.buffer.records import transition_row
from user.buffer.rows import TransitionRow
from user.interfaces.codec import Codec, DecodeError
from user.interfaces.domain import EncodedImage, Transition, transition_from_msg
from user.interfaces.episode_events import EpisodeKind

_NOWHERE = Position(0, 0)


@dataclass
class FoundEpisode:
    """One whole episode: its events and its transitions' rows (numbers, segment and episode still unset: -1)."""

    robot_id: str
    episode_id: int
    start: Position
    start_wall_ns: int
    rows: list[TransitionRow] = field(default_factory=list)
    end: Position = _NOWHERE  # set when its END is found (only whole episodes are handed out)
    end_wall_ns: int = 0


@dataclass
class SegmentEpisodes:
    """What a segment file holds."""

    episodes: list[FoundEpisode] = field(default_factory=list)
    footer: bool = False  # the file is finished
    problems: list[str] = field(default_factory=list)  # what was left out, and why
    first_wall_ns: int | None = None
    last_wall_ns: int | None = None


class _Reader:
    """Groups the messages of one file into whole episodes, in file order."""

    def __init__(self, codec: Codec, data: memoryview, topics: dict[int, str]) -> None:
        self.codec = codec
        self.data = data
        self.topics = topics
        self.out = SegmentEpisodes()
        self.current: FoundEpisode | None = None
        self.discarding = False  # inside a broken stretch: said once, then quiet until the next START
        self.waiting: tuple[MessageSpan, Transition, list[EncodedImage]] | None = None  # a record and its frames
        self.end = -1  # where the message before ends

    def broken(self, span: MessageSpan, why: str) -> None:
        self.waiting = None
        if self.current is not None:
            ep = self.current
            self.out.problems.append(f"episode {ep.episode_id} of {ep.robot_id}: {why} (byte {span.offset})")
        elif not self.discarding:
            self.out.problems.append(f"{why} (byte {span.offset})")
        self.current, self.discarding = None, True

    def message(self, span: MessageSpan) -> None:
        start = span.offset + MESSAGE_PREFIX
        payload = bytes(self.data[start : start + span.length])
        topic = self.topics.get(span.channel_id)
        follows, self.end = span.offset == self.end, span.offset + MESSAGE_PREFIX + span.length
        if span.chunk_crc_ok is False:
            self.broken(span, "its chunk does not match its CRC")
            return
        if self.waiting is not None:
            if follows and topic not in (EVENT_TOPIC, TRANSITION_TOPIC):
                self.frame(span, payload)
                return
            _, t, frames = self.waiting
            self.broken(span, f"step {t.step}'s camera frame {len(frames) + 1} of {frame_count(t)} is missing")
        if topic == EVENT_TOPIC:
            self._decoded(span, payload, EVENT_TYPE, self.event)
        elif topic == TRANSITION_TOPIC:
            self._decoded(span, payload, TRANSITION_TYPE, self.transition)
        elif topic is not None and topic.endswith(CAMERA_TOPIC_SUFFIX):
            self.broken(span, f"a camera frame on {topic} after no transition waiting for one")
        else:
            self.broken(span, f"a message on unknown channel {span.channel_id}")

    def frame(self, span: MessageSpan, payload: bytes) -> None:
        """The message right after a transition whose record waits for camera frames: its next frame."""
        assert self.waiting is not None
        head, t, frames = self.waiting
        due = f"step {t.step}'s camera frame {len(frames) + 1} of {frame_count(t)}"
        try:
            frames.append(frame_from_payload(payload, self.codec))
        except DecodeError as exc:
            self.broken(span, f"{due} does not decode: {exc}")
            return
        if len(frames) < frame_count(t):
            return
        problem = frames_problem(t, frames)
        if problem is not None:
            self.broken(span, f"step {t.step}: {problem}")
        elif self.current is not None:
            self.waiting = None
            self.current.rows.append(_row(head, t))

    def _decoded(
        self, span: MessageSpan, payload: bytes, typename: str, take: Callable[[MessageSpan, Any], None]
    ) -> None:
        try:
            msg = self.codec.decode(payload, typename)
        except ValueError as exc:  # DecodeError
            self.broken(span, str(exc))
            return
        take(span, msg)

    def event(self, span: MessageSpan, msg: Any) -> None:
        kind, robot, episode_id = int(msg.kind), str(msg.robot_id), int(msg.episode_id)
        ep = self.current
        if kind == EpisodeKind.START:
            if ep is not None:
                self.broken(span, "started again before its END")
            self.current = FoundEpisode(robot, episode_id, Position(span.offset, span.length), span.log_time)
            self.discarding = False
        elif ep is None or (robot, episode_id, int(msg.steps)) != (ep.robot_id, ep.episode_id, len(ep.rows)):
            self.broken(span, f"an END of {robot}'s episode {episode_id} after {int(msg.steps)} steps, out of place")
        elif not ep.rows:
            self.broken(span, "an episode without steps")
        else:
            ep.end, ep.end_wall_ns = Position(span.offset, span.length), span.log_time
            self.out.episodes.append(ep)
            self.current = None

    def transition(self, span: MessageSpan, msg: Any) -> None:
        ep = self.current
        if ep is None:
            self.broken(span, "a transition outside an episode")
            return
        try:
            t = transition_from_msg(msg)
        except (ValueError, TypeError) as exc:
            self.broken(span, f"a transition that does not convert ({exc})")
            return
        if (t.robot_id, t.episode_id, t.step) != (ep.robot_id, ep.episode_id, len(ep.rows)):
            self.broken(span, f"{t.robot_id}'s episode {t.episode_id} step {t.step} where step {len(ep.rows)} was due")
        elif not math.isfinite(t.reward):
            self.broken(span, f"step {t.step} has reward {t.reward}")
        elif frame_count(t):
            self.waiting = (span, t, [])  # its row is added once its frames are there
        else:
            ep.rows.append(_row(span, t))


def _row(span: MessageSpan, t: Transition) -> TransitionRow:
    """The index row of transition `t` stored at `span` (as the writer makes it; numbers are set when committed)."""
    return transition_row(
        t, index=-1, segment_id=-1, offset=span.offset, length=span.length, episode=-1, wall_ns=span.log_time
    )


def segment_episodes(path: Path, codec: Codec) -> SegmentEpisodes:
    """The whole episodes of the segment file `path` (see the module docstring)."""
    codec = segment_codec(path, codec, salvage=True)
    with mapped(str(path)) as data:
        scanned = scan(data, expect_magic=True, check_crc=True, salvage=True)
        reader = _Reader(codec, data, {**WRITER_CHANNELS, **scanned.topics})
        for span in scanned.messages:
            reader.message(span)
    out = reader.out
    if reader.current is not None:
        ep = reader.current
        out.problems.append(f"episode {ep.episode_id} of {ep.robot_id}: the file ends before its END")
    out.problems[:0] = [f"passed over a {why}" for why in scanned.skipped]
    if scanned.problem is not None:
        out.problems.append(f"the file ends inside a record: {scanned.problem}")
    out.footer = scanned.footer
    times = [m.log_time for m in scanned.messages]
    out.first_wall_ns, out.last_wall_ns = (min(times), max(times)) if times else (None, None)
    return out
