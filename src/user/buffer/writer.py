"""Writer: collects each robot's transitions until its episode ends, then stores the whole episode.

An episode reaches the buffer whole or not at all: its messages (an EpisodeEvent START, the transitions,
an EpisodeEvent END) are appended to the open segment, flushed (and fsynced, by policy), and only then are
its index rows committed in one transaction. That commit is the point of no return; a crash before it drops
the episode on restart, a crash after it keeps it. Segments roll after N episodes or M MiB.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from user.buffer.config import StorageConfig
from user.buffer.errors import BufferError
from user.buffer.index import EpisodeRow, Index, TransitionRow
from user.buffer.metadata import fsync_dir, write_metadata
from user.buffer.segments import (
    EVENT_TOPIC,
    TRANSITION_TOPIC,
    OutMessage,
    Position,
    SegmentWriter,
    segment_metadata,
)
from user.buffer.storage import DiskStorage, segment_path
from user.interfaces.codec import Codec
from user.interfaces.domain import Transition, transition_to_msg
from user.interfaces.episode_events import EpisodeEvent, EpisodeKind, episode_event_to_msg
from user.interfaces.stamps import now_ns

_log = logging.getLogger("user.buffer.writer")

FaultHook = Callable[[str], None]  # called at named points of the commit protocol (crash tests)
MIB = 1024 * 1024


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
        self.episodes_dropped = 0

    # ---------------------------------------------------------------------------------------------- input

    def add(self, transition: Transition, wall_ns: int | None = None, payload: bytes | None = None) -> int | None:
        """Take one transition; returns the buffer episode number when it completed (and stored) an episode.

        `payload`, when given, must be the CDR bytes of exactly `transition` as `encode` would give them (e.g.
        as they arrived on the wire, checked with `user.interfaces.domain.is_canonical_transition`): they are
        stored as they are instead of encoding `transition` again."""
        robot = transition.robot_id
        pending = self._pending.get(robot)
        if pending is not None and pending.episode_id != transition.episode_id:
            self._drop(robot, f"episode {transition.episode_id} started before it ended")
            pending = None
        if pending is None:
            pending = self._pending[robot] = _Pending(transition.episode_id)
            early = self._early_ends.pop(robot, None)
            if early is not None and early[0] == transition.episode_id:
                pending.end_at = early[1]
            if transition.step != 0:
                pending.broken = f"first step received was {transition.step}, not 0"
        elif pending.broken is None and transition.step != len(pending.transitions):
            pending.broken = f"step {transition.step} arrived where step {len(pending.transitions)} was due"
        if pending.broken is None:
            if len(pending.transitions) >= self.config.max_episode_steps:
                pending.broken = f"longer than max_episode_steps={self.config.max_episode_steps}"
            else:
                pending.transitions.append(transition)
                pending.payloads.append(self.encode(transition) if payload is None else payload)
                pending.wall_ns.append(self._clock() if wall_ns is None else wall_ns)
        if transition.done:
            return self._finish(robot)
        return self._end_if_complete(robot, pending)

    def add_episode(
        self,
        transitions: list[Transition],
        wall_ns: int | None = None,
        payloads: Sequence[bytes | None] | None = None,
    ) -> int:
        """Store one whole episode at once (a robot re-sending an unacknowledged episode), beside whatever
        episode of the same robot is being received live. Steps must be 0..n-1 and the last one done.
        `payloads[k]`, where given and not None, are transition k's CDR bytes (as for `add`)."""
        if not transitions:
            raise BufferError("an episode needs at least one transition")
        if payloads is not None and len(payloads) != len(transitions):
            raise BufferError(f"{len(payloads)} payloads for an episode of {len(transitions)} transitions")
        first = transitions[0]
        name = f"{first.robot_id}/{first.episode_id}"
        for k, t in enumerate(transitions):
            if t.robot_id != first.robot_id or t.episode_id != first.episode_id:
                raise BufferError(f"{name}: transition {k} belongs to {t.robot_id}/{t.episode_id}")
            if t.step != k:
                raise BufferError(f"{name}: step {t.step} where step {k} was due")
        if not transitions[-1].done:
            raise BufferError(f"{name}: the last transition does not end the episode")
        if len(transitions) > self.config.max_episode_steps:
            raise BufferError(f"{name}: longer than max_episode_steps={self.config.max_episode_steps}")
        now = self._clock() if wall_ns is None else wall_ns
        pending = _Pending(first.episode_id)
        for k, t in enumerate(transitions):
            payload = payloads[k] if payloads is not None else None
            pending.transitions.append(t)
            pending.payloads.append(self.encode(t) if payload is None else payload)
            pending.wall_ns.append(now)
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
            pending.payloads[-1] = self.encode(pending.transitions[-1])
        return self._finish(robot)

    def encode(self, transition: Transition) -> bytes:
        """The CDR bytes a transition is stored as."""
        return self.codec.encode(transition_to_msg(transition, self.codec))

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
        if pending.broken is not None:
            self._drop(robot, pending.broken)
            return None
        del self._pending[robot]
        return self._commit(pending)

    # ---------------------------------------------------------------------------------------------- commit

    def _commit(self, pending: _Pending) -> int:
        segment = self._open_segment()
        ts = pending.transitions
        first, number = self._next_index, self._next_episode
        start_msg = self._event(ts, EpisodeKind.START, pending.wall_ns[0])
        end_msg = self._event(ts, EpisodeKind.END, pending.wall_ns[-1])
        messages = [
            start_msg,
            *(OutMessage(TRANSITION_TOPIC, p, w) for p, w in zip(pending.payloads, pending.wall_ns, strict=True)),
            end_msg,
        ]
        try:
            positions = segment.write_episode(messages)
        except Exception:
            segment.abandon()  # the segment stays open in the index; reopening the buffer recovers it
            self._segment = None
            raise
        self._hook("episode:written")
        episode, rows = self._index_rows(pending, positions, first, number)
        self.index.commit_episode(episode, rows, segment.bytes_written)
        self._hook("episode:indexed")
        self.storage.add_committed(rows, ts)
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

    def _index_rows(
        self, pending: _Pending, positions: list[Position], first: int, number: int
    ) -> tuple[EpisodeRow, list[TransitionRow]]:
        """The index rows of episode `number` written at `positions` (START event, transitions, END event)."""
        ts = pending.transitions
        rows = [
            TransitionRow(
                index=first + k,
                segment_id=self._segment_id,
                offset=pos.offset,
                length=pos.length,
                episode=number,
                robot_id=t.robot_id,
                task=t.task,
                episode_id=t.episode_id,
                step=t.step,
                policy_version=t.action.policy_version,
                wall_ns=pending.wall_ns[k],
                sim_ns=t.stamp_ns,
                reward=float(t.reward),
                terminated=t.terminated,
                truncated=t.truncated,
                intervened=t.action.intervened,
                is_demo=t.is_demo,
                success=t.success,
            )
            for k, (t, pos) in enumerate(zip(ts, positions[1:-1], strict=True))
        ]
        episode = EpisodeRow(
            episode=number,
            segment_id=self._segment_id,
            robot_id=ts[0].robot_id,
            task=ts[0].task,
            episode_id=pending.episode_id,
            steps=len(ts),
            first_index=first,
            success=any(t.success for t in ts),
            episode_return=float(sum(t.reward for t in ts)),
            interventions=sum(1 for t in ts if t.action.intervened),
            is_demo=all(t.is_demo for t in ts),
            policy_version=max(t.action.policy_version for t in ts),
            start_wall_ns=pending.wall_ns[0],
            end_wall_ns=pending.wall_ns[-1],
            start_event=positions[0],
            end_event=positions[-1],
        )
        return episode, rows

    def _event(self, ts: list[Transition], kind: EpisodeKind, wall_ns: int) -> OutMessage:
        first, end = ts[0], kind == EpisodeKind.END
        event = EpisodeEvent(
            robot_id=first.robot_id,
            task=first.task,
            episode_id=first.episode_id,
            kind=kind,
            stamp_ns=wall_ns,
            success=end and any(t.success for t in ts),
            steps=len(ts) if end else 0,
            episode_return=float(sum(t.reward for t in ts)) if end else 0.0,
            interventions=sum(1 for t in ts if t.action.intervened) if end else 0,
            policy_version=ts[-1].action.policy_version if end else first.action.policy_version,
        )
        msg = episode_event_to_msg(event, self.codec)
        return OutMessage(EVENT_TOPIC, self.codec.encode(msg), wall_ns)

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
        """Close the open segment (footer, metadata.yaml, index), if any; the next episode opens a new one."""
        segment = self._segment
        if segment is None:
            return
        self._segment = None
        stats = segment.finish()
        self._hook("roll:finished")
        bag_dir: Path = segment.path.parent
        write_metadata(bag_dir, segment_metadata(segment.path.name, stats), fsync=self.config.fsync != "never")
        self._hook("roll:metadata")
        self.index.close_segment(self._segment_id, os.path.getsize(segment.path), self._clock())
        self._hook("roll:closed")
        _log.info("closed segment %s (%d episodes)", self._segment_name, self._segment_episodes)

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
