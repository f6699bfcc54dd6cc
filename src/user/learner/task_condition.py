"""One policy for several tasks: the state it acts and learns on carries which task the robot is doing.

With `learning.tasks` set, the policy's state is a one-hot of the transition's task (in the order of `tasks`)
followed by that task's own state (what `exclude_state_prefixes` leaves of it) padded with zeros to
`state_dim - len(tasks)`, so robots whose tasks have states of different lengths (peg insertion's 17 entries,
button press's 20) feed one network and every batch stacks. The conditioned state is named like any state
(`condition/task/<task>`, `condition/state/<i>`), none of it hidden. The same `TaskConditioner` serves the rollout
(each observation as it comes), the learner's buffer (each transition as it is read: what is stored on disk is what
the robot sent) and the fleet's admission (a robot of a task the policy does not know, or with more state than the
policy holds, is refused with one line naming it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from user.config.strict import ConfigError
from user.interfaces.domain import Observation, Transition
from user.learner.state_select import StateSelectionError, StateSelector

CONDITION_PREFIX = "condition/"


class TaskConditionError(StateSelectionError):
    """An observation does not fit the task-conditioned policy: an unknown task, or too much state."""


class TaskConditioner:
    """The task-conditioned state of observations and transitions (see the module docstring)."""

    def __init__(self, tasks: Sequence[str], state_dim: int, exclude_prefixes: Sequence[str]) -> None:
        if len(set(tasks)) != len(tasks) or any(not t for t in tasks):
            raise ConfigError(f"learning.tasks: {list(tasks)} must name distinct tasks")
        if state_dim <= len(tasks):
            raise ConfigError(
                f"the policy's state_dim {state_dim} leaves no room for a task's state besides the one-hot of "
                f"{len(tasks)} tasks"
            )
        self.tasks = tuple(tasks)
        self.state_dim = state_dim
        self.room = state_dim - len(self.tasks)  # entries left for a task's own state
        self._visible = StateSelector(exclude_prefixes)
        self.names = (
            *(f"{CONDITION_PREFIX}task/{t}" for t in self.tasks),
            *(f"{CONDITION_PREFIX}state/{i}" for i in range(self.room)),
        )

    def _fit(
        self, state: npt.NDArray[np.float32], names: Sequence[str], task: str
    ) -> tuple[int, npt.NDArray[np.intp] | None]:
        """(the task's code, the columns of its own state), or `TaskConditionError` when it does not fit: a look-up
        of the names' columns, cached, nothing computed."""
        try:
            code = self.tasks.index(task)
        except ValueError:
            raise TaskConditionError(
                f"task {task!r} is not one the policy is conditioned on ({', '.join(self.tasks)})"
            ) from None
        columns = self._visible.columns(names, int(state.shape[-1]))
        own = int(state.shape[-1]) if columns is None else len(columns)
        if own > self.room:
            raise TaskConditionError(
                f"task {task}: {own} state entries; the policy holds {self.room} besides the one-hot of "
                f"its {len(self.tasks)} tasks (state_dim {self.state_dim})"
            )
        return code, columns

    def check(self, transitions: Iterable[Transition]) -> None:
        """`TaskConditionError` for the first transition the policy cannot take (its observations checked, not
        conditioned: a learner refuses it before the buffer stores what it reads conditioned)."""
        for t in transitions:
            for obs in (t.observation, t.next_observation):
                self._fit(obs.state, obs.state_names, obs.task)

    def state(self, state: npt.NDArray[np.float32], names: Sequence[str], task: str) -> npt.NDArray[np.float32]:
        """The conditioned state (`state_dim`,) of one observation of `task`; `TaskConditionError` when it does
        not fit."""
        code, columns = self._fit(state, names, task)
        own = state if columns is None else state[..., columns]
        out = np.zeros(self.state_dim, dtype=np.float32)
        out[code] = 1.0
        out[len(self.tasks) : len(self.tasks) + own.shape[-1]] = own
        return out

    def observation(self, obs: Observation) -> Observation:
        """`obs` with its state conditioned (its other fields as they are)."""
        return replace(obs, state=self.state(obs.state, obs.state_names, obs.task), state_names=self.names)

    def transition(self, t: Transition) -> Transition:
        """`t` with both observations' states conditioned on its task."""
        return replace(
            t, observation=self.observation(t.observation), next_observation=self.observation(t.next_observation)
        )


class PolicyState:
    """The state a policy acts on, from an observation: selected (`StateSelector`) or conditioned on its task."""

    def __init__(self, selector: StateSelector, conditioner: TaskConditioner | None = None) -> None:
        self.selector = selector
        self.conditioner = conditioner

    def of(self, obs: Observation) -> npt.NDArray[np.float32]:
        """The policy's state for `obs`; `StateSelectionError` (or `TaskConditionError`) when it does not fit."""
        if self.conditioner is not None:
            return self.conditioner.state(obs.state, obs.state_names, obs.task)
        return self.selector.select(obs.state, obs.state_names)
