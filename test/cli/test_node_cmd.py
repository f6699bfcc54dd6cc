"""`user node KIND --describe`: every setting on a line of its own, nested ones under their dotted names."""

from __future__ import annotations

import argparse

import pytest

from user.bus.ros_params import ros_params
from user.cli import node_cmd
from user.runtime.kinds import load_kind


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
