"""A learning deployment over three secured sites (issue 15): the learner in `cloud`, one sim arm with its
own rollout and expert in each of `lab_a` and `lab_b`, every link TLS with mutual authentication, the routers'
access control on. Both arms' demos and online episodes reach the learner's buffer through the links, and the
policy acting on each arm advances (the weights cross cloud -> lab and pass the labs' routers)."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from test.conftest import free_port, user_cmd, wait_until
from test.helpers.deployments import arm_nodes, learner_node
from user.buffer.replay import ReplayBuffer

pytest.importorskip("mujoco")
pytestmark = pytest.mark.timeout(300)

ARMS = {"lab_a": "arm_a", "lab_b": "arm_b"}


def _deployment(tmp_path: Path) -> Path:
    ports = {site: free_port() for site in ("cloud", *ARMS)}
    path = tmp_path / "sites.yaml"
    path.write_text(
        f"""name: sites_e2e
domain: e2e
security: {{certs_dir: {tmp_path / "certs"}}}
sites:
  cloud: {{endpoints: [tls/127.0.0.1:{ports["cloud"]}]}}
  lab_a: {{endpoints: [tls/127.0.0.1:{ports["lab_a"]}], connect: [cloud]}}
  lab_b: {{endpoints: [tls/127.0.0.1:{ports["lab_b"]}], connect: [cloud]}}
nodes:
{learner_node(list(ARMS.values()))}{"".join(arm_nodes(arm, site, k) for k, (site, arm) in enumerate(ARMS.items()))}"""
    )
    return path


def _versions(run: Path) -> dict[str, tuple[int, set[int]]]:
    """Per arm: (demo episodes stored, policy versions that acted in its online episodes)."""
    if not (run / "buffer").is_dir():
        return {}
    try:
        with ReplayBuffer.open(run / "buffer", read_only=True) as buf:
            rows = buf.storage.index.fetchall("SELECT robot_id, episode_id, is_demo, policy_version FROM transitions")
    except Exception:  # the learner has not created its index yet
        return {}
    out: dict[str, tuple[set[int], set[int]]] = {}
    for robot, episode, demo, version in rows:
        demos, versions = out.setdefault(str(robot), (set(), set()))
        (demos.add(int(episode)) if demo else versions.add(int(version)))
    return {robot: (len(demos), versions) for robot, (demos, versions) in out.items()}


def test_learning_across_three_secured_sites(tmp_path: Path) -> None:
    config = _deployment(tmp_path)
    made = subprocess.run(user_cmd("certs", str(tmp_path / "certs"), "--deployment", str(config)),
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert made.returncode == 0, made.stderr
    run = tmp_path / "run"
    out = tmp_path / "bringup.out"
    with open(out, "wb") as f:
        proc = subprocess.Popen(user_cmd("bringup", str(config), "--run-dir", str(run)), stdout=f, stderr=f)

    def both_advanced() -> bool:
        found = _versions(run)
        return all(a in found and found[a][0] >= 2 and max(found[a][1], default=0) >= 3 for a in ARMS.values())

    try:
        assert wait_until(both_advanced, 200.0, 1.0), (out.read_text(), _versions(run))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        code = proc.wait(90)
    assert code == 0, out.read_text()
    text = out.read_text()
    assert "router.cloud" in text and "router.lab_a" in text and "router.lab_b" in text
    assert "refused" not in (run / "logs" / "rollout_arm_a.log").read_text()  # the learner's weights pass
