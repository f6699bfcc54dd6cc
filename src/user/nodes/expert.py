"""`expert` node: a task's scripted expert as a stand-in policy (or as a scripted "human" for tests).

It answers every observation of one robot with `Task.scripted_expert`, tagged with the observation's
episode and step. The expert decides from privileged simulator state (object poses, button positions)
that a camera policy never sees, so the robot node must run with `privileged_state: true`, which appends
the full task state to the observation's `state` under `task/...` names (see
`user.robot_loop.privileged`). Without it the expert logs one clear error and stays silent.

`role: human` publishes on the robot's intervention topic instead (intervened, source HUMAN), only for the
observation steps listed in `steps`: a deterministic stand-in for an operator in intervention tests.

`role: corrector` is the simulated person of HG-DAgger (`user.tasks.corrector`): it watches every observation and
publishes the expert's action as an intervention only while the arm has strayed from the expert's path (beyond
`corrector.takeover_m`, until it is back within `corrector.handback_m`), logging each take-over and hand-back.

With `until_episode`, the expert gives demonstrations only: at the first observation of a later episode it says
so in one line and finishes (exit code 0, status `stopped`), which its launcher never respawns nor counts as a
failure, even with `respawn: true` (`user.deploy.respawn`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Literal

from user.bus.base import BEST_EFFORT, RELIABLE, Bus
from user.config import KindSection, resolve_sections
from user.config.strict import ConfigError, setting
from user.interfaces.domain import Action, action_to_msg, observation_from_msg
from user.robot_loop.gate import SOURCE_HUMAN, SOURCE_SCRIPTED
from user.robot_loop.privileged import PrivilegedStateError, arm_and_task_state
from user.robots.base import ArmState
from user.robots.safety import SafetyConfig
from user.runtime.node import Node
from user.tasks.base import ActionScale, TaskError, TaskState
from user.tasks.corrector import Corrector, CorrectorConfig
from user.tasks.registry import TASKS, make_task


@dataclass
class ExpertParams:
    robot_id: str = setting("franka_sim", "robot to act for; topics default to /<robot_id>/...")
    task: str = setting("peg_insertion", "task whose scripted expert acts (must match the robot's)")
    task_params: object | None = setting(
        None,
        "settings of the task's config (the class `task` selects; as on the robot); none: the task's defaults",
        section=KindSection(TASKS, optional=True),
    )
    role: Literal["policy", "human", "corrector"] = setting(
        "policy",
        "policy: publish actions; human: publish interventions; corrector: interventions while the arm strays",
    )
    corrector: CorrectorConfig = setting(CorrectorConfig(), "role corrector: when it takes over and hands back")
    steps: list[int] = setting([], "role human: only answer observations of these steps (empty: all)")
    policy_version: int = setting(0, "policy version written into the actions", min=0)
    until_episode: int = setting(
        0,
        "answer only episodes with ids below this (demos before a learned policy takes over), then finish; 0 = all",
        min=0,
    )
    namespace: str = setting("", "topic prefix; empty = /<robot_id>")

    def __post_init__(self) -> None:
        resolve_sections(self)


class ExpertNode(Node):
    """Observation in, scripted action out; stateless, so any observation can be answered."""

    Params = ExpertParams

    def __init__(self, bus: Bus) -> None:
        super().__init__(bus)
        p = self.params = self.declare_parameters(ExpertParams)
        safety = SafetyConfig()  # the robot's default limits: the expert's unit action must match them
        try:
            self.task = make_task(p.task, p.task_params, ActionScale.of(safety))
        except TaskError as exc:
            raise ConfigError(str(exc)) from exc
        ns = p.namespace or f"/{p.robot_id}"
        out = f"{ns}/action" if p.role == "policy" else f"{ns}/intervention"
        self.corrector = Corrector(p.corrector) if p.role == "corrector" else None
        self._steps = set(p.steps)
        self._pub = self.create_publisher(out, "user/msg/Action", RELIABLE)
        self.create_subscription(f"{ns}/observation", "user/msg/Observation", self._on_observation, BEST_EFFORT)
        self.answered = 0
        self.decided: tuple[int, int] | None = None  # (episode, step) of the latest observation acted on or passed
        self.done = False  # the demonstrations are done: the node is finishing
        self._finishing = threading.Lock()  # observations arrive on several bus threads
        self._warned = False

    def _on_observation(self, msg: Any) -> None:
        if self.done:
            return
        obs = observation_from_msg(msg)
        if self.params.until_episode and obs.episode_id >= self.params.until_episode:
            self._finish()
            return
        if self._steps and obs.step not in self._steps:
            return
        if obs.task != self.params.task:
            self._warn_once(f"observation is for task {obs.task!r}, this expert knows {self.params.task!r}")
            return
        try:
            arm, state = arm_and_task_state(obs.state, obs.state_names)
        except PrivilegedStateError as exc:
            self._warn_once(str(exc))
            return
        if self.corrector is not None and not self._correcting(self.corrector, obs.episode_id, obs.step, arm, state):
            self.decided = (obs.episode_id, obs.step)
            return
        human = self.params.role != "policy"
        action = Action(
            robot_id=obs.robot_id,
            episode_id=obs.episode_id,
            step=obs.step,
            data=self.task.scripted_expert(arm, state),
            stamp_ns=obs.stamp_ns,
            intervened=human,
            source=SOURCE_HUMAN if human else SOURCE_SCRIPTED,
            policy_version=self.params.policy_version,
        )
        self._pub.publish(action_to_msg(action, self.codec))
        self.answered += 1
        self.decided = (obs.episode_id, obs.step)

    def _correcting(self, corrector: Corrector, episode_id: int, step: int, arm: ArmState, state: TaskState) -> bool:
        """Whether the corrector is in control at this observation (logging each take-over and hand-back)."""
        try:
            path = self.task.expert_path(arm, state)
        except TaskError as exc:
            self._warn_once(str(exc))
            return False
        before = corrector.in_control
        acting, distance = corrector.decide(episode_id, path, step)
        if acting != before:
            what = ("takes over (stalled)" if corrector.stalled_now else "takes over") if acting else "hands back"
            self.log.info(
                "corrector %s at episode %d step %d: %.3f m from the expert's path", what, episode_id, step, distance
            )
        return acting

    def _finish(self) -> None:
        """The robot is past `until_episode`: no demonstration is left to give; end the process cleanly, once."""
        with self._finishing:
            if self.done:
                return
            self.done = True
        self.log.info("demonstrations done (%d episodes); expert stopping", self.params.until_episode)
        self.request_stop()

    def _warn_once(self, message: str) -> None:
        if not self._warned:
            self.log.error("cannot act: %s", message)
            self._warned = True
