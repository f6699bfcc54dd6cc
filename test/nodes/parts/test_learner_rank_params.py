"""A learner rank under ros2 launch reads its settings from the parameter file launch_ros wrote for the node,
without ROS: the same settings the lead gets as ROS parameters."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from user.config.strict import from_mapping
from user.deploy.commands import launches
from user.deploy.deployment import load
from user.deploy.ros_launch import ros_launches
from user.nodes.learner import LearnerParams
from user.nodes.parts.learner_rank_params import RankParamsError, node_name, rank_params

DEPLOYMENT = """name: ranks
nodes:
  - name: learner_x
    kind: learner
    params:
      robots: [arm_a]
      ranks: {processes_per_machine: 2, backend: gloo}
      learning: {algorithm: sac, sac: {batch_size: 32}, mlp: {hidden: [16, 16]}}
      pacing: {min_transitions: 64}
"""


def launch_ros_file(tmp_path: Path, key: str, parameters: dict[str, object]) -> Path:
    """A parameter file as launch_ros writes it for a node given a dict of parameters (node.py
    `_create_params_file_from_dict`: the node's full name, or `/**`, over `ros__parameters`)."""
    path = tmp_path / "launch_params_x"
    normalized = {k: tuple(v) if isinstance(v, list) else v for k, v in parameters.items()}  # as launch_ros has them
    path.write_text(yaml.dump({key: {"ros__parameters": normalized}}, default_flow_style=False))
    return path


@pytest.mark.parametrize("key", ["/learner_x", "/**"])
def test_a_rank_reads_the_settings_the_lead_gets_as_ros_parameters(tmp_path: Path, key: str) -> None:
    path = tmp_path / "d.yaml"
    path.write_text(DEPLOYMENT)
    (ros,) = [n for n in ros_launches(load(path), tmp_path) if n.launch.kind == "learner"]
    params = launch_ros_file(tmp_path, key, ros.parameters)
    argv = ["learner", "--ros-args", "-r", "__node:=learner_x", "--params-file", str(params)]
    name, read = rank_params(argv)
    assert name == "learner_x"
    (zenoh,) = [n for n in launches(load(path)) if n.kind == "learner"]
    expected = from_mapping(LearnerParams, zenoh.parameters, where="zenoh")
    assert from_mapping(LearnerParams, read, where="ros") == expected
    assert expected.ranks.world_size == 2 and expected.learning.sac.batch_size == 32


def test_no_parameter_file_is_an_error_naming_the_node() -> None:
    with pytest.raises(RankParamsError, match="no --params-file in the command line of node 'learner_y'"):
        rank_params(["learner", "--ros-args", "-r", "__node:=learner_y"])


def test_an_unreadable_or_foreign_parameter_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(RankParamsError, match="cannot read its parameter file"):
        rank_params(["learner", "--ros-args", "--params-file", str(tmp_path / "missing.yaml")])
    other = launch_ros_file(tmp_path, "/somebody_else", {"robots": ["a"]})
    with pytest.raises(RankParamsError, match="no ros__parameters for it"):
        rank_params(["learner", "--ros-args", "-r", "__node:=learner", "--params-file", str(other)])


def test_the_node_name_follows_launch_ros_remapping() -> None:
    assert node_name(["learner", "--ros-args", "--remap", "__name:=l2"]) == "l2"
    assert node_name(["learner"]) == "learner"
