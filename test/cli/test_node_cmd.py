"""`user node KIND --describe`: every setting on a line of its own, nested ones under their dotted names."""

from __future__ import annotations

import argparse

import pytest

from user.bus.ros_params import ros_params
from user.cli import node_cmd
from user.runtime.kinds import KINDS, load_kind


def describe(kind: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    parser = argparse.ArgumentParser()
    node_cmd.add_parser(parser.add_subparsers())
    args = parser.parse_args(["node", kind, "--describe"])
    assert args.func(args) == 0
    return capsys.readouterr().out.splitlines()


def test_the_learner_s_nested_settings_are_listed_one_per_line_with_type_default_and_doc(
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines = describe("learner", capsys)
    gamma = [line for line in lines if line.startswith("learning.sac.gamma ")]
    assert gamma == ["learning.sac.gamma (float, default 0.99): discount factor (Haarnoja et al. 2018: 0.99) "
                     "[only with learning.algorithm sac]"]  # fmt: skip
    assert "learning.rlpd.num_critics (int, default 10): " in "\n".join(lines)
    assert any(line.startswith("buffer.sampler.kind (") and "default 'auto'" in line for line in lines)
    assert not any("Config(" in line for line in lines)  # no section printed as one long repr
    names = [line.split(" ", 1)[0] for line in lines]
    assert names == [p.name for p in ros_params(load_kind("learner").Params)]  # the ROS parameters' names


def test_the_robot_s_typed_sections_are_listed_leaf_by_leaf(capsys: pytest.CaptureFixture[str]) -> None:
    """No setting of the robot node is a free-form mapping: each driver's hardware, the cameras, the sim arms' safety
    and each task's parameters are listed setting by setting, each with the kinds it belongs to."""
    lines = describe("robot", capsys)
    rows = {line.split(" ", 1)[0]: line for line in lines}
    assert rows["hardware.safety.workspace_min"].endswith("[only with driver franka or franka_ros or arx]")
    assert "[only with driver franka]" in rows["hardware.controller"]
    assert rows["hardware.interface"].startswith("hardware.interface (str, default 'can0'): ")
    assert rows["camera_configs.<name>.width"].startswith("camera_configs.<name>.width (int, default 0): ")
    assert rows["safety.gripper_max"].startswith("safety.gripper_max (float, default 1.0): ")
    assert "and task peg_insertion]" in rows["task_params.clearance"]
    assert not {"hardware", "camera_configs", "safety", "task_params", "hardware.robot_id", "hardware.host"} & set(rows)
    assert not [line for line in lines if " (dict[" in line or " (object" in line or "Any" in line.split(")")[0]]


def test_every_node_kind_describes_each_setting_with_its_type_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    for kind in sorted(KINDS):
        for line in describe(kind, capsys):
            rest = line.split(" ", 1)[1]
            head, _, doc = rest.partition("): ")
            assert head.startswith("(") and ", default " in head and doc.strip(), (kind, line)
