"""Writer: collects each robot's transitions until its episode ends, then stores the whole episode.

An episode reaches the buffer whole or not at all: its values are checked (`admission`) and a (robot, episode)
the buffer holds already is refused before anything is written; then its messages (START, the transitions with
each frame once, on its camera's topic: `records`, END) are appended to the open segment, flushed (and
fsynced, by policy), and only then are its index rows committed in one transaction. That commit is
the point of no return; a crash before it drops the episode on restart, a crash after it keeps it. A write or
index error instead closes the segment cut back to its last committed episode (no record the index does not
know stays in it; recovery gives it a footer when the buffer is opened next), reports the episode as not stored,
and the next episode opens a new segment.
Segments roll after N episodes or M MiB.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from user.buffer.admission import check_episode, check_step, check_whole_episode, problem_of
from user.buffer.camera_topics import has_frames, record
from user.buffer.config import StorageConfig
from user.buffer.errors import (
    BufferError,
    DuplicateEpisodeError,
    EpisodeNotStoredError,
    InvalidTransitionError,
)
from user.buffer.index import Index
from user.buffer.metadata import fsync_dir, write_metadata
from user.buffer.next_frames import shared
from user.buffer.records import index_rows, stored_messages
from user.buffer.segments import SegmentWriter, segment_metadata
from user.buffer.storage import DiskStorage, segment_path
from user.interfaces.codec import Codec, EncodeError
from user.interfaces.domain import Transition, transition_to_msg
from user.interfaces.stamps import now_ns

_log = logging.getLogger("user.buffer.writer")

FaultHook = Callable[[str], None]  # called at named points of the commit protocol (crash tests)
MIB = 1024 * 1024
STORAGE_ERRORS = (OSError, BufferError, sqlite3.Error)  # what a full or failing disk raises on the way to a segment


def stored_episode(index: Index, robot_id: str, episode_id: int) -> int | None:
    """The buffer episode number under which `robot_id`'s episode `episode_id` is stored, or None (one lookup
    in the index's (robot_id, episode_id) column index)."""
    rows = index.fetchall(
        "SELECT episode FROM transitions WHERE robot_id = ? AND episode_id = ? LIMIT 1", (robot_id, int(episode_id))
    )
    return int(rows[0][0]) if rows else None


@dataclass
class _Pending:
    """An episode being received."""

    episode_id: int
    transitions: list[Transition] = field(default_factory=list)
    payloads: list[bytes] = field(default_factory=list)
    wall_ns: list[int] = field(default_factory=list)
    broken: str | None = None  # why it can no longer be stored whole
    end_at: int | None = None  # the robot ended it after this many steps without a done step (operator reset)


def segment_name(number: int) -> str:
    return f"seg_{number:06d}"


class EpisodeWriter:
    """Appends whole episodes to the storage's segments and index."""

    def __init__(
        self,
        storage: DiskStorage,
        config: StorageConfig,
        *,
        clock: Callable[[], int] = now_ns,
        fault_hook: FaultHook | None = None,
    ) -> None:
        self.storage = storage
        self.index: Index = storage.index
        self.codec: Codec = storage.codec
        self.config = config
        self._clock = clock
        self._hook = fault_hook or (lambda _point: None)
        self._pending: dict[str, _Pending] = {}
        self._early_ends: dict[str, tuple[int, int]] = {}  # robot -> (episode id, steps): ended before its first step
        self._segment: SegmentWriter | None = None
        self._segment_id = 0
        self._segment_name = ""
        self._segment_episodes = 0
        self._next_index, self._next_episode = self.index.next_numbers()
        self.episodes_committed = 0
        self.episodes_dropped = 0  # live episodes dropped whole: broken, invalid or duplicated (logged, with why)
        self.transitions_refused = 0  # transitions `add` refused with InvalidTransitionError (nothing changed)
        self.duplicates_refused = 0  # episodes not stored because the buffer holds them already
        self.episodes_lost = 0  # episodes a write or index error kept out (EpisodeNotStoredError)

    # ---------------------------------------------------------------------------------------------- input

    def add(self, transition: Transition, wall_ns: int | None = None, payload: bytes | None = None) -> int | None:
        """Take one transition; returns the buffer episode number when it completed (and stored) an episode.

        `payload`, when given, must be the CDR bytes of exactly `transition` as `transition_to_msg` gives them (e.g.
        as they arrived on the wire, checked with `user.interfaces.domain.is_canonical_transition`): a
        transition without images is stored as they are; one with images is encoded again (`camera_topics`).

        A transition whose values cannot be stored raises `InvalidTransitionError` and changes nothing (the
        robot's episode in progress stays as it was); an episode the buffer holds already is dropped whole."""
        payload = self._admit(transition, wall_ns, payload)
        robot = transition.robot_id
        pending = self._pending.get(robot)
        if pending is not None and pending.episode_id != transition.episode_id:
            self._drop(robot, f"episode {transition.episode_id} started before it ended")
            pending = None
        if pending is None:
            pending = self._start(robot, transition)
        elif pending.broken is None and transition.step != len(pending.transitions):
            pending.broken = f"step {transition.step} arrived where step {len(pending.transitions)} was due"
        if pending.broken is None:
            if len(pending.transitions) >= self.config.max_episode_steps:
                pending.broken = f"longer than max_episode_steps={self.config.max_episode_steps}"
            else:
                pending.payloads.append(payload)
                pending.transitions.append(transition)
                pending.wall_ns.append(self._clock() if wall_ns is None else wall_ns)
        if transition.done:
            return self._finish(robot)
        return self._end_if_complete(robot, pending)

    def _admit(self, transition: Transition, wall_ns: int | None, payload: bytes | None) -> bytes:
        """The bytes to store `transition` as; `InvalidTransitionError` for one that cannot be stored, raised
        before it touches anything."""
        pending, first = self._pending.get(transition.robot_id), None
        if pending and pending.transitions and pending.episode_id == transition.episode_id:
            first = pending.transitions[0]  # the step its episode began with: the shapes it keeps
        problem = problem_of(check_step, transition, first, wall_ns)
        if problem is None and (payload is None or has_frames(transition)):
            try:  # stored with its next frames in the next step (`next_frames`); the last step is encoded anew
                payload = self.encode(transition, keep_next=False)
            except EncodeError as exc:
                problem = str(exc)
        if problem is not None or payload is None:
            self.transitions_refused += 1
            name = f"{transition.robot_id}/{transition.episode_id} step {transition.step}"
            raise InvalidTransitionError(f"transition {name} refused: {problem}")
        return payload

    def _start(self, robot: str, transition: Transition) -> _Pending:
        """A new pending episode for `robot`, begun by `transition` (broken if it cannot become a stored one)."""
        pending = self._pending[robot] = _Pending(transition.episode_id)
        early = self._early_ends.pop(robot, None)
        if early is not None and early[0] == transition.episode_id:
            pending.end_at = early[1]
        stored = stored_episode(self.index, robot, transition.episode_id)
        if stored is not None:
            self.duplicates_refused += 1
            pending.broken = f"the buffer holds it already (buffer episode {stored})"
        elif transition.step != 0:
            pending.broken = f"first step received was {transition.step}, not 0"
        return pending

    def add_episode(
        self,
        transitions: list[Transition],
        wall_ns: int | None = None,
        payloads: Sequence[bytes | None] | None = None,
    ) -> int:
        """Store one whole episode at once (a robot re-sending an unacknowledged episode), beside whatever
        episode of the same robot is being received live. Steps must be 0..n-1 and the last one done.
        `payloads[k]`, where given and not None, are transition k's CDR bytes (as for `add`).
        Raises `InvalidTransitionError` (bad values), `DuplicateEpisodeError` (stored already) or another
        `BufferError` before anything is written; `EpisodeNotStoredError` if writing it failed."""
        problem = problem_of(check_whole_episode, transitions, payloads, self.config.max_episode_steps)
        if problem is not None:
            raise BufferError(problem)
        first = transitions[0]
        name = f"{first.robot_id}/{first.episode_id}"
        now = self._clock() if wall_ns is None else wall_ns
        pending = _Pending(first.episode_id, list(transitions), wall_ns=[now] * len(transitions))
        problem = problem_of(check_episode, pending.transitions, pending.wall_ns)
        if problem is not None:
            raise InvalidTransitionError(f"episode {name} refused: {problem}")
        self._refuse_duplicate(pending)
        try:
            for k, t in enumerate(transitions):
                payload = payloads[k] if payloads is not None else None
                pending.payloads.append(
                    payload if payload is not None and not has_frames(t) else self.encode(t, keep_next=False)
                )
        except EncodeError as exc:
            raise InvalidTransitionError(f"episode {name} refused: step {k}: {exc}") from exc
        return self._commit(pending)

    def end_episode(self, robot_id: str, episode_id: int, steps: int) -> int | None:
        """The robot ended `episode_id` after `steps` steps without a done step (an operator reset: its END event).

        The episode is stored, its last step marked truncated, once all `steps` transitions are here: the event
        and the transitions travel on different topics and arrive in either order. Returns its buffer episode
        number when this call stored it; an episode that ended with a done step or was superseded is left alone."""
        pending = self._pending.get(robot_id)
        if steps <= 0 or (pending is not None and pending.episode_id > episode_id):
            return None
        if pending is None or pending.episode_id < episode_id:
            self._early_ends[robot_id] = (episode_id, steps)  # its transitions are still on their way
            return None
        pending.end_at = steps
        return self._end_if_complete(robot_id, pending)

    def _end_if_complete(self, robot: str, pending: _Pending) -> int | None:
        """Store an episode the robot ended early once its steps are all here (dropped, if it is broken)."""
        if pending.end_at is None or (pending.broken is None and len(pending.transitions) < pending.end_at):
            return None
        last = pending.transitions[-1] if pending.transitions else None
        if last is not None and not last.done:  # the stored step changes: its bytes are encoded anew
            pending.transitions[-1] = replace(last, truncated=True)
            pending.payloads[-1] = self.encode(pending.transitions[-1], keep_next=False)
        return self._finish(robot)

    def encode(self, transition: Transition, *, keep_next: bool = True) -> bytes:
        """The CDR bytes of a transition's record (frames in the next step's unless `keep_next`: `camera_topics`)."""
        return self.codec.encode(transition_to_msg(record(transition, keep_next=keep_next), self.codec))

    def discard_episode(self, robot_id: str) -> int:
        """Forget `robot_id`'s unfinished episode; returns how many steps were dropped."""
        pending = self._pending.pop(robot_id, None)
        return len(pending.transitions) if pending else 0

    def pending_steps(self) -> dict[str, int]:
        return {robot: len(p.transitions) for robot, p in self._pending.items()}

    def _drop(self, robot: str, reason: str) -> None:
        pending = self._pending.pop(robot)
        self.episodes_dropped += 1
        _log.warning(
            "dropping robot %s's episode %d (%d steps): %s", robot, pending.episode_id, len(pending.transitions), reason
        )

    def _finish(self, robot: str) -> int | None:
        pending = self._pending[robot]
        if pending.broken is None:
            try:
                self._refuse_duplicate(pending)  # stored meanwhile (re-sent); each step was checked as it came
            except DuplicateEpisodeError as exc:
                pending.broken = str(exc)
        if pending.broken is not None:
            self._drop(robot, pending.broken)
            return None
        del self._pending[robot]
        return self._commit(pending)

    def _refuse_duplicate(self, pending: _Pending) -> None:
        """`DuplicateEpisodeError` for a (robot, episode) the buffer holds already; checked before any write."""
        robot = pending.transitions[0].robot_id
        stored = stored_episode(self.index, robot, pending.episode_id)
        if stored is not None:
            self.duplicates_refused += 1
            raise DuplicateEpisodeError(
                f"episode {robot}/{pending.episode_id} refused: the buffer holds it already (episode {stored})"
            )

    # ---------------------------------------------------------------------------------------------- commit

    def _commit(self, pending: _Pending) -> int:
        """Write a checked episode and index it; `EpisodeNotStoredError` (nothing of it kept) if either fails."""
        ts = pending.transitions
        first, number = self._next_index, self._next_episode
        messages = stored_messages(self.codec, ts, pending.payloads, pending.wall_ns, self.encode)
        try:
            segment = self._open_segment()
        except STORAGE_ERRORS as exc:
            raise self._lost(pending, f"no segment could be opened ({exc})") from exc
        try:
            positions = segment.write_episode(messages)
        except Exception as exc:  # the segment closed itself after its last whole episode; it stays open in the
            segment.abandon()  # index, and opening the buffer again gives it its footer
            raise self._lost(pending, str(exc)) from exc
        self._hook("episode:written")
        episode, rows = index_rows(
            ts, pending.wall_ns, positions, segment_id=self._segment_id, first=first, number=number
        )
        try:
            self.index.commit_episode(episode, rows, segment.bytes_written)
        except STORAGE_ERRORS as exc:
            segment.discard_last_episode()  # no record the index does not know may stay in the segment
            raise self._lost(pending, f"the index refused it ({exc}); its records were cut from the segment") from exc
        self._hook("episode:indexed")
        self.storage.add_committed(rows, shared(ts))
        self._next_index += len(rows)
        self._next_episode += 1
        self._segment_episodes += 1
        self.episodes_committed += 1
        if (
            self._segment_episodes >= self.config.segment_max_episodes
            or segment.bytes_written >= self.config.segment_max_mb * MIB
        ):
            self.roll()
        return number

    def _lost(self, pending: _Pending, reason: str) -> EpisodeNotStoredError:
        """Count and log an episode a write or index error kept out; the open segment is given up."""
        self._segment = None
        self.episodes_lost += 1
        ts = pending.transitions
        text = (
            f"robot {ts[0].robot_id}'s episode {pending.episode_id} ({len(ts)} steps) was not stored: {reason}; "
            "the episodes stored before it are intact and the next one opens a new segment"
        )
        _log.error("%s", text)
        return EpisodeNotStoredError(text)

    # ---------------------------------------------------------------------------------------------- segments

    def _open_segment(self) -> SegmentWriter:
        if self._segment is not None:
            return self._segment
        existing = [s.name for s in self.index.segments()]
        number = 1 + max((int(n.rsplit("_", 1)[1]) for n in existing), default=-1)
        while segment_path(self.storage.directory, segment_name(number)).parent.exists():
            number += 1  # a directory the index does not know (left by hand or by an old crash): keep it
        name = segment_name(number)
        row = self.index.add_segment(name, self._clock())  # before the file exists: recovery knows about it
        path = segment_path(self.storage.directory, name)
        path.parent.mkdir(parents=True, exist_ok=False)
        fsync_dir(path.parent.parent)
        self._segment = SegmentWriter(
            path,
            self.codec,
            chunk_bytes=max(1024, int(self.config.chunk_mb * MIB)),
            fsync_episodes=self.config.fsync == "episode",
            fsync_close=self.config.fsync != "never",
        )
        self._segment_id, self._segment_name, self._segment_episodes = row.id, name, 0
        _log.info("opened segment %s", name)
        return self._segment

    def roll(self) -> None:
        """Close the open segment (footer, metadata.yaml, index), if any; the next episode opens a new one.

        If closing fails (a full disk), the error is logged, not raised: the segment stays open in the index with
        its committed episodes intact and readable, and recovery finishes it when the buffer is opened next."""
        segment = self._segment
        if segment is None:
            return
        self._segment = None
        try:
            self._close(segment)
        except STORAGE_ERRORS as exc:
            segment.abandon()
            _log.error(
                "segment %s could not be closed (%s); its %d episodes stay readable and it is finished when the "
                "buffer is opened next",
                self._segment_name,
                exc,
                self._segment_episodes,
            )
            return
        _log.info("closed segment %s (%d episodes)", self._segment_name, self._segment_episodes)

    def _close(self, segment: SegmentWriter) -> None:
        stats = segment.finish()
        self._hook("roll:finished")
        bag_dir: Path = segment.path.parent
        write_metadata(bag_dir, segment_metadata(segment.path.name, stats), fsync=self.config.fsync != "never")
        self._hook("roll:metadata")
        self.index.close_segment(self._segment_id, os.path.getsize(segment.path), self._clock())
        self._hook("roll:closed")

    def close(self) -> None:
        """Drop unfinished episodes (never stored half) and close the open segment."""
        for robot in list(self._pending):
            if self._pending[robot].transitions:
                self._drop(robot, "the buffer was closed before the episode ended")
        self._pending.clear()
        self.roll()

    def state_dict(self) -> dict[str, Any]:
        return {"next_index": self._next_index, "next_episode": self._next_episode, "segment": self._segment_name}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """The writer continues from the index, never from a saved state; this only checks they agree."""
        if int(state.get("next_index", 0)) > self._next_index:
            raise BufferError(
                f"saved writer state expects transition {state['next_index']}, the index ends at {self._next_index}"
            )
