"""Every shipped deployment (config/*.yaml) is accepted by each of its nodes, and the nodes fit together.

Each node's `params` are checked against its kind's `Params` dataclass exactly as the node will read them
(`from_mapping`, strict: unknown keys, wrong types and failed validation are errors), with `{run_dir}`
filled in as bringup does. Then the wiring: every robot a node names is a robot of the deployment, a rollout and
the learner it takes weights from share one policy, a learner behind a reward node learns from the rewarded topic,
and every parameter is something the ROS 2 launcher can pass (flat scalars or lists of one scalar type).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from user.config.flat import flatten
from user.config.strict import ConfigError, from_mapping
from user.deploy.deployment import CONFIG_DIR, Deployment, load
from user.runtime.kinds import load_kind

CONFIGS = sorted(CONFIG_DIR.glob("*.yaml"))
ROBOT_NAMING_KINDS = {"teleop", "pedal", "reward", "expert"}  # kinds with a single `robot_id` they act on
ROBOT_LIST_KINDS = {"learner", "rollout", "monitor"}  # kinds with a `robots` list


def node_params(deployment: Deployment, tmp_path: Path) -> dict[str, Any]:
    """node name -> its Params object, `{run_dir}` substituted as bringup does."""
    out = {}
    for node in deployment.nodes:
        cls = load_kind(node.kind)
        raw = {k: v.replace("{run_dir}", str(tmp_path)) if isinstance(v, str) else v for k, v in node.params.items()}
        out[node.name] = from_mapping(cls.Params, raw, where=f"{deployment.name}: node {node.name!r} ({node.kind})")
    return out


def test_there_are_configs_to_check() -> None:
    assert {p.name for p in CONFIGS} >= {"default.yaml", "real_franka.yaml"}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_node_accepts_its_params(path: Path, tmp_path: Path) -> None:
    deployment = load(path)
    params = node_params(deployment, tmp_path)
    assert set(params) == {n.name for n in deployment.nodes}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_nodes_fit_together(path: Path, tmp_path: Path) -> None:
    deployment = load(path)
    params = node_params(deployment, tmp_path)
    kinds = {n.name: n.kind for n in deployment.nodes}
    robots = {p.robot_id for name, p in params.items() if kinds[name] == "robot"}
    for name, p in params.items():
        named = set(p.robots) if kinds[name] in ROBOT_LIST_KINDS else set()
        if kinds[name] in ROBOT_NAMING_KINDS and p.robot_id:
            named.add(p.robot_id)
        assert named <= robots, f"{path.name}: node {name!r} names robots {sorted(named - robots)} that no node runs"
    learners = [p for name, p in params.items() if kinds[name] == "learner"]
    rollouts = [p for name, p in params.items() if kinds[name] == "rollout"]
    for rollout in rollouts:  # its learner: the one it takes weights from (one learner per task), else the only one
        mine = [p for p in learners if len(learners) == 1 or p.learner_id == rollout.weights_publisher]
        assert len(mine) == 1, f"{path.name}: a rollout takes weights from no learner of the deployment"
        assert rollout.learning == mine[0].learning, f"{path.name}: rollout and learner policies differ"
        assert rollout.weights_topic == mine[0].weights_topic
    rewarded = {p.robot_id for name, p in params.items() if kinds[name] == "reward" and not p.output_topic}
    for learner in learners:
        behind = rewarded & set(learner.robots)
        if behind:
            assert learner.transitions_suffix == "transitions/rewarded", (
                f"{path.name}: a reward node rewrites the transitions of {sorted(behind)}, "
                "but the learner does not learn from transitions/rewarded"
            )


def is_ros_parameter(value: Any) -> bool:
    """A value a ROS 2 parameter can hold: a scalar, or a list of scalars of one type."""
    if isinstance(value, bool | int | float | str):
        return True
    if isinstance(value, list | tuple):
        return all(isinstance(v, bool | int | float | str) for v in value) and len({type(v) for v in value}) <= 1
    return False


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_params_are_passable_as_ros_parameters(path: Path) -> None:
    for node in load(path).nodes:
        for name, value in flatten(node.params).items():
            assert is_ros_parameter(value), f"{path.name}: node {node.name!r}: {name} = {value!r} is no ROS parameter"


def test_the_real_franka_deployment() -> None:
    deployment = load("real_franka")
    kinds = {n.kind: n for n in deployment.nodes}
    assert set(kinds) == {"learner", "rollout", "robot", "reward", "pedal", "teleop", "monitor"}
    robot = load_kind("robot").Params
    arm = from_mapping(robot, kinds["robot"].params, where="real_franka")
    assert (arm.driver, arm.reward, arm.host) == ("franka", "external", "172.16.0.2")
    assert set(arm.camera_configs) == {"wrist"} and arm.camera_configs["wrist"].driver == "realsense"
    assert kinds["reward"].params["source"] == "human" and kinds["pedal"].params["source"] == "evdev"
    assert kinds["teleop"].params["device"] == "spacemouse"
    assert kinds["learner"].params["run_dir"] == "{run_dir}"
    learning = kinds["learner"].params["learning"]
    assert learning["cnn"]["observation"]["cameras"] == list(arm.camera_configs)


LEARNING_DEPLOYMENTS = [p for p in CONFIGS if any(n.kind == "learner" for n in load(p).nodes)]


@pytest.mark.parametrize("path", LEARNING_DEPLOYMENTS, ids=lambda p: p.name)
def test_the_shipped_runs_keep_the_learning_values_they_were_tuned_with(path: Path, tmp_path: Path) -> None:
    """The SAC/RLPD defaults are the published ones (gamma 0.99, target entropy -dim(A)/2 for RLPD, one actor
    step per critic step); the shipped runs were tuned with RLinf-USER's, which each file now states."""
    deployment = load(path)
    params = node_params(deployment, tmp_path)
    learners = [params[n.name] for n in deployment.nodes if n.kind == "learner"]
    for learner in learners:
        learning = learner.learning
        if path.name.startswith("vla_"):  # the VLA runs: HG-DAgger on chunks of 10, batches of 32, a cosine decay
            bc = learning.hg_dagger.bc
            assert (learning.algorithm, learning.policy_kind) == ("hg_dagger", "vla")
            if learning.vla.checkpoint is None or Path(learning.vla.checkpoint).is_dir():
                assert learning.vla.model_chunk_size() == 10
            else:  # a π0 checkpoint this machine does not have: named when the run would start
                with pytest.raises(ConfigError, match=f"{learning.vla.checkpoint}: no such directory"):
                    learning.vla.model_chunk_size()
            assert (learner.buffer.chunk_horizon, bc.batch_size, bc.lr_schedule) == (10, 32, "cosine")
            continue
        assert learning.algorithm == "rlpd"
        rlpd, action_dim = learning.rlpd, (learning.mlp if learning.policy_kind == "mlp" else learning.cnn).action_dim
        assert (rlpd.gamma, rlpd.entropy_target(action_dim), rlpd.utd_ratio, rlpd.critic_actor_ratio) == (
            0.96,
            -float(action_dim),
            4,
            4,
        )
        assert (rlpd.init_temperature, rlpd.temperature_lr, rlpd.batch_size) == (0.01, 0.0, 256)
        sampler = learning.sampler_for(learner.buffer.sampler)
        assert (sampler.kind, sampler.demo_ratio) == ("demo_ratio", 0.5)  # half of every batch from the demos


@pytest.mark.parametrize("path", LEARNING_DEPLOYMENTS, ids=lambda p: p.name)
def test_every_shipped_learner_writes_into_the_run_directory(path: Path) -> None:
    """A learner without `run_dir: "{run_dir}..."` writes to runs/learner under whatever directory bringup was
    started from, not into the run `user bringup --run-dir` names (and `user report RUN` finds nothing)."""
    for node in load(path).nodes:
        if node.kind == "learner":
            assert str(node.params.get("run_dir", "")).startswith("{run_dir}"), f"{path.name}: {node.name}"
