"""`user bringup` of a learning deployment as separate processes over Zenoh: router, robot (sim Franka, peg
insertion, fast lockstep), scripted-expert demos, learner (RLPD, persistent buffer), rollout, monitor.

1. The run goes: demos and online episodes reach the buffer, the policy version acting on the robot
   advances, progress.csv / learning_curve.png / TensorBoard / checkpoints appear; SIGINT stops it cleanly.
2. `user bringup --resume RUN_DIR` continues: the learner resumes from its checkpoint counters, the robot
   continues its episode numbering, and no episode stored before the stop is lost.
3. kill -9 of the learner mid-run: the supervisor respawns it, it recovers the buffer (the open MCAP segment
   without footer) and its last checkpoint; every episode committed before the kill is still there, and the
   episodes the robot completed while the learner was down arrive too (the robot re-sends episodes without
   a receipt): the stored episode ids have no holes.
"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from test.conftest import free_port, user_cmd, wait_until
from user.buffer.replay import ReplayBuffer

pytest.importorskip("mujoco")
pytestmark = pytest.mark.timeout(300)

ROBOT = "arm_e2e"


def _deployment(tmp_path: Path, endpoint: str) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text(
        f"""name: pipeline_e2e
router: {{endpoints: [{endpoint}], start: auto}}
nodes:
  - name: learner
    kind: learner
    respawn: true
    shutdown_timeout_s: 30.0   # a final checkpoint and the buffer's last segment are written at exit
    respawn_delay_s: 0.5
    params:
      robots: [{ROBOT}]
      run_dir: "{{run_dir}}"
      learning: &learning
        mlp: {{state_dim: 17, action_dim: 7, hidden: [64, 64]}}
        rlpd: {{num_critics: 2, critic_hidden: [64, 64], batch_size: 64, utd_ratio: 2}}
      pacing: {{min_transitions: 64, publish_every: 10}}
      checkpoint_period_s: 2.0
      stats_period_s: 0.5
      torch_threads: 1
  - name: rollout
    kind: rollout
    params: {{robots: [{ROBOT}], learning: *learning, start_episode: 2}}
  - name: expert
    kind: expert
    params: {{robot_id: {ROBOT}, task: peg_insertion, until_episode: 2}}
  - name: robot
    kind: robot
    params: {{robot_id: {ROBOT}, task: peg_insertion, realtime: false, privileged_state: true,
             wait_for_consumer_s: 30.0}}
  - name: monitor
    kind: monitor
    params: {{robots: [{ROBOT}], period_s: 1.0}}
"""
    )
    return path


class Bringup:
    def __init__(self, args: list[str], out: Path) -> None:
        self.out = out
        self._file = open(out, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(user_cmd("bringup", *args), stdout=self._file, stderr=subprocess.STDOUT)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(60)
        finally:
            self._file.close()


@pytest.fixture
def bringups() -> Iterator[list[Bringup]]:
    started: list[Bringup] = []
    yield started
    for b in started:
        if b.proc.poll() is None:
            b.proc.kill()
            b.proc.wait(10)


def _episodes(run: Path) -> dict[int, tuple[bool, set[int]]]:
    """Stored episodes of the robot: episode id -> (is demo, policy versions that acted)."""
    if not (run / "buffer").is_dir():
        return {}
    try:
        with ReplayBuffer.open(run / "buffer", read_only=True) as buf:
            rows = buf.storage.index.fetchall(
                "SELECT episode_id, is_demo, policy_version FROM transitions WHERE robot_id = ?", (ROBOT,)
            )
    except Exception:  # the learner has not created its index yet
        return {}
    out: dict[int, tuple[bool, set[int]]] = {}
    for episode_id, demo, version in rows:
        out.setdefault(int(episode_id), (bool(demo), set()))[1].add(int(version))
    return out


def _progress(run: Path) -> list[dict[str, str]]:
    path = run / "progress.csv"
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _log(run: Path, node: str) -> str:
    path = run / "logs" / f"{node}.log"
    return path.read_text(errors="replace") if path.exists() else ""


def test_run_resume_and_learner_kill(tmp_path: Path, bringups: list[Bringup]) -> None:
    config = _deployment(tmp_path, f"tcp/127.0.0.1:{free_port()}")
    run = tmp_path / "run"
    first = Bringup([str(config), "--run-dir", str(run)], tmp_path / "bringup.out")
    bringups.append(first)

    def advanced() -> bool:
        eps = _episodes(run)
        online = [max(v) for demo, v in eps.values() if not demo]
        return sum(demo for demo, _ in eps.values()) >= 2 and len(online) >= 3 and max(online) >= 3

    assert wait_until(advanced, 150.0, 1.0), (tmp_path / "bringup.out").read_text() + _log(run, "learner")
    assert first.stop() == 0, (tmp_path / "bringup.out").read_text()
    before = _episodes(run)
    assert all(demo == (e < 2) for e, (demo, _) in before.items())
    assert all(len(v) == 1 for demo, v in before.values() if not demo)  # one version per episode
    rows = _progress(run)
    assert rows and int(rows[-1]["update_calls"]) > 0 and int(rows[-1]["policy_version"]) >= 3
    assert (run / "learning_curve.png").is_file() and (run / "checkpoints" / "latest.pt").is_file()
    assert any((run / "tensorboard").iterdir()) and (run / "deployment.yaml").is_file()
    saved_calls = int(rows[-1]["update_calls"])

    # 2. resume: same run directory, counters and episode ids continue, nothing stored is lost
    second = Bringup(["--resume", str(run)], tmp_path / "bringup.out")
    bringups.append(second)
    last_before = max(before)
    assert wait_until(lambda: max(_episodes(run)) > last_before + 1, 120.0, 1.0), _log(run, "learner")
    assert "resumed from" in _log(run, "learner")
    assert f"continues at episode {last_before + 1}" in (tmp_path / "bringup.out").read_text()
    resumed_rows = _progress(run)[len(rows) :]
    assert resumed_rows and min(int(r["update_calls"]) for r in resumed_rows) >= saved_calls

    # 3. kill -9 of the learner: respawned, recovered, every committed episode still there
    committed = set(_episodes(run))
    learner_pids = [int(line.split("(pid ")[1].split(")")[0]) for line in
                    (tmp_path / "bringup.out").read_text().splitlines() if "started learner (pid" in line]  # fmt: skip
    os.kill(learner_pids[-1], signal.SIGKILL)
    assert wait_until(lambda: _log(run, "learner").count("resumed from") >= 2, 60.0, 0.5), _log(run, "learner")
    assert wait_until(lambda: len(_episodes(run)) > len(committed) + 1, 120.0, 1.0), _log(run, "learner")
    assert committed <= set(_episodes(run))

    def contiguous() -> bool:
        ids = sorted(_episodes(run))
        return ids == list(range(ids[0], ids[-1] + 1)) and ids[-1] > max(committed) + 2

    assert wait_until(contiguous, 60.0, 1.0), (sorted(_episodes(run)), _log(run, "robot")[-3000:])
    assert "re-sent episode" in _log(run, "learner") or "no receipt" not in _log(run, "robot")
    assert second.stop() == 0, (tmp_path / "bringup.out").read_text()
