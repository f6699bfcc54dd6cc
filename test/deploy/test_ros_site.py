"""A ROS 2 site joined to a Zenoh deployment through `user bridge` (issue 15): the learner and one sim arm (with
its rollout and expert) run over Zenoh under `user bringup`, in sites `cloud` and `lab_a`; a second arm, its
rollout and expert run on rclpy/DDS under `ros2 launch` with a bridge node. Both arms' demos and online
episodes reach the learner's buffer, the policy acting on the ROS arm advances (the weights crossed Zenoh ->
DDS), and the ROS arm is listed by `user hardware list` on the Zenoh side.

The ROS arm joins at run time (issue 36): the learner names only arm_z and admits `arm_*`; the ROS site is
launched once the learner has stored arm_z's episodes, and its bridge relays the robots announced at the site that
match its own `admit`. (tests/deploy/test_netns_sites.py runs the same site with the robot named in both.)"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from test.conftest import free_port, user_cmd, wait_until
from test.helpers.deployments import arm_nodes, learner_node, ros_site
from user.buffer.replay import ReplayBuffer

pytest.importorskip("mujoco")
pytestmark = [pytest.mark.ros, pytest.mark.timeout(400)]


def _zenoh_side(tmp_path: Path, cloud: int, lab: int) -> Path:
    path = tmp_path / "zenoh_side.yaml"
    path.write_text(
        f"""name: zenoh_side
domain: mixed
sites:
  cloud: {{endpoints: [tcp/127.0.0.1:{cloud}]}}
  lab_a: {{endpoints: [tcp/127.0.0.1:{lab}], connect: [cloud]}}
nodes:
{learner_node(["arm_z"], admit="arm_*")}{arm_nodes("arm_z", "lab_a", 1)}"""
    )
    return path


def _ros_side(tmp_path: Path, cloud: int) -> Path:
    path = tmp_path / "ros_side.yaml"
    path.write_text(ros_site(f"tcp/127.0.0.1:{cloud}", "mixed", admit="arm_*"))
    return path


def _stored(run: Path) -> dict[str, tuple[int, int]]:
    """Per arm: (demo episodes, the highest policy version in its online episodes)."""
    if not (run / "buffer").is_dir():
        return {}
    try:
        with ReplayBuffer.open(run / "buffer", read_only=True) as buf:
            rows = buf.storage.index.fetchall(
                "SELECT robot_id, SUM(is_demo), MAX(CASE WHEN is_demo = 0 THEN policy_version ELSE 0 END) "
                "FROM episodes GROUP BY robot_id"
            )
    except Exception:  # the learner has not created its index yet
        return {}
    return {str(r): (int(d or 0), int(v or 0)) for r, d, v in rows}


def _stop(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(90)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(10)


def test_a_ros_site_learns_with_a_zenoh_learner_through_the_bridge(tmp_path: Path) -> None:
    cloud, lab = free_port(), free_port()
    run = tmp_path / "run"
    zenoh_out, ros_out = tmp_path / "zenoh.out", tmp_path / "ros.out"
    bringup = user_cmd("bringup", str(_zenoh_side(tmp_path, cloud, lab)), "--run-dir", str(run))
    launch = ["ros2", "launch", "user", "bringup.launch.py", f"config:={_ros_side(tmp_path, cloud)}",
              f"run_dir:={tmp_path / 'ros_run'}"]  # fmt: skip
    with open(zenoh_out, "wb") as z:
        zenoh_side = subprocess.Popen(bringup, stdout=z, stderr=subprocess.STDOUT)
    ros_side: subprocess.Popen[bytes] | None = None
    try:
        running = wait_until(lambda: "arm_z" in _stored(run), 200.0, 2.0)  # a running experiment, arm_r not in it
        assert running, zenoh_out.read_text()[-3000:]
        assert "arm_r" not in _stored(run)
        with open(ros_out, "wb") as r:
            ros_side = subprocess.Popen(launch, stdout=r, stderr=subprocess.STDOUT)

        def both_learn() -> bool:
            found = _stored(run)
            return all(arm in found and found[arm][0] >= 2 and found[arm][1] >= 3 for arm in ("arm_z", "arm_r"))

        ok = wait_until(both_learn, 300.0, 2.0)
        assert ok, (_stored(run), zenoh_out.read_text()[-3000:], ros_out.read_text()[-3000:])
        env = dict(os.environ, USER_ZENOH_ROUTER=f"tcp/127.0.0.1:{cloud}", USER_DOMAIN="mixed")
        listed = subprocess.run(user_cmd("hardware", "list"), env=env, capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0 and "arm_r" in listed.stdout and "arm_z" in listed.stdout, listed
    finally:
        codes = (_stop(ros_side) if ros_side is not None else 0, _stop(zenoh_side))
    assert codes[1] == 0, zenoh_out.read_text()[-3000:]
