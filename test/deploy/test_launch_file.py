"""What `launch/bringup.launch.py` starts, computed without ROS (`user.deploy.ros_launch`): the same nodes as
`user bringup`, each with typed ROS parameters, its respawn limit and its shutdown allowance.

The launch file itself runs under real `ros2 launch` in test_ros_launch.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from test.conftest import REPO
from user.bus.ros_params import decode, ros_params
from user.config.strict import ConfigError, from_mapping
from user.deploy.commands import launches
from user.deploy.deployment import load
from user.deploy.respawn import NodeLife
from user.deploy.ros_launch import prepare, rviz_command, uses_sim_clock
from user.deploy.run_dir import bind
from user.runtime.kinds import load_kind
from user.runtime.runner import ENV_SHUTDOWN_DEADLINE
from user.runtime.status import ENV_STATUS_FILE, NodeStatus, read_status, write_status


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "deployment.yaml"
    path.write_text(text)
    return path


def test_an_installed_config_by_name_becomes_typed_node_launches(tmp_path: Path) -> None:
    share = tmp_path / "share" / "config"
    share.mkdir(parents=True)
    (share / "installed.yaml").write_text(
        "name: installed\nshutdown_timeout_s: 7.0\nnodes:\n"
        "  - name: talker_a\n    kind: talker\n    params: {rate_hz: 4}\n"
        "    respawn: true\n    respawn_delay_s: 2.0\n    max_respawns: 3\n    env: {FOO: bar}\n"
        "  - name: listener_a\n    kind: listener\n    shutdown_timeout_s: 30.0\n"
    )
    run_dir, (talker, listener) = prepare("installed", str(tmp_path / "run"), False, [share])
    assert run_dir == tmp_path / "run" and (run_dir / "deployment.yaml").is_file()
    assert (talker.launch.name, talker.launch.kind) == ("talker_a", "talker")
    assert talker.parameters == {"rate_hz": 4.0} and isinstance(talker.parameters["rate_hz"], float)
    assert talker.launch.respawn_delay_s == 2.0
    assert [talker.launch.may_respawn(n) for n in range(5)] == [True, True, True, False, False]
    assert not listener.launch.may_respawn(0)
    assert talker.launch.env["FOO"] == "bar"
    assert (talker.sigterm_timeout, listener.sigterm_timeout) == ("7", "30")
    # the node's own deadline for its shutdown ends before launch escalates to SIGTERM
    assert float(listener.launch.env[ENV_SHUTDOWN_DEADLINE]) == pytest.approx(29.5)


def test_a_bad_setting_fails_the_launch_naming_the_node(tmp_path: Path) -> None:
    path = _write(tmp_path, "name: x\nnodes:\n  - name: t\n    kind: talker\n    params: {rate: 5}\n")
    with pytest.raises(ConfigError, match=r"node 't' \(talker\): unknown key 'rate'"):
        prepare(str(path), str(tmp_path / "run"), False, [])


@pytest.mark.parametrize(
    ("kind", "params", "message"),
    [
        ("learner", "{learning: {algorithm: rlpd, sac: {gamma: 0.5}}}", "learning.sac: a setting of algorithm 'sac'"),
        (
            "robot",
            "{driver: sim_franka, host: 10.0.0.2}",
            "host: a setting of driver 'franka', but driver 'sim_franka'",
        ),
        ("reward", "{source: human, classifier_path: c.pt}", "classifier_path: a setting of source 'classifier'"),
    ],
)
def test_a_setting_of_an_unselected_kind_fails_the_launch_in_one_line(
    kind: str, params: str, message: str, tmp_path: Path
) -> None:
    path = _write(tmp_path, f"name: x\nnodes:\n  - name: n\n    kind: {kind}\n    params: {params}\n")
    with pytest.raises(ConfigError) as err:
        prepare(str(path), str(tmp_path / "run"), False, [])
    assert str(path) in str(err.value) and f"node 'n' ({kind}): {message}" in str(err.value)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "run").exists()  # nothing was started, no run directory made


def test_unlimited_respawns(tmp_path: Path) -> None:
    path = _write(tmp_path, "name: x\nnodes: [{name: a, kind: talker, respawn: true, max_respawns: -1}]\n")
    (launch,) = launches(load(path))
    assert launch.may_respawn(10_000)


@pytest.mark.parametrize("path", sorted((REPO / "config").glob("*.yaml")), ids=lambda p: p.name)
def test_both_launchers_give_each_node_the_same_settings(path: Path, tmp_path: Path) -> None:
    _, ros = prepare(str(path), str(tmp_path / "run"), False, [])
    zenoh = launches(bind(load(path), tmp_path / "run"))
    assert [r.launch.name for r in ros] == [z.name for z in zenoh]
    for r, z in zip(ros, zenoh, strict=True):
        spec = load_kind(z.kind).Params
        over_ros = from_mapping(spec, decode(ros_params(spec), r.parameters), where=z.name)
        assert over_ros == from_mapping(spec, z.parameters, where=z.name)
        assert r.launch.env == z.env


def test_each_node_writes_its_status_where_the_launch_file_reads_it(tmp_path: Path) -> None:
    path = _write(tmp_path, "name: x\nnodes:\n  - {name: t, kind: talker, start_timeout_s: 2.0}\n")
    run_dir, (talker,) = prepare(str(path), str(tmp_path / "run"), False, [])
    assert talker.status_file == run_dir / "logs" / "t.status" and talker.status_file.parent.is_dir()
    assert talker.env[ENV_STATUS_FILE] == str(talker.status_file)
    assert {k: v for k, v in talker.env.items() if k != ENV_STATUS_FILE} == talker.launch.env
    assert talker.start_check_s == 2.5

    life = NodeLife(talker.launch)
    life.started(0.0)
    assert talker.exit_reason() == ""  # nothing written yet
    write_status("config-error", "parameters of node 't': rate_hz: -1.0 is below the minimum", talker.status_file)
    assert talker.exit_reason() == "parameters of node 't': rate_hz: -1.0 is below the minimum"
    assert talker.late_start(life, 2.5) == "t did not report running within 2 s; stopping it"
    assert talker.late_start(life, 3.0) is None  # said once

    life.started(10.0)
    write_status("running", "", talker.status_file)
    assert talker.late_start(life, 12.5) is None and life.running
    assert talker.exit_reason() == ""  # a node that ran and was killed gave no reason


def test_the_launch_file_records_how_a_node_ended_when_the_node_could_not(tmp_path: Path) -> None:
    """What its exit handler calls (`exited`), on a shutdown too: the reason as the node gave it, and a status file
    that no longer says `running` for a process that is gone."""
    path = _write(tmp_path, "name: x\nnodes:\n  - {name: t, kind: talker}\n")
    _, (talker,) = prepare(str(path), str(tmp_path / "run"), False, [])
    write_status("running", "", talker.status_file)
    assert talker.exited(-9) == ""  # the console line names the signal: no reason repeats it
    assert read_status(talker.status_file) == NodeStatus("failed", "ended by signal SIGKILL")
    write_status("running", "", talker.status_file)
    assert talker.exited(0) == "" and read_status(talker.status_file) == NodeStatus("stopped")
    write_status("failed", "RuntimeError: boom", talker.status_file)  # what the node wrote is kept
    assert talker.exited(1) == "RuntimeError: boom"
    assert read_status(talker.status_file) == NodeStatus("failed", "RuntimeError: boom")
    talker.starting()  # a respawn killed before it wrote a status: no reason left over from the start before
    assert talker.exited(-9) == ""
    assert read_status(talker.status_file) == NodeStatus("failed", "ended by signal SIGKILL")
    talker.starting()
    assert read_status(talker.status_file) is None
    talker.starting()  # nothing left to remove: no error


def test_a_non_utf8_deployment_fails_the_launch_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "deployment.yaml"
    path.write_bytes(b"name: caf\xe9\nnodes: []\n")
    with pytest.raises(ConfigError) as err:
        prepare(str(path), str(tmp_path / "run"), False, [])
    assert str(err.value) == f"{path}: not UTF-8 text: byte 0xe9 at line 1 (offset 9); save the file as UTF-8"
    assert not (tmp_path / "run").exists()


def test_rviz_runs_on_the_sim_clock_when_a_robot_publishes_it(tmp_path: Path) -> None:
    _, default = prepare(str(REPO / "config" / "default.yaml"), str(tmp_path / "a"), False, [REPO / "config"])
    _, talk = prepare(str(REPO / "config" / "talker_listener.yaml"), str(tmp_path / "b"), False, [REPO / "config"])
    assert uses_sim_clock(default) and not uses_sim_clock(talk)
    assert rviz_command("x.rviz", True) == ["rviz2", "-d", "x.rviz", "--ros-args", "-p", "use_sim_time:=true"]
    assert rviz_command("x.rviz", False)[-1] == "use_sim_time:=false"
    assert (REPO / "config" / "user.rviz").is_file()
