"""`GymRobot`: any gymnasium environment with a continuous Box action space, behind the `Robot` interface.

- Actions are normalised: each component in [-1, 1] is clipped and rescaled to the env's Box bounds.
- Bad actions (wrong type, dtype or shape, NaN, inf) hold: the env is *not* stepped, `held=True`.
- After the episode terminated or was truncated, `step` holds until `reset()`.
- The state is a `GymState`: the flattened observation is in `joint_positions` (and `vector()` returns
  it), the pose fields are neutral placeholders (identity pose, zero velocity, gripper 0).
- `max_episode_steps` is the env's own episode limit (its TimeLimit), None when it has none.
- The last reward, terminated, truncated and info are kept in `last_reward`, `last_terminated`,
  `last_truncated` and `last_info` for tasks and reward nodes.

gymnasium is imported when the first `GymRobot` is made, so the rest of `user.robots` works without it.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from user.robots.base import ActionSpace, ArmState, Robot, RobotDescriptor, RobotError, StepResult
from user.robots.safety import check_action, clip_unit

_DEFAULT_RATE_HZ = 10.0


class GymState(ArmState):
    """An `ArmState` that carries a gym observation (flattened, float64) in `joint_positions`."""

    def vector(self) -> np.ndarray:
        """The observation itself, as float32: what a policy for this env expects."""
        return self.joint_positions.astype(np.float32)


def rescale(
    unit: npt.NDArray[np.float64], low: npt.NDArray[np.float64], high: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Map `unit` in [-1, 1] linearly onto [low, high] (-1 -> low, +1 -> high), clipped to the bounds."""
    return np.clip(low + (unit + 1.0) * 0.5 * (high - low), low, high)


class GymRobot(Robot):
    """A gymnasium env id (e.g. "Pendulum-v1") as a robot; the env is made at construction to learn its spaces."""

    def __init__(
        self,
        env_id: str,
        *,
        robot_id: str | None = None,
        control_rate_hz: float | None = None,
        env_kwargs: Mapping[str, Any] | None = None,
        site: str = "local",
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self._env_id = env_id
        self._env_kwargs = dict(env_kwargs or {})
        self._clock_ns = clock_ns
        self._env: Any = self._make()
        self._env_spec: Any = self._env.spec  # kept: the env itself is gone between close() and connect()
        space = self._env.action_space
        self._low = np.asarray(space.low, dtype=np.float64)
        self._high = np.asarray(space.high, dtype=np.float64)
        self._env_dtype = space.dtype
        dim = int(self._low.shape[0])
        self._names = tuple(f"a{i}" for i in range(dim))
        self._action_space = ActionSpace(
            low=-np.ones(dim, np.float32), high=np.ones(dim, np.float32), names=self._names
        )
        self.descriptor = RobotDescriptor(
            robot_id=robot_id or f"gym_{env_id}",
            model=f"gym:{env_id}",
            dof=dim,
            control_rate_hz=control_rate_hz if control_rate_hz is not None else _rate_of(self._env),
            site=site,
        )
        self._connected = False
        self._state: GymState | None = None
        self.last_reward = 0.0
        self.last_terminated = False
        self.last_truncated = False
        self.last_info: dict[str, Any] = {}
        self._log = logging.getLogger(f"{__name__}.{self.descriptor.robot_id}")

    @property
    def env(self) -> Any:
        """The wrapped gymnasium env (None after `close()` until the next `connect()`)."""
        return self._env

    @property
    def max_episode_steps(self) -> int | None:
        """The env's own episode limit (its registered TimeLimit, `spec.max_episode_steps`); None when it has none."""
        limit = getattr(self._env_spec, "max_episode_steps", None)
        return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None

    @property
    def episode_over(self) -> bool:
        return self.last_terminated or self.last_truncated

    def connect(self) -> None:
        if self._connected:
            return
        if self._env is None:
            self._env = self._make()
        self._connected = True

    def close(self) -> None:
        if not self._connected:
            return
        try:
            self._env.close()
        finally:
            self._env = None
            self._state = None
            self._connected = False

    def reset(self, seed: int | None = None) -> ArmState:
        self.require_connected()
        obs, info = self._env.reset(seed=seed)
        self._set_outcome(obs, 0.0, terminated=False, truncated=False, info=info)
        return self._current()

    def step(self, action: np.ndarray) -> StepResult:
        self.require_connected()
        self._current()  # raises before the first reset()
        if self.episode_over:
            return self.hold("episode is over (terminated or truncated): reset() before stepping")
        problem = check_action(action, self._action_space.shape, self._names)
        if problem is not None or not isinstance(action, np.ndarray):
            return self.hold(f"action rejected, holding: {problem}")
        unit, reasons = clip_unit(action.astype(np.float64), self._names)
        env_action = rescale(unit, self._low, self._high).astype(self._env_dtype)
        obs, reward, terminated, truncated, info = self._env.step(env_action)
        self._set_outcome(obs, float(reward), terminated=bool(terminated), truncated=bool(truncated), info=info)
        return StepResult(
            applied=unit.astype(np.float32), state=self._current(), clipped=bool(reasons), reasons=tuple(reasons)
        )

    def hold(self, reason: str) -> StepResult:
        """Do not step the env; report the unchanged state."""
        self.require_connected()
        self._log.debug("holding: %s", reason)
        return StepResult(
            applied=np.zeros(self._action_space.shape, np.float32), state=self._current(), held=True, reasons=(reason,)
        )

    def state(self) -> ArmState:
        self.require_connected()
        return self._current()

    def _current(self) -> GymState:
        if self._state is None:
            raise RobotError(f"robot {self.descriptor.robot_id!r} has no observation yet; call reset() first")
        return self._state

    def _set_outcome(self, obs: Any, reward: float, *, terminated: bool, truncated: bool, info: Any) -> None:
        from gymnasium import spaces

        flat = np.asarray(spaces.flatten(self._env.observation_space, obs), dtype=np.float64)
        self._state = GymState(
            stamp_ns=self._clock_ns(),
            tcp_pose=np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]),
            tcp_velocity=np.zeros(6),
            joint_positions=flat,
            joint_velocities=np.zeros_like(flat),
            gripper=0.0,
        )
        self.last_reward = reward
        self.last_terminated = terminated
        self.last_truncated = truncated
        self.last_info = dict(info) if isinstance(info, Mapping) else {}

    def _make(self) -> Any:
        try:
            import gymnasium
        except ImportError as exc:
            raise RobotError("GymRobot needs the gymnasium package (pip install gymnasium)") from exc
        try:
            env = gymnasium.make(self._env_id, **self._env_kwargs)
        except gymnasium.error.Error as exc:
            raise RobotError(f"cannot make gym env {self._env_id!r}: {exc}") from exc
        except ImportError as exc:  # e.g. mujoco for the MuJoCo envs: the env's own dependency is missing
            raise RobotError(
                f"cannot make gym env {self._env_id!r}: it needs the Python module {exc.name!r}, which cannot be "
                f"imported ({exc}); install it in this environment"
            ) from exc
        space = env.action_space
        problem = _action_space_problem(space, gymnasium.spaces.Box)
        if problem is not None:
            env.close()
            raise RobotError(f"gym env {self._env_id!r} cannot be a GymRobot: {problem}")
        return env


def _action_space_problem(space: Any, box: type[Any]) -> str | None:
    if not isinstance(space, box):
        return f"its action space is {type(space).__name__}, a continuous Box is needed"
    if len(space.shape) != 1 or np.dtype(space.dtype).kind != "f":
        return f"its action space must be a 1-D float Box, got shape {space.shape} dtype {space.dtype}"
    if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
        return "its action space has infinite bounds, so [-1, 1] cannot be rescaled onto it"
    return None


def _rate_of(env: Any) -> float:
    """Control rate from the env's time step (`dt`) or render rate, else 10 Hz."""
    dt = getattr(env.unwrapped, "dt", None)
    if isinstance(dt, (int, float)) and math.isfinite(dt) and dt > 0:
        return 1.0 / float(dt)
    fps = env.metadata.get("render_fps")
    if isinstance(fps, (int, float)) and math.isfinite(fps) and fps > 0:
        return float(fps)
    return _DEFAULT_RATE_HZ
