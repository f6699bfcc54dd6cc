"""Chunks for robots that play them at the edge (`ActingConfig.send: chunks`): when a robot needs its next chunk,
and what of its previous chunk the next one must continue.

A chunking policy (`VLAPolicy`) computes H actions at once. A robot at the edge plays them one per control period
(`user.robot_loop.chunk_player`) and never waits for the cloud between two of them, if the next chunk comes in time:

- mode `rtc` (real-time chunking): the next chunk is asked for `execute_horizon - delay_steps` steps after the
  current one started, so that it arrives, `delay_steps` control periods later (inference plus both directions of
  the link), about `execute_horizon` steps in; it is sampled to continue the actions the robot executes meanwhile
  (`user.policies.pi0.rtc`: inpainting by guidance), so switching to it is seamless wherever it lands;
- mode `replace` (plain chunk replacement, the baseline): the next chunk is asked for once the current one is used
  up, from the observation at its end; the robot holds while it is computed and sent.

`ChunkPlans` keeps, per robot, the last chunk sent (its episode, first step, actions) and the chunk counter; a
robot that got no chunk for `resend_after_s` gets one at its next observation whatever its step (it restarted its
episode ids, or a chunk was lost), so it never waits for ever.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
import torch

from user.config.strict import ConfigError, setting
from user.policies.base import Policy, PolicyError, TensorObs
from user.policies.vla import Continuing, VLAPolicy


@dataclass(frozen=True)
class ChunkingConfig:
    """How a rollout sends chunks to robots that play them (send: chunks)."""

    mode: Literal["rtc", "replace"] = setting(
        "rtc",
        "rtc: the next chunk is computed while the robot plays the current one, continuing it (real-time chunking); "
        "replace: the next chunk is computed once the current one is used up (the robot holds meanwhile)",
        choices=("rtc", "replace"),
    )
    execute_horizon: int = setting(
        5, "rtc: s, steps of a chunk played before the next one should take over (at most the chunk size)", min=1
    )
    delay_steps: int = setting(
        3,
        "rtc: d, control periods between the observation a chunk is computed from and its arrival at the robot "
        "(inference and the link both ways, rounded up); at most chunk size - execute_horizon",
        min=0,
    )
    max_guidance: float = setting(5.0, "rtc: the guidance weight's clip (β); 0 = no inpainting", min=0.0)
    schedule: Literal["exp", "linear", "ones", "zeros"] = setting(
        "exp", "rtc: how the guidance decays over the overlap after the delay (the paper's exp)"
    )
    resend_after_s: float = setting(
        2.0,
        "a robot that got no chunk for this long gets one at its next observation, wherever it is (a robot that "
        "restarted its episodes, a chunk that never arrived)",
        min=0.1,
    )
    added_latency_s: float = setting(
        0.0, "seconds added to every chunk's computation before it is sent (benchmarks: a slower model)", min=0.0
    )

    def check(self, chunk_size: int) -> None:
        """ConfigError when these settings do not fit a policy of `chunk_size` actions per chunk."""
        if self.mode == "replace":
            return
        if self.execute_horizon > chunk_size:
            raise ConfigError(f"chunking.execute_horizon {self.execute_horizon} exceeds the chunk of {chunk_size}")
        if self.delay_steps > chunk_size - self.execute_horizon:
            raise ConfigError(
                f"chunking.delay_steps {self.delay_steps} exceeds chunk size {chunk_size} - execute_horizon "
                f"{self.execute_horizon}: the robot would run out of the current chunk before the next arrives"
            )


@dataclass(frozen=True, eq=False)
class _Sent:
    episode_id: int
    start_step: int
    actions: npt.NDArray[np.float32]
    at: float  # when it was sent (the plans' clock)


class ChunkPlans:
    """Per robot: is a new chunk due at this observation, and what must it continue. Thread-safe."""

    def __init__(self, config: ChunkingConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._clock = clock
        self._last: dict[str, _Sent] = {}
        self._seq: dict[str, int] = {}
        self._lock = threading.Lock()

    def due(self, robot: str, episode_id: int, step: int) -> bool:
        """Whether the observation of `step` should get a new chunk."""
        with self._lock:
            last = self._last.get(robot)
        if last is None or self._clock() - last.at >= self.config.resend_after_s:
            return True
        if (episode_id, step) <= (last.episode_id, last.start_step):
            return False  # the observation a chunk was computed from, again, or an older one
        if episode_id != last.episode_id:
            return True
        played = step - last.start_step
        if self.config.mode == "replace":
            return played >= len(last.actions)
        return played >= self.config.execute_horizon - self.config.delay_steps

    def previous(self, robot: str, episode_id: int, step: int) -> npt.NDArray[np.float32] | None:
        """The actions of the last chunk sent to `robot` from `step` on (what the robot still plays), or None when
        there is nothing to continue (the first chunk of an episode, a chunk used up, mode replace)."""
        if self.config.mode == "replace":
            return None
        with self._lock:
            last = self._last.get(robot)
        if last is None or last.episode_id != episode_id or step < last.start_step:
            return None
        rest = last.actions[step - last.start_step :]
        return rest if len(rest) >= self.config.delay_steps and len(rest) else None

    def sent(self, robot: str, episode_id: int, start_step: int, actions: npt.NDArray[np.float32]) -> int:
        """Record the chunk sent to `robot`; its sequence number."""
        with self._lock:
            self._last[robot] = _Sent(episode_id, start_step, actions, self._clock())
            seq = self._seq[robot] = self._seq.get(robot, 0) + 1
        return seq

    def forget(self, robot: str) -> None:
        with self._lock:
            self._last.pop(robot, None)


def chunk_for(
    policy: Policy,
    batch: TensorObs,
    previous: npt.NDArray[np.float32] | None,
    config: ChunkingConfig,
    *,
    deterministic: bool,
) -> npt.NDArray[np.float32]:
    """The (H, A) chunk of a one-observation `batch`, continuing `previous` (the robot's remaining actions) in mode
    rtc; a policy that makes no chunks is a PolicyError."""
    if not isinstance(policy, VLAPolicy):
        raise PolicyError(f"send: chunks needs a chunking policy (a VLA), not {type(policy).__name__}")
    continuing = None
    if previous is not None:
        continuing = Continuing(
            previous=torch.as_tensor(previous, dtype=torch.float32, device=policy.device)[None],
            delay=config.delay_steps,
            execute_horizon=config.execute_horizon,
            max_guidance=config.max_guidance,
            schedule=config.schedule,
        )
    chunk = policy.chunk_continuing(batch, continuing, deterministic=deterministic)
    out: npt.NDArray[np.float32] = chunk[0].detach().cpu().numpy().astype(np.float32)
    return out
