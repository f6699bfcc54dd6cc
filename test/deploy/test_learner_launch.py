"""How a learner with ranks is started: `user bringup` runs torchrun (this machine's ranks, the home machine's
marker) and every other node as before; the ROS launch puts torchrun before the node's executable (launch_ros'
`prefix`), so every rank runs the node's own command line."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from user.config.strict import ConfigError
from user.deploy.commands import launches
from user.deploy.deployment import load
from user.deploy.ros_launch import ros_launches
from user.distributed.ranks import HOME_ENV

DEPLOYMENT = """name: ranks
nodes:
  - name: learner
    kind: learner
    params:
      robots: [arm_a]
      ranks: {ranks}
  - name: arm_a
    kind: robot
    params: {{robot_id: arm_a, task: peg_insertion}}
"""


def deployment(tmp_path: Path, ranks: str) -> Path:
    path = tmp_path / "d.yaml"
    path.write_text(DEPLOYMENT.format(ranks=ranks))
    return path


def test_a_learner_with_ranks_is_started_by_torchrun_at_home(tmp_path: Path) -> None:
    nodes = {n.name: n for n in launches(load(deployment(tmp_path, "{processes_per_machine: 2, backend: gloo}")))}
    learner, robot = nodes["learner"], nodes["arm_a"]
    command = learner.zenoh_command()
    assert command[1:3] == ["-m", "user.distributed.launch"]
    assert "--nproc-per-node=2" in command and "--rdzv-conf=is_host=true" in command
    assert command[command.index("--module") + 1 :][:5] == ["user", "node", "learner", "--name", "learner"]
    assert learner.env[HOME_ENV] == "1"
    assert robot.ranks is None and HOME_ENV not in robot.env
    assert robot.zenoh_command()[1:5] == ["-m", "user", "node", "robot"]


def test_one_process_is_todays_learner(tmp_path: Path) -> None:
    (learner,) = [n for n in launches(load(deployment(tmp_path, "{processes_per_machine: 1}"))) if n.kind == "learner"]
    assert learner.ranks is None and learner.zenoh_command()[1:5] == ["-m", "user", "node", "learner"]


def test_ros_launch_starts_the_learners_ranks_with_torchrun_before_its_executable(tmp_path: Path) -> None:
    nodes = {n.launch.name: n for n in ros_launches(load(deployment(tmp_path, "{processes_per_machine: 2}")), tmp_path)}
    prefix = shlex.split(nodes["learner"].prefix or "")
    assert prefix[1:3] == ["-m", "user.distributed.launch"] and "--nproc-per-node=2" in prefix
    assert prefix[-1] == "--no-python" and "--module" not in prefix  # the node's executable follows as it is
    assert nodes["learner"].env[HOME_ENV] == "1"
    assert nodes["arm_a"].prefix is None  # every other node as before


def test_bad_ranks_settings_name_the_node(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="rendezvous"):
        launches(load(deployment(tmp_path, '{processes_per_machine: 2, rendezvous: "nowhere"}')))
