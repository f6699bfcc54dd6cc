"""`EpisodeOutbox`: a robot keeps each completed episode until the learner acknowledges storing it.

The robot streams transitions live; the learner answers each stored episode with a user/msg/EpisodeAck.
An episode with no receipt `resend_after_s` after it ended (the learner was down, restarting, or the
transitions were lost on the way) is handed out again by `due`, whole, to be re-sent on the replay topic;
the learner stores it if it does not have it yet and acknowledges either way. The outbox is bounded: beyond
`max_episodes` unacknowledged episodes the oldest is given up, loudly. Messages are kept as they were
published (the transport's message objects), so a re-send is byte-for-byte the original.

Nothing is re-sent before the first receipt ever arrives: a deployment without an acknowledging learner
(a plain recorder, a test) gets no re-sends and no complaints.

With a spool (`user.robot_loop.outbox_spool`), each completed episode is also on disk until its receipt, and a
restarted robot node `restore`s what the last one left, so a kill -9 of the robot loses no completed episode.

Receipts and saves are ordered. The robot publishes a transition before it adds it here, and writes the episode's
file outside the lock, so a receipt can come before the episode is complete here, or while its file is being
written. A receipt for an episode not (yet) complete is remembered and applied when it completes (never written
then); one that comes while the file is being written leaves the removal to the writer, once the file exists. So
no file outlives its episode's receipt; a crash between the write and the removal only re-sends the episode once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from user.robot_loop.outbox_spool import OutboxSpool

_log = logging.getLogger("user.robot_loop.outbox")

MAX_EARLY_RECEIPTS = 256  # receipts kept for episodes not complete here (yet); the oldest is forgotten first


@dataclass
class _Episode:
    messages: list[Any] = field(default_factory=list)
    ended_at: float | None = None  # monotonic time the last transition was published
    sent_at: float = 0.0  # last (re)send
    resends: int = 0
    restored: bool = False  # left unacknowledged by the last run of this robot (its spool)
    saving: bool = False  # its file is being written (outside the lock)
    forget: bool = False  # acknowledged or given up while being written: its writer removes the file


class Resend(NamedTuple):
    """An episode `due` hands out again."""

    episode_id: int
    messages: list[Any]
    after_restart: bool  # its first re-send, left by the last run of this robot: expected, not a lost receipt


class EpisodeOutbox:
    """Thread-safe: the control thread adds, the bus thread acknowledges, a timer asks what is due."""

    def __init__(
        self,
        max_episodes: int = 20,
        resend_after_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        spool: OutboxSpool | None = None,
    ) -> None:
        if max_episodes < 1:
            raise ValueError(f"max_episodes must be at least 1, got {max_episodes}")
        self.max_episodes = max_episodes
        self.resend_after_s = resend_after_s
        self._clock = clock
        self.spool = spool  # completed episodes on disk until their receipt (None: memory only)
        self._episodes: OrderedDict[int, _Episode] = OrderedDict()
        self._early: OrderedDict[int, None] = OrderedDict()  # receipts for episodes not complete here yet
        self._lock = threading.Lock()
        self.acknowledged = 0
        self.given_up = 0  # episodes dropped unacknowledged because the outbox was full
        self.resent = 0  # episodes re-sent
        self.active = False  # a receipt has arrived at least once: someone acknowledges, so re-sending makes sense

    def add(self, episode_id: int, message: Any, done: bool) -> None:
        """One published transition of `episode_id`; `done` marks the episode's last."""
        with self._lock:
            episode = self._episodes.get(episode_id)
            if episode is None:
                for stale in [e for e, ep in self._episodes.items() if ep.ended_at is None]:
                    del self._episodes[stale]  # ended without a done step (operator reset): never stored whole
                episode = self._episodes[episode_id] = _Episode()
                self._trim()
            episode.messages.append(message)
            if not done:
                return
            messages = self._complete(episode_id, episode)
        self._save(episode_id, episode, messages)

    def restore(self, episodes: list[tuple[int, list[Any]]]) -> None:
        """Completed episodes a previous process of this robot left unacknowledged (its spool): held as if they
        had just ended, so they are re-sent once the learner answers."""
        acknowledged = []
        with self._lock:
            now = self._clock()
            for episode_id, messages in episodes:
                if self._take_early(episode_id):  # its receipt came already
                    acknowledged.append(episode_id)
                    continue
                self._episodes[episode_id] = _Episode(list(messages), ended_at=now, sent_at=now, restored=True)
                self._episodes.move_to_end(episode_id)
            self._trim()
        for episode_id in acknowledged:
            self._remove(episode_id)

    def _complete(self, episode_id: int, episode: _Episode) -> list[Any] | None:
        """Under the lock: `episode` has ended. The messages to write to the spool; None when there is nothing to
        write (no spool, or its receipt came already: it is forgotten here)."""
        episode.ended_at = episode.sent_at = self._clock()
        if self._take_early(episode_id):
            del self._episodes[episode_id]
            self.acknowledged += 1
            return None
        if self.spool is None:
            return None
        episode.saving = True
        return list(episode.messages)

    def _save(self, episode_id: int, episode: _Episode, messages: list[Any] | None) -> None:
        """Write the completed episode's file (outside the lock); remove it again when its receipt (or the
        outbox's trim) came while it was being written."""
        if messages is None or self.spool is None:
            return
        try:
            self.spool.save(episode_id, messages)
        except OSError as exc:  # the episode is still held in memory; only a kill now would lose it
            _log.error("outbox spool: cannot keep episode %d on disk (%s)", episode_id, exc.strerror or exc)
        finally:
            with self._lock:
                episode.saving = False
                forget = episode.forget
            if forget:
                self._remove(episode_id)

    def _remove(self, episode_id: int) -> None:
        if self.spool is not None:
            self.spool.remove(episode_id)

    def acknowledge(self, episode_id: int) -> bool:
        """The learner has the episode; forget it (and its file). False when it is not held complete: a receipt
        for an episode not complete yet is remembered and applied when it completes."""
        with self._lock:
            self.active = True
            episode = self._episodes.get(episode_id)
            if episode is None or episode.ended_at is None:
                self._remember(episode_id)
                return False
            del self._episodes[episode_id]
            self.acknowledged += 1
            if episode.saving:
                episode.forget = True  # its writer removes the file once it is there
                return True
        self._remove(episode_id)
        return True

    def _remember(self, episode_id: int) -> None:
        self._early[episode_id] = None
        self._early.move_to_end(episode_id)
        while len(self._early) > MAX_EARLY_RECEIPTS:
            self._early.popitem(last=False)

    def _take_early(self, episode_id: int) -> bool:
        """Under the lock: whether a receipt for `episode_id` came before it completed here (then applied)."""
        if episode_id not in self._early:
            return False
        del self._early[episode_id]
        return True

    def end_early(self, episode_id: int, truncate: Callable[[Any], Any]) -> bool:
        """The robot ended `episode_id` without a done step (an operator reset): keep it as a whole episode whose
        last message is `truncate(last)` (the learner stores the same truncation), to be acknowledged or re-sent
        like any other. False when the episode is not held or has no step."""
        with self._lock:
            episode = self._episodes.get(episode_id)
            if episode is None or not episode.messages or episode.ended_at is not None:
                return False
            episode.messages[-1] = truncate(episode.messages[-1])
            messages = self._complete(episode_id, episode)
        self._save(episode_id, episode, messages)
        return True

    def due(self) -> list[Resend]:
        """Completed, unacknowledged episodes whose last (re)send is `resend_after_s` old. Logged: once, as a
        count, for those the last run of this robot left (expected after a restart); each other one as a
        warning (no receipt within the delay)."""
        now = self._clock()
        out: list[Resend] = []
        with self._lock:
            if not self.active:
                return out
            for episode_id, episode in self._episodes.items():
                if episode.ended_at is not None and now - episode.sent_at >= self.resend_after_s:
                    episode.sent_at = now
                    episode.resends += 1
                    self.resent += 1
                    restart = episode.restored and episode.resends == 1
                    out.append(Resend(episode_id, list(episode.messages), restart))
        _log_resends(out, self.resend_after_s)
        return out

    def pending(self) -> list[int]:
        """Ids of completed episodes still waiting for a receipt."""
        with self._lock:
            return [e for e, ep in self._episodes.items() if ep.ended_at is not None]

    def _trim(self) -> None:
        while len(self._episodes) > self.max_episodes + 1:  # + the episode being recorded
            episode_id, episode = next(iter(self._episodes.items()))
            del self._episodes[episode_id]
            if episode.saving:
                episode.forget = True
            else:
                self._remove(episode_id)
            if not self.active:
                continue  # nobody acknowledges: nothing is expected to be delivered
            self.given_up += 1
            _log.error(
                "outbox full (%d episodes): gave up episode %d (%d transitions) without a receipt from the learner",
                self.max_episodes,
                episode_id,
                len(episode.messages),
            )


def _log_resends(resends: list[Resend], after_s: float) -> None:
    restarted = [r.episode_id for r in resends if r.after_restart]
    if restarted:
        _log.info(
            "episodes left without a receipt by the last run of this robot: re-sending %d (%s)",
            len(restarted),
            ", ".join(str(e) for e in restarted),
        )
    for r in resends:
        if not r.after_restart:
            _log.warning(
                "no receipt for episode %d from the learner within %g s: re-sending its %d transitions",
                r.episode_id,
                after_s,
                len(r.messages),
            )
