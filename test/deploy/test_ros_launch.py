"""The package as a ROS 2 lab uses it: built by colcon, started by `ros2 launch`, inspected with `ros2 topic`
and `ros2 param`, stopped with Ctrl-C. Real rclpy, Fast DDS on loopback, real launch and ros2cli.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from test.conftest import REPO
from test.helpers.ros import install_only_env, launched, ros2, ros2_daemon, ros2_until

pytestmark = pytest.mark.ros

START_S = 120.0  # a deployment's nodes running, on a loaded 2-core machine


@pytest.fixture(scope="module", autouse=True)
def _daemon() -> Iterator[None]:
    with ros2_daemon():
        yield


def said(proc: subprocess.CompletedProcess[str]) -> str:
    """What a ros2 verb printed (some verbs report failures on stderr)."""
    return proc.stdout + proc.stderr


def install_dir() -> Path:
    return Path(os.environ["USER_ROS_INSTALL"])


def test_colcon_installs_an_ament_package() -> None:
    prefix = install_dir()
    share = prefix / "share" / "user"
    assert (prefix / "share" / "ament_index" / "resource_index" / "packages" / "user").is_file()
    assert (share / "package.xml").is_file() and (share / "launch" / "bringup.launch.py").is_file()
    assert {p.name for p in (share / "config").glob("*.yaml")} == {p.name for p in (REPO / "config").glob("*.yaml")}
    assert {p.stem for p in (share / "msg").glob("*.msg")} == {p.stem for p in (REPO / "msg").glob("*.msg")}
    assert os.access(prefix / "lib" / "user" / "user_node", os.X_OK)
    package = next((prefix / "lib").glob("python3*/site-packages/user"))
    assert (package / "msg" / "_transition.py").is_file() and (package / "srv" / "_reset.py").is_file()
    assert (package / "nodes" / "learner.py").is_file()  # our sources beside the generated modules
    assert "online policy learning" in (package / "__init__.py").read_text()  # ours, not rosidl's empty one


def test_colcon_test_runs_the_ros_runtime_tests() -> None:
    """The BUILD_TESTING block registers the `ros` tests with ctest (what `colcon test` runs)."""
    build = install_dir().parents[1] / "build" / "user"
    listed = subprocess.run(["ctest", "-N", "--test-dir", str(build)], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and "ros_runtime" in listed.stdout, listed.stdout + listed.stderr
    registered = (build / "CTestTestfile.cmake").read_text()
    assert 'PYTEST_ADDOPTS=-m \\"ros and not slow\\"' in registered


def test_interfaces_are_known_to_ros2_interface() -> None:
    shown = ros2("interface", "show", "user/msg/Transition")
    assert shown.returncode == 0, shown.stderr
    assert "Observation observation" in shown.stdout and "bool intervened" in shown.stdout


def test_talker_listener_from_the_install_is_seen_by_ros2_tools(tmp_path: Path) -> None:
    env = install_only_env()
    with launched(
        tmp_path / "launch.log", "config:=talker_listener.yaml", f"run_dir:={tmp_path / 'run'}", env=env
    ) as run:
        assert run.wait_for(r"I heard", START_S), run.output()
        echo = ros2("topic", "echo", "--once", "/chatter", "std_msgs/msg/String", env=env)
        assert echo.returncode == 0 and re.search(r"data: '?Hello World: \d+", echo.stdout), echo.stdout + echo.stderr

        got = ros2_until("param", "get", "/talker", "rate_hz", want="value is", env=env)
        assert "Double value is: 2.0" in got.stdout, got.stdout + got.stderr
        described = ros2_until("param", "describe", "/talker", "topic", want="Type", env=env).stdout
        assert "Type: string" in described and "topic to publish on" in described and "Read only: true" in described
        refused = ros2("param", "set", "/talker", "topic", "/elsewhere", env=env)
        assert "Setting parameter failed" in said(refused) and "read-only" in said(refused), said(refused)
        changed = ros2("param", "set", "/talker", "text", "Changed", env=env)
        assert "Set parameter successful" in changed.stdout, changed.stdout + changed.stderr
        assert run.wait_for(r'I heard: "Changed: \d+"', 10.0), "the live text did not reach the listener"
        too_fast = ros2("param", "set", "/talker", "rate_hz", "1000000.0", env=env)
        assert "Setting parameter failed" in said(too_fast), said(too_fast)

        assert run.stop() == 0, run.output()
    out = run.output()
    assert out.count("process has finished cleanly") == 2, out
    assert "process has died" not in out


def test_a_node_is_respawned_up_to_its_limit(tmp_path: Path) -> None:
    config = tmp_path / "respawn.yaml"
    config.write_text(
        "name: respawn\nnodes:\n"
        "  - {name: talker, kind: talker, respawn: true, respawn_delay_s: 0.2, max_respawns: 1, required: false}\n"
        "  - {name: listener, kind: listener}\n"
    )
    with launched(tmp_path / "launch.log", f"config:={config}", f"run_dir:={tmp_path / 'run'}") as run:
        assert run.wait_for(r"I heard", START_S), run.output()
        first = run.pids()["user_node-1"]
        os.kill(first, signal.SIGKILL)
        respawning = r"talker exited with signal SIGKILL; respawning in 0\.2 s \(respawn 1 of 1\)"
        assert run.wait_for(respawning, 20.0), run.output()
        assert run.wait_for(r"process started with pid \[\d+\]", 5.0)
        deadline = time.monotonic() + 30.0
        while len(run.pids()) < 3 and time.monotonic() < deadline:  # the respawned talker is user_node-3
            time.sleep(0.2)
        second = run.pids().get("user_node-3")
        assert second and second != first, run.output()
        deadline = time.monotonic() + 30.0  # the second talker's own "running" line, not the first's
        while len(re.findall(r"node talker \(talker\) running", run.output())) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(re.findall(r"node talker \(talker\) running", run.output())) == 2, run.output()
        os.kill(second, signal.SIGKILL)
        gone = r"talker exited with signal SIGKILL; not respawned \(gave up after 1 respawns\); it is optional"
        assert run.wait_for(gone, 20.0), run.output()
        time.sleep(1.0)
        assert len(run.pids()) == 3  # no third talker
        assert run.proc.poll() is None  # an optional node: the rest runs on
        run.stop()


def test_a_configuration_error_is_not_respawned_and_ends_the_launch_with_its_reason(tmp_path: Path) -> None:
    """A setting only the node itself can check (its classifier file is missing): exit code 2, the reason in one
    line, no respawn although `respawn` is set, and the launch ends with code 1 (the node is required)."""
    config = tmp_path / "broken.yaml"
    config.write_text(
        "name: broken\nnodes:\n"
        "  - {name: listener, kind: listener}\n"
        "  - {name: judge, kind: reward, respawn: true, respawn_delay_s: 0.1,\n"
        f"     params: {{robot_id: a, source: classifier, classifier_path: {tmp_path / 'missing.pt'}}}}}\n"
    )
    with launched(tmp_path / "launch.log", f"config:={config}", f"run_dir:={tmp_path / 'run'}") as run:
        code = run.proc.wait(START_S)
        out = run.output()
    assert code == 1, out
    assert re.search(
        r"judge exited with code 2 \(configuration error\): classifier_path '.*missing\.pt'.*; not respawned: the "
        r"same configuration fails the same way; it is required: stopping the deployment",
        out,
    ), out
    assert "respawning" not in out and len(re.findall(r"process started with pid", out)) == 2


def test_the_default_deployment_runs_on_rclpy(tmp_path: Path) -> None:
    """Every node of config/default.yaml on the ROS runtime: robots' topics on DDS, parameters, clean stop."""
    run_dir = tmp_path / "run"
    with launched(tmp_path / "launch.log", f"run_dir:={run_dir}") as run:
        assert run.wait_for(r"\[learner\]: learning peg_state", START_S), run.output()
        want = "/franka_right/episode_events [user/msg/EpisodeEvent]"
        listed = ros2_until("topic", "list", "-t", want=want).stdout
        for robot in ("franka_left", "franka_right"):
            for topic, typename in (
                ("observation", "user/msg/Observation"),
                ("action", "user/msg/Action"),
                ("transitions", "user/msg/Transition"),
                ("episode_events", "user/msg/EpisodeEvent"),
            ):
                assert f"/{robot}/{topic} [{typename}]" in listed, listed
        assert "/policy/weights [user/msg/WeightChunk]" in listed
        echo = ros2("topic", "echo", "--once", "/franka_left/transitions", "user/msg/Transition")
        assert echo.returncode == 0 and "robot_id: franka_left" in echo.stdout, echo.stdout[-2000:] + echo.stderr

        algorithm = ros2_until("param", "get", "/learner", "learning.algorithm", want="value is")
        assert "String value is: rlpd" in algorithm.stdout, algorithm.stdout + algorithm.stderr
        gamma = ros2("param", "describe", "/learner", "learning.rlpd.gamma").stdout
        assert "Type: double" in gamma and "Read only: true" in gamma, gamma
        refused = ros2("param", "set", "/learner", "learning.algorithm", "sac")
        assert "Setting parameter failed" in said(refused) and "read-only" in said(refused), said(refused)
        nodes = ros2_until("node", "list", want="/learner").stdout.split()
        assert {"/learner", "/rollout", "/franka_left", "/franka_right", "/monitor"} <= set(nodes), nodes

        assert run.stop() == 0, run.output()[-5000:]
    out = run.output()
    assert "process has died" not in out, out[-5000:]
    assert out.count("process has finished cleanly") == 7, out[-5000:]
    assert (run_dir / "checkpoints" / "latest.pt").is_file()  # the learner's final checkpoint, within its allowance


def test_rviz_true_opens_rviz2_with_the_installed_config(tmp_path: Path) -> None:
    """`rviz:=true` runs rviz2 with share/user/config/user.rviz (an rviz2 on PATH that records its arguments
    stands in: rviz2 itself is not installable here), on the wall clock for a deployment without /clock."""
    fake = tmp_path / "bin" / "rviz2"
    fake.parent.mkdir()
    seen = tmp_path / "rviz2.args"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {seen}\nsleep 60\n')
    fake.chmod(0o755)
    env = {**install_only_env(), "PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}"}
    config = tmp_path / "talk.yaml"
    config.write_text("name: talk\nnodes:\n  - {name: talker, kind: talker}\n")
    with launched(tmp_path / "launch.log", f"config:={config}", f"run_dir:={tmp_path / 'run'}", "rviz:=true",
                  env=env) as run:  # fmt: skip
        deadline = time.monotonic() + START_S
        while not seen.exists() and time.monotonic() < deadline and run.proc.poll() is None:
            time.sleep(0.2)
        assert seen.exists(), run.output()
        args = seen.read_text().split("\n")
        assert args[0] == "-d" and args[1] == str(install_dir() / "share" / "user" / "config" / "user.rviz")
        assert Path(args[1]).is_file()
        assert "use_sim_time:=false" in args
        run.stop()
