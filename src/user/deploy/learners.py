"""Several learners in one deployment (one per task): each must be on its own, and every node must listen to the
learner it belongs to. Checked before any process starts, on both launchers.

Two learners may share nothing a learner owns: its `learner_id` (named in its weights and stats), its weights,
stats and data-credit topics, its run directory (buffer, checkpoints, progress.csv) and its robots (a robot's
episodes are acknowledged by one learner). Where the deployment has learners, a rollout takes the weights of one
(`weights_publisher` naming it, on that learner's `weights_topic`) and serves only that learner's robots; a robot
listens to its own learner's data credit, and does one of the tasks its policy is conditioned on when it is
(`learning.tasks`); a monitor listens to a learner's stats. Each mistake is one `ConfigError` naming
both nodes and the setting that differs, so two tasks never quietly train on each other's data or weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from user.config.strict import ConfigError


@dataclass(frozen=True)
class Configured:
    """One node of the deployment with its settings built (its kind's `Params`)."""

    name: str
    kind: str
    params: Any


_OWNED = (  # what no two learners may share: (setting, what it is)
    ("learner_id", "learner_id"),
    ("weights_topic", "weights topic"),
    ("stats_topic", "stats topic"),
    ("credit_topic", "data-credit topic"),
    ("run_dir", "run directory"),
)


def check_learners(nodes: Sequence[Configured]) -> None:
    """ConfigError for the first clash between learners, or the first node tied to no learner or the wrong one."""
    learners = [n for n in nodes if n.kind == "learner"]
    if not learners:
        return  # an edge site's deployment: its learner runs elsewhere
    _check_apart(learners)
    owner = {robot: learner for learner in learners for robot in learner.params.robots}
    for node in nodes:
        if node.kind == "rollout":
            _check_rollout(node, learners, owner)
        elif node.kind == "robot":
            _check_robot(node, owner)
        elif node.kind == "monitor":
            _check_monitor(node, learners)


def _check_apart(learners: list[Configured]) -> None:
    for key, what in _OWNED:
        seen: dict[str, str] = {}
        for learner in learners:
            value = str(getattr(learner.params, key))
            if value and value in seen:
                raise ConfigError(
                    f"learners {seen[value]!r} and {learner.name!r} share the {what} {value!r}: "
                    f"give each learner its own {key} (one learner per task)"
                )
            seen[value] = learner.name
    robots: dict[str, str] = {}
    for learner in learners:
        for robot in learner.params.robots:
            if robot in robots:
                raise ConfigError(
                    f"robot {robot!r} is listed by learners {robots[robot]!r} and {learner.name!r}: "
                    "a robot's episodes are stored and acknowledged by one learner"
                )
            robots[robot] = learner.name


def _check_rollout(node: Configured, learners: list[Configured], owner: dict[str, Configured]) -> None:
    p = node.params
    if not p.weights_publisher:
        if len(learners) > 1:
            names = ", ".join(str(learner.params.learner_id) for learner in learners)
            raise ConfigError(
                f"rollout {node.name!r} applies weights from any learner, and this deployment has several: "
                f"set its weights_publisher to one of {names}"
            )
        learner = learners[0]
    else:
        found = [learner for learner in learners if learner.params.learner_id == p.weights_publisher]
        if not found:
            names = ", ".join(str(learner.params.learner_id) for learner in learners)
            raise ConfigError(
                f"rollout {node.name!r}: weights_publisher {p.weights_publisher!r} is no learner of this "
                f"deployment (learner_id of its learners: {names})"
            )
        learner = found[0]
    if p.weights_from == "bus" and p.weights_topic != learner.params.weights_topic:  # link: over torch.distributed
        raise ConfigError(
            f"rollout {node.name!r} takes weights on {p.weights_topic!r}, but its learner {learner.name!r} "
            f"publishes them on {learner.params.weights_topic!r}: set the rollout's weights_topic to it"
        )
    if p.random_steps and p.stats_topic != learner.params.stats_topic:
        raise ConfigError(
            f"rollout {node.name!r} counts random steps from {p.stats_topic!r}, but its learner "
            f"{learner.name!r} publishes stats on {learner.params.stats_topic!r}: set the rollout's stats_topic to it"
        )
    for robot in p.robots:
        other = owner.get(robot)
        if other is not None and other is not learner:
            raise ConfigError(
                f"rollout {node.name!r} acts for {robot!r} with the policy of {learner.name!r}, but {robot!r} "
                f"is learned from by {other.name!r}: a robot's rollout must take its own learner's weights"
            )


def _check_robot(node: Configured, owner: dict[str, Configured]) -> None:
    p = node.params
    learner = owner.get(p.robot_id)
    tasks = learner.params.learning.tasks if learner is not None else ()
    if learner is not None and tasks and p.task not in tasks:
        raise ConfigError(
            f"robot {node.name!r} does task {p.task!r}, which the policy of its learner {learner.name!r} is not "
            f"conditioned on (learning.tasks: {', '.join(tasks)}): add it there, or change the robot's task"
        )
    if learner is None or not p.credit_topic or not learner.params.credit_topic:
        return
    if p.credit_topic != learner.params.credit_topic:
        raise ConfigError(
            f"robot {node.name!r} listens for data credit on {p.credit_topic!r}, but its learner "
            f"{learner.name!r} publishes it on {learner.params.credit_topic!r}: set the robot's credit_topic to it"
        )


def _check_monitor(node: Configured, learners: list[Configured]) -> None:
    topic = node.params.stats_topic
    if any(learner.params.stats_topic == topic for learner in learners):
        return
    topics = ", ".join(sorted({str(learner.params.stats_topic) for learner in learners}))
    raise ConfigError(
        f"monitor {node.name!r} listens for the learner's stats on {topic!r}, which no learner of this deployment "
        f"publishes (they publish on {topics}): set its stats_topic"
    )
