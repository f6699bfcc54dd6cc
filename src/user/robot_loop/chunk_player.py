"""`ChunkPlayer`: the robot's action each control period from the action chunks a remote policy sends.

A policy computing chunks at a distant site (real-time chunking, `user.policies.pi0.rtc`) sends each chunk tagged
with the episode step its first action is for. Chunks arrive on a bus thread at any time (`offer`); the control
loop asks once per period (`action_for`) and executes what it gets, or holds when it gets None. The player is
step-indexed, never clocked: inference time and link delay only decide which chunk is there when a step is asked.

Rules: a newer chunk (higher `(start_step, seq)`) takes over at the first step it covers, and the player never
goes back to an older one; a chunk refused at `offer` (another episode's, not newer than one already played, one
that ends before the step already reached, a wrong shape, non-finite values or values outside [-1, 1]) is never
played and the refusal says why; a step past the end of the playing chunk gets None (hold) until a newer chunk
covers it. `start_episode` drops every chunk of earlier episodes. Each played action says which chunk and index it
came from and whether a newer chunk took over at this step, for the transition the control loop records.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt


class ChunkPlayerError(RuntimeError):
    """The control loop asked the player for something it cannot answer (a step back, another episode)."""


class Refusal(enum.Enum):
    """Why an offered chunk is never played."""

    OLD_EPISODE = "old_episode"  # tagged with an episode before the current one
    NOT_NEWER = "not_newer"  # not newer than a chunk already played or already held
    LATE = "late"  # ends before the step the robot has reached
    BAD_SHAPE = "bad_shape"  # not (H, A) floats with H >= 1 and A the robot's action size, or a negative start
    NON_FINITE = "non_finite"  # NaN or inf among the actions
    OUT_OF_RANGE = "out_of_range"  # an action outside [-1, 1]


@dataclass(frozen=True, eq=False)  # holds an array: compared by identity
class Chunk:
    """Actions for consecutive steps of one episode, as a policy sent them."""

    episode_id: int  # the episode the chunk was computed for
    start_step: int  # the episode step its action 0 is for
    actions: npt.NDArray[np.float32]  # (H, A) actions in [-1, 1], one per step from start_step on
    policy_version: int  # version of the policy weights that computed it
    seq: int  # the sender's chunk counter: orders chunks with the same start_step (higher is newer)

    @property
    def key(self) -> tuple[int, int]:
        """Newer chunks have higher keys."""
        return (self.start_step, self.seq)

    @property
    def end_step(self) -> int:
        """The first step after its last action."""
        return self.start_step + len(self.actions)


@dataclass(frozen=True)
class Offered:
    """What became of an offered chunk: accepted (`refusal` None) or refused, with a message for logs."""

    refusal: Refusal | None
    message: str = ""

    @property
    def accepted(self) -> bool:
        return self.refusal is None


@dataclass(frozen=True, eq=False)  # holds an array: compared by identity
class PlayedAction:
    """The action for one step and where it came from."""

    action: npt.NDArray[np.float32]  # (A,) the action to execute (a copy)
    seq: int  # the chunk it came from
    index: int  # its index in that chunk (step - start_step)
    switched: bool  # a newer chunk took over from the one played at an earlier step, at this step
    policy_version: int  # version of the policy that computed the chunk


@dataclass(frozen=True)
class PlayerStats:
    """Counters since the player was made."""

    periods_without_action: int  # `action_for` calls answered None (the robot held)
    switches: int  # steps at which a newer chunk took over
    accepted: int  # chunks accepted by `offer`
    held: int  # chunks kept now: the one playing and those waiting for their start (superseded ones are dropped)
    refused: dict[Refusal, int] = field(default_factory=dict)  # chunks refused, by reason


class ChunkPlayer:
    """Plays action chunks step by step, newer chunks taking over. Thread-safe."""

    def __init__(self, action_dim: int) -> None:
        if action_dim < 1:
            raise ValueError(f"action_dim must be 1 or more, got {action_dim}")
        self.action_dim = action_dim
        self._lock = threading.Lock()
        self._episode_id = 0
        self._chunks: list[Chunk] = []  # accepted, not yet superseded; any episode >= the current one
        self._playing: Chunk | None = None  # the chunk played at the latest step that got an action
        self._step = -1  # the latest step asked in the current episode
        self._step_key: tuple[int, int] | None = None  # key of the chunk played at that step
        self._before_key: tuple[int, int] | None = None  # key of the chunk played at the last step before it
        self._without_action = 0
        self._switches = 0
        self._accepted = 0
        self._refused: dict[Refusal, int] = {}

    def start_episode(self, episode_id: int) -> None:
        """Play `episode_id` from step 0 on: chunks of earlier episodes are dropped, later offers of them refused."""
        with self._lock:
            self._episode_id = episode_id
            self._chunks = [c for c in self._chunks if c.episode_id >= episode_id]
            self._playing, self._step, self._step_key, self._before_key = None, -1, None, None

    def offer(self, chunk: Chunk) -> Offered:
        """Take a chunk from the policy (any thread); a refused one is never played."""
        actions, problem = self._checked_actions(chunk)
        with self._lock:
            if actions is not None:
                problem = self._check_order(chunk)
            if actions is None or problem is not None:
                reason, message = problem or (Refusal.BAD_SHAPE, "")
                self._refused[reason] = self._refused.get(reason, 0) + 1
                return Offered(reason, message)
            self._chunks.append(Chunk(chunk.episode_id, chunk.start_step, actions, chunk.policy_version, chunk.seq))
            self._accepted += 1
            return Offered(None)

    def action_for(self, episode_id: int, step: int) -> PlayedAction | None:
        """The action for `step` of the current episode, or None when no chunk covers it (the robot holds)."""
        with self._lock:
            self._advance(episode_id, step)
            chunk = self._newest_started(step)
            if chunk is None or step >= chunk.end_step:
                self._without_action += 1
                return None
            switched = self._before_key is not None and chunk.key != self._before_key
            if switched and chunk.key != self._step_key:
                self._switches += 1
            self._step_key, self._playing = chunk.key, chunk
            self._chunks = [c for c in self._chunks if c.episode_id != episode_id or c.key >= chunk.key]
            index = step - chunk.start_step
            return PlayedAction(chunk.actions[index].copy(), chunk.seq, index, switched, chunk.policy_version)

    def stats(self) -> PlayerStats:
        with self._lock:
            return PlayerStats(
                self._without_action, self._switches, self._accepted, len(self._chunks), dict(self._refused)
            )

    def _advance(self, episode_id: int, step: int) -> None:
        """Move to `step` (the same step again is allowed: a held period is asked again)."""
        if episode_id != self._episode_id:
            raise ChunkPlayerError(
                f"actions asked for episode {episode_id} but the player plays episode {self._episode_id}: "
                "call start_episode first"
            )
        if step < self._step:
            raise ChunkPlayerError(f"step {step} asked after step {self._step} of episode {episode_id}: steps go on")
        if step != self._step:
            if self._step_key is not None:
                self._before_key = self._step_key
            self._step, self._step_key = step, None

    def _newest_started(self, step: int) -> Chunk | None:
        """The newest chunk of the current episode that starts at or before `step`."""
        started = [c for c in self._chunks if c.episode_id == self._episode_id and c.start_step <= step]
        return max(started, key=lambda c: c.key, default=None)

    def _check_order(self, chunk: Chunk) -> tuple[Refusal, str] | None:
        """A chunk of an earlier episode, one not newer than the one playing or one held, or one already over."""
        what = f"chunk {chunk.seq} of episode {chunk.episode_id} (steps {chunk.start_step}..{chunk.end_step - 1})"
        if chunk.episode_id < self._episode_id:
            return Refusal.OLD_EPISODE, f"{what}: the robot already plays episode {self._episode_id}"
        if any(c.episode_id == chunk.episode_id and c.key == chunk.key for c in self._chunks):
            return Refusal.NOT_NEWER, f"{what}: one with the same (start_step, seq) {chunk.key} is held already"
        if chunk.episode_id > self._episode_id:
            return None  # for an episode the robot has not started yet: kept until it does
        playing = self._playing.key if self._playing is not None else None
        if playing is not None and chunk.key <= playing:
            return Refusal.NOT_NEWER, f"{what}: not newer than the chunk playing, (start_step, seq) {playing}"
        if chunk.end_step <= self._step:
            return Refusal.LATE, f"{what}: arrived after its last step, the robot is at step {self._step}"
        return None

    def _checked_actions(self, chunk: Chunk) -> tuple[npt.NDArray[np.float32], None] | tuple[None, tuple[Refusal, str]]:
        """A read-only float32 copy of the chunk's actions (the sender may reuse its buffer), or why not."""
        try:
            raw = np.asarray(chunk.actions)
        except (TypeError, ValueError) as exc:  # ragged rows
            return None, (Refusal.BAD_SHAPE, f"actions are no (H, A) array: {exc}")
        shape = raw.shape
        if len(shape) != 2 or shape[0] < 1 or shape[1] != self.action_dim or not np.issubdtype(raw.dtype, np.floating):
            return None, (Refusal.BAD_SHAPE, f"actions must be (H, {self.action_dim}) floats, got {raw.dtype} {shape}")
        if chunk.start_step < 0:
            return None, (Refusal.BAD_SHAPE, f"start_step must be 0 or more, got {chunk.start_step}")
        if not np.isfinite(raw).all():
            return None, (Refusal.NON_FINITE, "actions hold NaN or inf")
        if np.abs(raw).max() > 1.0:
            return None, (Refusal.OUT_OF_RANGE, f"actions reach {float(np.abs(raw).max()):.3g}, outside [-1, 1]")
        actions = raw.astype(np.float32, copy=True)
        actions.flags.writeable = False
        return actions, None
