"""Writer: collects each robot's transitions until its episode ends, then stores the whole episode.

An episode reaches the buffer whole or not at all: its values are checked (`admission`) and a (robot, episode)
the buffer holds already is refused before anything is written; then it is committed (`commit`: the segment
first, the index rows in one transaction second). Episodes come step by step on the wire, in any interleaving of
robots, or whole (a robot re-sending one); an operator's reset ends one without a done step.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from user.buffer.admission import check_episode, check_step, check_whole_episode, problem_of
from user.buffer.commit import EpisodeCommitter, FaultHook
from user.buffer.config import StorageConfig
from user.buffer.disk.camera_topics import has_frames
from user.buffer.errors import BufferError, DuplicateEpisodeError, InvalidTransitionError
from user.buffer.storage import DiskStorage
from user.interfaces.codec import EncodeError
from user.interfaces.domain import Transition
from user.interfaces.stamps import now_ns

_log = logging.getLogger("user.buffer.writer")


@dataclass
class _Pending:
    """An episode being received."""

    episode_id: int
    transitions: list[Transition] = field(default_factory=list)
    payloads: list[bytes] = field(default_factory=list)
    wall_ns: list[int] = field(default_factory=list)
    broken: str | None = None  # why it can no longer be stored whole
    end_at: int | None = None  # the robot ended it after this many steps without a done step (operator reset)


class EpisodeWriter(EpisodeCommitter):
    """Takes each robot's transitions as they come and stores every episode that ends whole (`EpisodeCommitter`)."""

    def __init__(
        self,
        storage: DiskStorage,
        config: StorageConfig,
        *,
        clock: Callable[[], int] = now_ns,
        fault_hook: FaultHook | None = None,
    ) -> None:
        super().__init__(storage, config, clock=clock, fault_hook=fault_hook)
        self._pending: dict[str, _Pending] = {}
        self._early_ends: dict[str, tuple[int, int]] = {}  # robot -> (episode id, steps): ended before its first step
        self.episodes_dropped = 0  # live episodes dropped whole: broken, invalid or duplicated (logged, with why)
        self.transitions_refused = 0  # transitions `add` refused with InvalidTransitionError (nothing changed)
        self.duplicates_refused = 0  # episodes not stored because the buffer holds them already

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
        stored = self.index.stored_episode(robot, transition.episode_id)
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
        return self._commit(pending.transitions, pending.payloads, pending.wall_ns)

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

    def pending_steps(self) -> dict[str, int]:
        """Steps received of each robot's unfinished episode. Read from another thread (the learner's
        /diagnostics) while `add` runs: the items are copied in one step (`list` of a dict is atomic under the
        GIL), so a robot starting or ending an episode meanwhile cannot break the iteration."""
        return {robot: len(p.transitions) for robot, p in list(self._pending.items())}

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
        return self._commit(pending.transitions, pending.payloads, pending.wall_ns)

    def _refuse_duplicate(self, pending: _Pending) -> None:
        """`DuplicateEpisodeError` for a (robot, episode) the buffer holds already; checked before any write."""
        robot = pending.transitions[0].robot_id
        stored = self.index.stored_episode(robot, pending.episode_id)
        if stored is not None:
            self.duplicates_refused += 1
            raise DuplicateEpisodeError(
                f"episode {robot}/{pending.episode_id} refused: the buffer holds it already (episode {stored})"
            )

    # ---------------------------------------------------------------------------------------------- life

    def close(self) -> None:
        """Drop unfinished episodes (never stored half) and close the open segment."""
        for robot in list(self._pending):
            if self._pending[robot].transitions:
                self._drop(robot, "the buffer was closed before the episode ended")
        self._pending.clear()
        self.roll()
