"""What the lead rank tells the others, and when: every sequence of collectives (one update, the start) begins
with a command the lead broadcasts, so the other ranks (followers) know which collectives follow; between them the
lead sends a heartbeat at least every `heartbeat_s`, so a follower waiting for the next command never reaches its
collective deadline while the lead is merely idle (no data yet, a sync phase, a checkpoint).

A follower that hears nothing within the collective deadline (the lead died or hangs) fails there; torchrun then
restarts the whole group, which resumes from the last checkpoint.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from enum import IntEnum

import torch
import torch.distributed as dist

from user.distributed.group import RankGroup

_log = logging.getLogger(__name__)


class Op(IntEnum):
    IDLE = 0  # nothing follows: a heartbeat
    START = 1  # the ranks take the lead's training state (after the lead loaded its checkpoint)
    UPDATE = 2  # one update on shares of the lead's next global batch
    STOP = 3  # the learner stops: followers exit
    GATHER = 4  # a sharded actor's full weights gathered on the lead (for publication)
    CHECKPOINT = 5  # a DCP checkpoint written together (where and how follow: `user.learner.rank_checkpoint`)


class LeadChannel:
    """The lead's commands, sent under one lock so sequences of collectives never interleave; a heartbeat thread
    sends IDLE whenever `heartbeat_s` passed without a command."""

    def __init__(self, group: RankGroup, heartbeat_s: float) -> None:
        self.group = group
        self.heartbeat_s = heartbeat_s
        self._lock = threading.Lock()
        self._last = time.monotonic()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="rank-heartbeat", daemon=True)
        self._thread.start()

    @contextlib.contextmanager
    def command(self, op: Op) -> Iterator[None]:
        """Hold the channel for `op` and the collectives that follow it (inside the block)."""
        with self._lock:
            self._send(op)
            yield

    def close(self) -> None:
        """Tell the followers to stop (once); the heartbeat ends."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._thread.join(self.heartbeat_s + 1.0)
        with self._lock:
            try:
                self._send(Op.STOP)
            except RuntimeError as exc:  # a follower already gone: it has nothing left to stop
                _log.warning("could not tell the other ranks to stop: %s", exc)

    def _send(self, op: Op) -> None:
        dist.broadcast(torch.tensor([int(op)], dtype=torch.int64, device=self.group.device), src=self.group.lead)
        self._last = time.monotonic()

    def _beat(self) -> None:
        while not self._closed.wait(self.heartbeat_s / 4):
            if time.monotonic() - self._last < self.heartbeat_s:
                continue
            if not self._lock.acquire(timeout=self.heartbeat_s / 4):
                continue  # a command is under way: it is the sign of life
            try:
                self._send(Op.IDLE)
            except RuntimeError as exc:
                _log.error("heartbeat to the other ranks failed: %s", exc)
                return
            finally:
                self._lock.release()


def receive(group: RankGroup) -> Op:
    """The lead's next command (a follower's side); raises when none comes within the collective deadline."""
    got = torch.zeros(1, dtype=torch.int64, device=group.device)
    dist.broadcast(got, src=group.lead)
    return Op(int(got.item()))
