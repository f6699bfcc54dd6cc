"""A deployment whose learner runs as 2 gloo ranks under torchrun, started by `user bringup`: it trains with both
ranks; rank 1 killed with -9 mid-training, torchrun restarts the group, the lead resumes from its checkpoint and
training goes on; the robot keeps acting throughout (the learner holds no robot: no data credit); after a clean
stop, an independent reader of the buffer's MCAP segments finds every episode once, whole, with no gap, and the
robot gave none up."""

from __future__ import annotations

import csv
import os
import re
import uuid
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory

from test.conftest import wait_until
from test.helpers.bringup_process import BringupProcess, kill_left
from test.helpers.deployments import arm_nodes, learner_node
from user.buffer.disk.segments import TRANSITION_TOPIC

pytestmark = pytest.mark.timeout(420)
PORT = 29641


def deployment(tmp_path: Path) -> Path:
    rendezvous = f'"127.0.0.1:{PORT}", run_id: r{uuid.uuid4().hex[:6]}'
    ranks = f"{{processes_per_machine: 2, backend: gloo, rendezvous: {rendezvous}}}"
    learner = learner_node(["arm_a"]).replace("    site: cloud\n", "")
    learner = learner.replace('run_dir: "{run_dir}"\n', f'run_dir: "runs/ranks/learner"\n      ranks: {ranks}\n')
    learner = learner.replace("      torch_threads: 1\n", '      torch_threads: 1\n      credit_topic: ""\n')
    path = tmp_path / "ranks.yaml"
    domain = f"ranks{uuid.uuid4().hex[:6]}"  # its own: a deployment running beside the suite is not this one
    # a real-time arm: it never waits for the learner, and its episodes (100 steps at its control rate) arrive as
    # a real arm's do, so a restart of the learner fits in its outbox (20 episodes); a sim stepping as fast as it can
    # fills that outbox within a restart and gives episodes up (logged), which is what the outbox's size is for
    arm = arm_nodes("arm_a", "", 1, robot="realtime: true, control_rate_hz: 50.0")
    path.write_text(f"name: ranks\ndomain: {domain}\nnodes:\n" + learner + arm)
    return path


def update_calls(progress: Path) -> int:
    if not progress.is_file():
        return 0
    with progress.open() as f:
        rows = [r for r in csv.DictReader(f) if r.get("update_calls")]
    return int(rows[-1]["update_calls"]) if rows else 0


def rank_pid(rank: int, run_id_dir: Path) -> int | None:
    """The pid of learner rank `rank` started in `run_id_dir` (its working directory)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        ours = f"RANK={rank}".encode() in environ and f"LOCAL_RANK={rank}".encode() in environ
        if ours and cwd == str(run_id_dir):
            return int(pid)
    return None


def owed(learner_log: str, arm_log: str) -> set[str]:
    """Episodes the learner dropped as cut (the restart began or ended inside them) or the robot re-sends, that the
    learner has not stored from the robot's outbox yet."""
    cut = set(re.findall(r"dropping robot arm_a's episode (\d+) \(\d+ steps\): first step received", learner_log))
    resent = set(re.findall(r"no receipt for episode (\d+) from the learner", arm_log))
    return (cut | resent) - set(re.findall(r"stored re-sent episode (\d+) of arm_a", learner_log))


def stored_steps(buffer: Path) -> Counter[tuple[str, int, int]]:
    """(robot, episode, step) of every transition in the buffer's segments, read with mcap's own ROS 2 decoder."""
    seen: Counter[tuple[str, int, int]] = Counter()
    for segment in sorted(buffer.rglob("*.mcap")):
        with segment.open("rb") as f:
            reader = make_reader(f, decoder_factories=[DecoderFactory()])
            for _, _, _, msg in reader.iter_decoded_messages(topics=[TRANSITION_TOPIC]):
                seen[(msg.robot_id, msg.episode_id, msg.step)] += 1
    return seen


def test_a_two_rank_learner_survives_a_killed_rank_without_losing_data(tmp_path: Path) -> None:
    started: list[BringupProcess] = []
    try:
        run = BringupProcess([str(deployment(tmp_path))], tmp_path / "bringup.log", cwd=tmp_path)
        started.append(run)
        progress = tmp_path / "runs/ranks/learner/progress.csv"
        log = tmp_path / "runs/ranks/logs/learner.log"
        assert wait_until(lambda: update_calls(progress) >= 150, 180.0), run.text()[-3000:]
        assert "training on 2 ranks" in log.read_text()
        victim = rank_pid(1, tmp_path)
        assert victim is not None, "no learner rank 1 found"
        os.kill(victim, 9)
        killed_at = update_calls(progress)
        assert wait_until(lambda: "restart 1)" in log.read_text(), 120.0), log.read_text()[-3000:]
        assert wait_until(lambda: update_calls(progress) >= killed_at + 150, 180.0), log.read_text()[-3000:]
        text = log.read_text()
        assert "resumed from" in text and text.count("training on 2 ranks") >= 2
        arm_log = tmp_path / "runs/ranks/logs/arm_a.log"
        # the episodes the restart cut or missed come again from the robot's outbox (5 s after they end)
        assert wait_until(lambda: not owed(log.read_text(), arm_log.read_text()), 60.0), owed(log.read_text(), "")
        assert run.stop() == 0, run.text()[-3000:]
    finally:
        kill_left(started)
    arm_text = (tmp_path / "runs/ranks/logs/arm_a.log").read_text()
    assert "steps wait for its credit" not in arm_text and "gave up episode" not in arm_text
    seen = stored_steps(tmp_path / "runs/ranks/learner/buffer")
    assert seen and max(seen.values()) == 1, [k for k, n in seen.items() if n > 1][:5]  # nothing twice
    episodes: dict[int, set[int]] = defaultdict(set)
    for robot, episode, step in seen:
        assert robot == "arm_a"
        episodes[episode].add(step)
    assert sorted(episodes) == list(range(len(episodes))), sorted(episodes)  # no episode missing
    for episode, steps in episodes.items():
        assert steps == set(range(len(steps))), episode  # each one whole
