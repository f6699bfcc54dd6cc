"""A deployment whose learner runs as 2 gloo ranks, started by `ros2 launch` (torchrun as the learner's launch
prefix): the lead is the ROS node, the other rank follows it without ROS; both train; rank 1 killed with -9,
torchrun restarts the group, the lead comes back as the same ROS node and resumes from its checkpoint; Ctrl-C
stops every process cleanly. Real rclpy, Fast DDS on loopback, real launch."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from test.conftest import wait_until
from test.deploy.test_learner_ranks import update_calls
from test.helpers.deployments import arm_nodes, learner_node
from test.helpers.ros import launched, ros2_daemon, ros2_until
from user.runtime.status import ENV_STATUS_FILE

pytestmark = [pytest.mark.ros, pytest.mark.timeout(420)]
PORT = 29643
START_S = 180.0  # both ranks training, on a loaded 2-core machine


@pytest.fixture(scope="module", autouse=True)
def _daemon() -> Iterator[None]:
    with ros2_daemon():
        yield


def deployment(tmp_path: Path, run_dir: Path) -> Path:
    ranks = (
        f'{{processes_per_machine: 2, backend: gloo, rendezvous: "127.0.0.1:{PORT}", run_id: r{uuid.uuid4().hex[:6]}}}'
    )
    learner = learner_node(["arm_a"]).replace("    site: cloud\n", "")
    learner = learner.replace('run_dir: "{run_dir}"\n', f'run_dir: "{run_dir}/learner"\n      ranks: {ranks}\n')
    learner = learner.replace("      torch_threads: 1\n", '      torch_threads: 1\n      credit_topic: ""\n')
    arm = arm_nodes("arm_a", "", 1, robot="realtime: true, control_rate_hz: 50.0")  # never waits for the learner
    path = tmp_path / "ranks.yaml"
    path.write_text("name: ranks\nnodes:\n" + learner + arm)
    return path


def rank_pid(rank: int, status_file: Path) -> int | None:
    """The pid of learner rank `rank` of this launch (its environment names the learner's status file)."""
    marks = (f"RANK={rank}".encode(), f"{ENV_STATUS_FILE}={status_file}".encode())
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if all(mark in environ for mark in marks):
            return int(pid)
    return None


def test_ros2_launch_runs_a_two_rank_learner_that_survives_a_killed_rank(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    progress = run_dir / "learner" / "progress.csv"
    with launched(tmp_path / "launch.log", f"config:={deployment(tmp_path, run_dir)}", f"run_dir:={run_dir}") as run:
        assert run.wait_for(r"training on 2 ranks", START_S), run.output()[-4000:]
        assert wait_until(lambda: update_calls(progress) >= 100, START_S), run.output()[-4000:]
        nodes = ros2_until("node", "list", want="/learner").stdout.split()
        assert "/learner" in nodes and "/arm_a" in nodes, nodes  # one ROS node for the learner: the lead

        victim = rank_pid(1, run_dir / "logs" / "learner.status")
        assert victim is not None, "no learner rank 1 found"
        os.kill(victim, 9)
        killed_at = update_calls(progress)
        assert run.wait_for(r"restart 1\)", 120.0), run.output()[-4000:]
        assert wait_until(lambda: update_calls(progress) >= killed_at + 100, START_S), run.output()[-4000:]
        out = run.output()
        assert "resumed from" in out and out.count("training on 2 ranks") >= 2, out[-4000:]

        assert run.stop() == 0, run.output()[-4000:]
    out = run.output()
    assert "process has died" not in out, out[-4000:]
    assert out.count("process has finished cleanly") == 4, out[-4000:]  # learner (torchrun), rollout, expert, arm
    checkpoints = run_dir / "learner" / "checkpoints"
    assert (checkpoints / "latest_dcp").is_file(), sorted(p.name for p in checkpoints.iterdir())  # the final one
