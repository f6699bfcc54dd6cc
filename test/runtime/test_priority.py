"""A node's `nice` reaches its process: validated in the YAML, passed by the launchers, applied at start."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from user.config.strict import ConfigError
from user.deploy.commands import node_launch
from user.deploy.deployment import Deployment, NodeConfig
from user.runtime.priority import ENV_NICE

PROBE = "from user.runtime.priority import apply_niceness_from_env as a; print(a())"


def _niceness_with(value: str | None) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != ENV_NICE}
    if value is not None:
        env[ENV_NICE] = value
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60, check=True)
    return int(out.stdout.strip()), out.stderr


def test_nice_is_validated_and_passed_in_the_environment() -> None:
    deployment = Deployment("d", [])
    assert node_launch(NodeConfig("learner", "learner", nice=10), deployment).env[ENV_NICE] == "10"
    assert ENV_NICE not in node_launch(NodeConfig("robot", "robot"), deployment).env
    for bad in (-1, 20):
        with pytest.raises(ConfigError, match="nice must be in 0..19"):
            NodeConfig("learner", "learner", nice=bad)


def test_the_process_lowers_its_priority_from_the_environment() -> None:
    base = os.nice(0)
    assert _niceness_with(None)[0] == base
    assert _niceness_with(str(min(base + 5, 19)))[0] == min(base + 5, 19)
    value, err = _niceness_with("fast")
    assert value == base and "not an integer niceness" in err
    value, err = _niceness_with("42")
    assert value == base and "outside 0..19" in err
