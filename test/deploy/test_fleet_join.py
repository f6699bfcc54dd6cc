"""Robots join and leave a running experiment (issue 36, items 1 and 2), real processes on Zenoh.

A deployment started by `user bringup` whose learner, rollout and monitor serve no robot by name, only those whose
ids match `admit: [arm_*]`; its one simulated arm (arm_a, respawned when it dies) joins that way. A second arm
(arm_b) started by hand with `user node robot` joins the running learner: its episodes are acknowledged (stored)
and the policy acts for it (its actions carry a version > 0). arm_a killed with -9 is dropped after `leave_after_s`
with one line while the learner keeps training on arm_b, the monitor shows it gone; respawned, it joins again and
continues its episode ids. An arm whose state does not fit the policy (the embodiment id appended: 18 entries, the
policy's 17) and an arm whose id the deployment does not admit are each refused with one line. After a clean stop,
an independent reader of the buffer's MCAP segments finds every episode once and whole, arm_a's ids without a gap
but the one the kill cut, and nothing of the refused arms.
"""

from __future__ import annotations

import os
import re
import signal
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from test.conftest import user_cmd, wait_until
from test.deploy.test_learner_ranks import stored_steps, update_calls
from test.helpers.bringup_process import BringupProcess, kill_left
from test.helpers.deployments import SMALL_MLP, SMALL_RLPD
from test.helpers.processes import LoggedProcess
from user.bus.zenoh_bus import ZenohBus
from user.bus.zenoh_config import DEFAULT_ROUTER_ENDPOINT, ENV_DOMAIN, ENV_ROUTER, ZenohSettings
from user.interfaces.codec import default_codec

pytestmark = pytest.mark.timeout(600)
LEAVE_AFTER_S = 2.0  # the deployment's deadline for a robot whose announcement is gone
GONE = re.compile(r"arm_a: .*\(gone since")  # the monitor's line of arm_a once it left
ROBOT = "task: peg_insertion, privileged_state: true, realtime: false"


def deployment(tmp_path: Path, domain: str) -> Path:
    fleet = f"admit: [arm_*], leave_after_s: {LEAVE_AFTER_S}"
    text = f"""name: fleet
domain: {domain}
nodes:
  - name: learner
    kind: learner
    shutdown_timeout_s: 30.0
    params:
      {fleet.replace(", ", chr(10) + "      ")}
      run_dir: "runs/fleet/learner"
      learning: &learning
        mlp: {SMALL_MLP}
        rlpd: {SMALL_RLPD.format(utd=1)}
      pacing: {{min_transitions: 64, publish_every: 10}}
      stats_period_s: 0.5
      torch_threads: 1
  - name: rollout
    kind: rollout
    params: {{{fleet}, weights_publisher: learner, learning: *learning}}
  - name: monitor
    kind: monitor
    params: {{{fleet}, period_s: 1.0}}
  - name: arm_a
    kind: robot
    respawn: true
    respawn_delay_s: 8.0
    params: {{robot_id: arm_a, {ROBOT}, seed: 1, wait_for_consumer_s: 60.0, state_dir: "{tmp_path / "state"}"}}
"""
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    return path


def robot_by_hand(tmp_path: Path, domain: str, robot_id: str, *params: str) -> LoggedProcess:
    """`user node robot` for `robot_id`, a process of its own on the deployment's router and domain."""
    env = {**os.environ, ENV_DOMAIN: domain, ENV_ROUTER: DEFAULT_ROUTER_ENDPOINT, "PYTHONUNBUFFERED": "1"}
    argv = user_cmd("node", "robot", "--name", robot_id, "-p", f"robot_id:={robot_id}", "-p", "task:=peg_insertion")
    argv += ["-p", "privileged_state:=true", "-p", "realtime:=false", "-p", "credit_topic:=''"]
    for param in params:
        argv += ["-p", param]
    return LoggedProcess(argv, env, tmp_path / f"{robot_id}.log")


def robot_pid(robot_id: str) -> int | None:
    """The pid of the robot node process named `robot_id` (started by bringup)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"robot" in argv and b"--name" in argv and argv[argv.index(b"--name") + 1] == robot_id.encode():
            return int(pid)
    return None


class Probe:
    """Listens on the deployment's graph: each robot's receipts (episodes stored) and the versions of its actions."""

    def __init__(self, domain: str, robots: list[str]) -> None:
        self.bus = ZenohBus("fleet_probe", ZenohSettings(router=[DEFAULT_ROUTER_ENDPOINT], domain=domain))
        self.codec = default_codec()
        self.acked: dict[str, set[int]] = defaultdict(set)
        self.versions: dict[str, set[int]] = defaultdict(set)
        for robot in robots:
            self.bus.create_subscription(f"/{robot}/episode_acks", "user/msg/EpisodeAck", self._ack(robot))
            self.bus.create_subscription(f"/{robot}/action", "user/msg/Action", self._action(robot))

    def _ack(self, robot: str) -> Any:
        def on(payload: bytes) -> None:
            self.acked[robot].add(int(self.codec.decode(payload, "user/msg/EpisodeAck").episode_id))

        return on

    def _action(self, robot: str) -> Any:
        def on(payload: bytes) -> None:
            self.versions[robot].add(int(self.codec.decode(payload, "user/msg/Action").policy_version))

        return on


def lines(text: str, fragment: str) -> int:
    return sum(fragment in line for line in text.splitlines())


def test_robots_join_and_leave_a_running_deployment(tmp_path: Path) -> None:
    domain = f"fleet{uuid.uuid4().hex[:6]}"  # its own: a deployment running beside the suite is not this one
    run = BringupProcess([str(deployment(tmp_path, domain))], tmp_path / "bringup.log", cwd=tmp_path)
    started: list[LoggedProcess] = []
    logs = tmp_path / "runs/fleet/logs"
    learner_log, rollout_log, monitor_log = logs / "learner.log", logs / "rollout.log", logs / "monitor.log"
    progress = tmp_path / "runs/fleet/learner/progress.csv"

    def learner() -> str:
        return learner_log.read_text(errors="replace") if learner_log.is_file() else ""

    probe: Probe | None = None
    try:
        assert wait_until(lambda: "robot arm_a joined" in learner(), 180.0), run.text()[-3000:]
        probe = Probe(domain, ["arm_a", "arm_b", "arm_c", "rogue_1"])  # the router is up
        assert wait_until(lambda: update_calls(progress) > 0 and bool(probe.acked["arm_a"]), 240.0), learner()[-3000:]
        # a second arm, a misfit and an intruder, started by hand while the run goes on
        state = f"state_dir:={tmp_path / 'state'}"
        arm_b = robot_by_hand(tmp_path, domain, "arm_b", "seed:=2", state)
        misfit = robot_by_hand(tmp_path, domain, "arm_c", "seed:=3", "embodiment_in_state:=true")
        rogue = robot_by_hand(tmp_path, domain, "rogue_1", "seed:=4")
        started += [arm_b, misfit, rogue]
        assert wait_until(lambda: "robot arm_b joined" in learner(), 120.0), learner()[-3000:]
        assert wait_until(lambda: len(probe.acked["arm_b"]) >= 2, 120.0), learner()[-3000:]  # stored
        assert wait_until(lambda: max(probe.versions["arm_b"], default=0) > 0, 60.0), probe.versions  # acted for
        assert wait_until(lambda: "refused robot arm_c: state_dim" in learner(), 120.0), learner()[-3000:]
        assert wait_until(lambda: "refused robot rogue_1: not admitted" in learner(), 60.0), learner()[-3000:]
        assert wait_until(lambda: "refused robot arm_c" in rollout_log.read_text(), 60.0)
        for process in (misfit, rogue):
            assert process.stop()[0] == 0, process.text()[-2000:]
        # arm_a killed: dropped after the deadline, the learner keeps training on arm_b, the monitor shows it gone
        victim = robot_pid("arm_a")
        assert victim is not None, "no arm_a process found"
        before_kill = max(probe.acked["arm_a"])
        os.kill(victim, signal.SIGKILL)
        assert wait_until(lambda: "robot arm_a left" in learner(), 60.0), learner()[-3000:]
        trained = update_calls(progress)
        stored_b = len(probe.acked["arm_b"])
        assert wait_until(lambda: update_calls(progress) > trained + 20, 120.0), learner()[-3000:]
        assert wait_until(lambda: len(probe.acked["arm_b"]) > stored_b, 120.0)
        assert wait_until(lambda: GONE.search(monitor_log.read_text()) is not None, 30.0)
        # respawned by bringup: joins again, continues its episode ids, its episodes are stored again
        assert wait_until(lambda: learner().count("robot arm_a joined") == 2, 180.0), learner()[-3000:]
        assert wait_until(lambda: max(probe.acked["arm_a"]) > before_kill + 1, 180.0), learner()[-3000:]
        assert arm_b.stop()[0] == 0, arm_b.text()[-2000:]
        assert run.stop() == 0, run.text()[-3000:]
    finally:
        if probe is not None:
            probe.bus.close()
        for process in started:
            if process.proc.poll() is None:
                process.proc.kill()
                process.proc.wait(10)
        kill_left([run])
    check_buffer(tmp_path / "runs/fleet/learner/buffer", learner(), before_kill)


def check_buffer(buffer: Path, text: str, before_kill: int) -> None:
    """One line per refusal and leave; every episode in the buffer once and whole, none of the refused arms."""
    for fragment in ("refused robot arm_c", "refused robot rogue_1", "robot arm_a left"):
        assert lines(text, fragment) == 1, (fragment, text[-3000:])  # one line each
    assert lines(text, "robot arm_c joined") == lines(text, "robot rogue_1 joined") == 0
    seen = stored_steps(buffer)
    assert seen and max(seen.values()) == 1, [k for k, n in seen.items() if n > 1][:5]  # nothing twice
    episodes: dict[str, dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))
    for robot, episode, step in seen:
        episodes[robot][episode].add(step)
    assert set(episodes) == {"arm_a", "arm_b"}  # nothing of the refused arms
    for robot, stored in episodes.items():
        for episode, steps in stored.items():
            assert steps == set(range(len(steps))), (robot, episode)  # each one whole
    assert sorted(episodes["arm_b"]) == list(range(len(episodes["arm_b"])))  # no episode of arm_b missing
    # arm_a: every episode but the one the kill cut (never complete, so never in its outbox)
    missing = set(range(max(episodes["arm_a"]) + 1)) - set(episodes["arm_a"])
    assert len(missing) <= 1 and all(m > before_kill for m in missing), (missing, before_kill)
