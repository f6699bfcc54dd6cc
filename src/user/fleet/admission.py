"""Which announced robots may join a running experiment, and whether what they send fits the policy.

Admission is the deployment's to decide, never the announcer's: a robot joins only when its id is in the node's
`robots` list or matches one of its `admit` glob patterns (`fnmatch`, e.g. `franka_*`). A robot that may join must
also fit the policy (`PolicySpec`): the state the policy acts on after hiding what it may not see
(`exclude_state_prefixes`), the action dimension, the cameras. Its announcement is checked first (`state_dim`,
`action_dim` among its descriptor's properties where it announces them, and its cameras); every message of a robot
that joined at run time is checked again, so a robot whose descriptor does not say is refused at its first
observation or transition, before anything of it is stored or acted on.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from user.hardware.descriptor import ResourceDescriptor
from user.interfaces.domain import Observation, Transition
from user.learner.state_select import StateSelectionError, StateSelector
from user.learner.task_condition import PolicyState, TaskConditioner, TaskConditionError

if TYPE_CHECKING:  # the learning stack (torch) only where a policy is held: not the monitor's
    from user.learner.config import LearningConfig


@dataclass(frozen=True)
class Mismatch:
    """Why a robot does not fit the policy: the field, and what it has against what the policy needs."""

    field: str  # "state_dim", "action_dim", "cameras", "task"
    detail: str

    def __str__(self) -> str:
        return f"{self.field}: {self.detail}"


@dataclass(frozen=True)
class Authorisation:
    """The robots a node serves from its start (`robots`) and the patterns of those that may join (`admit`)."""

    robots: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()

    def allows(self, robot_id: str) -> bool:
        return robot_id in self.robots or any(fnmatch.fnmatchcase(robot_id, p) for p in self.patterns)

    def describe(self) -> str:
        """The rule as the refusal line states it."""
        return f"robots [{', '.join(self.robots)}], admit [{', '.join(self.patterns)}]"


@dataclass(frozen=True)
class PolicySpec:
    """What a robot must send for the policy to act and learn on it."""

    state_dim: int  # state entries the policy sees (after hiding `exclude_state_prefixes`)
    action_dim: int
    cameras: tuple[str, ...] = ()  # cameras the policy looks at (all must be among the robot's)
    exclude_state_prefixes: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()  # one policy for several tasks: the tasks it is conditioned on (`task_condition`)
    view: PolicyState = field(init=False, compare=False, repr=False)  # caches the columns per state names

    def __post_init__(self) -> None:
        selector = StateSelector(self.exclude_state_prefixes, self.state_dim)
        conditioner = TaskConditioner(self.tasks, self.state_dim, self.exclude_state_prefixes) if self.tasks else None
        object.__setattr__(self, "view", PolicyState(selector, conditioner))

    @classmethod
    def of(cls, learning: LearningConfig, action_dim: int) -> PolicySpec:
        observation = getattr(learning.policy_settings, "observation", None)
        cameras = tuple(getattr(observation, "cameras", ()))
        return cls(learning.state_dim, action_dim, cameras, tuple(learning.exclude_state_prefixes), learning.tasks)

    def descriptor_mismatch(self, descriptor: ResourceDescriptor) -> Mismatch | None:
        """What in an announcement does not fit (dimensions only where it announces them; a task-conditioned
        policy takes states of several lengths, checked at the robot's first message)."""
        dims = {"state_dim": self.state_dim, "action_dim": self.action_dim}
        if self.tasks:
            del dims["state_dim"]
        for name, wanted in dims.items():
            announced = descriptor.properties.get(name)
            if announced is not None and announced != str(wanted):
                return Mismatch(name, f"announced {announced}, the policy needs {wanted}")
        return self._cameras(descriptor.cameras, "announced")

    def observation_mismatch(self, obs: Observation) -> Mismatch | None:
        """What in an observation does not fit: the state the policy would see, the cameras it carries."""
        try:
            state = self.view.of(obs)
        except TaskConditionError as exc:
            return Mismatch("task", str(exc))
        except StateSelectionError as exc:
            return Mismatch("state_dim", str(exc))
        if state.shape[-1] != self.state_dim:
            return Mismatch(
                "state_dim", f"the robot sends {state.shape[-1]} state entries, the policy needs {self.state_dim}"
            )
        if self.cameras:
            return self._cameras(tuple(image.camera for image in obs.images), "sends")
        return None

    def transition_mismatch(self, transition: Transition) -> Mismatch | None:
        """What in a transition does not fit: its observation, its action's dimension."""
        found = self.observation_mismatch(transition.observation)
        if found is not None:
            return found
        dim = int(transition.action.data.shape[-1]) if transition.action.data.ndim else 0
        if dim != self.action_dim:
            return Mismatch("action_dim", f"the robot's actions have {dim} entries, the policy's {self.action_dim}")
        return None

    def _cameras(self, cameras: tuple[str, ...], verb: str) -> Mismatch | None:
        missing = [c for c in self.cameras if c not in cameras]
        if missing:
            return Mismatch(
                "cameras", f"the robot {verb} [{', '.join(cameras)}], the policy needs [{', '.join(self.cameras)}]"
            )
        return None
