"""Several learners in one deployment (one per task): every clash between them, and every node tied to the wrong
learner, is one ConfigError naming both nodes and the setting, before anything starts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from test.conftest import REPO
from user.config.strict import ConfigError
from user.deploy.deployment import load
from user.deploy.node_params import check_node_params
from user.deploy.run_dir import bind

Edit = Callable[[dict[str, dict[str, Any]]], None]  # node name -> its params, changed in place


def _check(tmp_path: Path, edit: Edit, config: str = "multi_task.yaml") -> None:
    data = yaml.safe_load((REPO / "config" / config).read_text())
    edit({node["name"]: node.setdefault("params", {}) for node in data["nodes"]})
    path = tmp_path / "changed.yaml"
    path.write_text(yaml.safe_dump(data))
    check_node_params(bind(load(path), tmp_path / "run"), path)


def _refused(tmp_path: Path, edit: Edit, *expected: str, config: str = "multi_task.yaml") -> str:
    with pytest.raises(ConfigError) as caught:
        _check(tmp_path, edit, config)
    message = str(caught.value)
    for part in expected:
        assert part in message, message
    return message


def test_the_shipped_two_task_deployment_passes(tmp_path: Path) -> None:
    _check(tmp_path, lambda nodes: None)


@pytest.mark.parametrize(
    ("key", "value", "what"),
    [
        ("weights_topic", "/policy/weights", "weights topic"),
        ("stats_topic", "/learner/stats", "stats topic"),
        ("credit_topic", "/data_credit", "data-credit topic"),
        ("learner_id", "learner", "learner_id"),
        ("run_dir", "{run_dir}/shared", "run directory"),
    ],
)
def test_two_learners_sharing_what_a_learner_owns_are_refused(tmp_path: Path, key: str, value: str, what: str) -> None:
    def edit(nodes: dict[str, dict[str, Any]]) -> None:
        nodes["learner_peg"][key] = value
        nodes["learner_button"][key] = value

    _refused(tmp_path, edit, "learners 'learner_peg' and 'learner_button'", f"share the {what}", key)


def test_a_robot_of_two_learners_is_refused(tmp_path: Path) -> None:
    def edit(nodes: dict[str, dict[str, Any]]) -> None:
        nodes["learner_button"]["robots"] = ["franka_right", "franka_left"]

    _refused(tmp_path, edit, "robot 'franka_left' is listed by learners 'learner_peg' and 'learner_button'")


def _set(node: str, **values: Any) -> Edit:
    return lambda nodes: nodes[node].update(values)


def _unset(node: str, key: str) -> Edit:
    def edit(nodes: dict[str, dict[str, Any]]) -> None:
        del nodes[node][key]

    return edit


TIED_WRONG = {  # a node tied to no learner or to another task's -> the two parts of its one line
    "rollout without a publisher": (
        _unset("rollout_peg", "weights_publisher"),
        "rollout 'rollout_peg' applies weights from any learner",
        "learner_peg, learner_button",
    ),
    "rollout naming no learner": (
        _set("rollout_peg", weights_publisher="learner"),
        "rollout 'rollout_peg': weights_publisher 'learner' is no learner",
        "learner_id of its learners: learner_peg, learner_button",
    ),
    "rollout on another task's weights": (
        _set("rollout_peg", weights_topic="/button/policy/weights"),
        "rollout 'rollout_peg' takes weights on '/button/policy/weights'",
        "'learner_peg' publishes them on '/peg/policy/weights'",
    ),
    "rollout counting random steps from no learner": (
        _set("rollout_peg", random_steps=100, stats_topic="/learner/stats"),
        "rollout 'rollout_peg' counts random steps from '/learner/stats'",
        "'/peg/learner/stats'",
    ),
    "rollout acting for another task's robot": (
        _set("rollout_peg", robots=["franka_left", "franka_right"]),
        "rollout 'rollout_peg' acts for 'franka_right' with the policy of 'learner_peg'",
        "learned from by 'learner_button'",
    ),
    "robot on another task's credit": (
        _set("franka_left", credit_topic="/button/data_credit"),
        "robot 'franka_left' listens for data credit on '/button/data_credit'",
        "'learner_peg' publishes it on '/peg/data_credit'",
    ),
    "monitor on no learner's stats": (
        _unset("monitor_peg", "stats_topic"),
        "monitor 'monitor_peg' listens for the learner's stats on '/learner/stats'",
        "(they publish on /button/learner/stats, /peg/learner/stats)",
    ),
}


@pytest.mark.parametrize("case", TIED_WRONG)
def test_a_node_tied_to_no_learner_or_another_tasks_is_refused(tmp_path: Path, case: str) -> None:
    edit, *expected = TIED_WRONG[case]
    _refused(tmp_path, edit, *expected)


def test_with_one_learner_a_rollout_on_another_topic_is_refused_too(tmp_path: Path) -> None:
    _refused(
        tmp_path,
        lambda nodes: nodes["rollout"].update(weights_topic="/elsewhere"),
        "rollout 'rollout' takes weights on '/elsewhere'",
        config="default.yaml",
    )


def test_a_deployment_without_a_learner_is_not_tied_to_one(tmp_path: Path) -> None:
    data = yaml.safe_load((REPO / "config/default.yaml").read_text())
    data["nodes"] = [n for n in data["nodes"] if n["kind"] != "learner"]
    next(n for n in data["nodes"] if n["name"] == "rollout")["params"]["weights_topic"] = "/elsewhere"
    path = tmp_path / "edge.yaml"
    path.write_text(yaml.safe_dump(data))
    check_node_params(bind(load(path), tmp_path / "run"), path)


def test_a_rollout_taking_weights_over_the_link_is_not_held_to_the_weights_topic(tmp_path: Path) -> None:
    _check(tmp_path, _set("rollout_peg", weights_from="link", weights_topic="/policy/weights"))


def test_the_shipped_one_policy_deployment_passes_and_a_robot_of_another_task_is_refused(tmp_path: Path) -> None:
    config = "multi_task_one_policy.yaml"
    _check(tmp_path, lambda nodes: None, config)

    def edit(nodes: dict[str, dict[str, Any]]) -> None:
        nodes["franka_right"]["task"] = "pick_place"

    _refused(tmp_path, edit, "robot 'franka_right' does task 'pick_place'", "learner 'learner'", config=config)
