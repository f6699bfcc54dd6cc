"""`user node robot` + `user node expert` as separate processes over a real Zenoh router.

The robot (simulated Franka, button press, fast lockstep mode) publishes transitions and episode events
that a subscriber in this test receives; episodes end with success. A scripted "human" (the expert in
role human, for chosen steps) overrides the policy: exactly those steps carry intervened=True, source HUMAN.
A robot node killed (kill -9) and started again continues its episode ids: no id twice, no demo redone. An
expert whose robot is past its `until_episode` finishes: one line, exit code 0, status `stopped`.
"""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from test.conftest import user_cmd, wait_until
from test.helpers.processes import LoggedProcess, started_processes
from user.bus.zenoh_bus import ZenohBus
from user.interfaces.domain import Transition, transition_from_msg
from user.interfaces.episode_events import EpisodeEvent, EpisodeKind, episode_event_from_msg
from user.robot_loop.gate import SOURCE_HUMAN, SOURCE_SCRIPTED
from user.runtime.node import Node
from user.runtime.status import ENV_STATUS_FILE, NodeStatus, read_status

pytestmark = pytest.mark.timeout(60)


Proc = LoggedProcess


@pytest.fixture
def procs(zenoh_env: dict[str, str], tmp_path: Path) -> Iterator[Callable[..., Proc]]:
    yield from started_processes(lambda args: user_cmd("node", *args), zenoh_env, tmp_path)


class Recorder:
    """Collects a robot's transitions and episode events (bus threads append; the test reads)."""

    def __init__(self, bus: ZenohBus, robot: str) -> None:
        self.node = Node(bus)
        self.transitions: list[Transition] = []
        self.events: list[EpisodeEvent] = []
        self._lock = threading.Lock()
        self.node.create_subscription(f"/{robot}/transitions", "user/msg/Transition", self._on_transition)
        self.node.create_subscription(f"/{robot}/episode_events", "user/msg/EpisodeEvent", self._on_event)

    def _on_transition(self, msg: Any) -> None:
        with self._lock:
            self.transitions.append(transition_from_msg(msg))

    def _on_event(self, msg: Any) -> None:
        with self._lock:
            self.events.append(episode_event_from_msg(msg))

    def ended(self) -> list[EpisodeEvent]:
        with self._lock:
            return [e for e in self.events if e.kind == EpisodeKind.END]

    def episode(self, episode_id: int) -> list[Transition]:
        with self._lock:
            return sorted((t for t in self.transitions if t.episode_id == episode_id), key=lambda t: t.step)


def _robot_args(robot: str) -> list[str]:
    return [
        "robot", "--name", f"{robot}_node", "-p", f"robot_id:={robot}", "-p", "task:=button_press",
        "-p", "realtime:=false", "-p", "privileged_state:=true", "-p", "first_episode_id:=100",
    ]  # fmt: skip


def _complete_episodes(rec: Recorder, count: int) -> list[tuple[EpisodeEvent, list[Transition]]]:
    """Ended episodes (from the second on: the first may have started before we subscribed) whose
    transitions all arrived."""
    out = []
    for end in rec.ended():
        steps = rec.episode(end.episode_id)
        if end.episode_id > 100 and len(steps) == end.steps:
            out.append((end, steps))
    return out[:count] if len(out) >= count else []


def test_robot_and_expert_processes_stream_successful_episodes(
    procs: Callable[..., Proc], make_bus: Callable[..., ZenohBus]
) -> None:
    robot = f"arm_{uuid.uuid4().hex[:6]}"
    rec = Recorder(make_bus("recorder"), robot)
    robot_proc = procs(*_robot_args(robot))
    expert = procs("expert", "--name", f"{robot}_expert", "-p", f"robot_id:={robot}", "-p", "task:=button_press",
                   "-p", "policy_version:=3")  # fmt: skip
    assert wait_until(lambda: bool(_complete_episodes(rec, 2)), 40.0, 0.05), robot_proc.text() + expert.text()
    for end, steps in _complete_episodes(rec, 2):
        assert end.success and end.interventions == 0
        assert [t.step for t in steps] == list(range(end.steps))
        assert steps[-1].terminated and steps[-1].success and not any(t.done for t in steps[:-1])
        for t in steps:
            assert t.robot_id == robot and t.task == "button_press" and t.episode_id == end.episode_id
            assert t.action.source == SOURCE_SCRIPTED and not t.action.intervened and t.is_demo
            assert t.action.policy_version == 3
            assert t.next_observation.step == t.step + 1
            assert len(t.observation.state) == len(t.observation.state_names) > 14
    assert robot_proc.stop(signal.SIGTERM)[0] == 0, robot_proc.text()
    assert expert.stop(signal.SIGTERM)[0] == 0, expert.text()


def test_scripted_human_overrides_exactly_the_chosen_steps(
    procs: Callable[..., Proc], make_bus: Callable[..., ZenohBus]
) -> None:
    robot = f"arm_{uuid.uuid4().hex[:6]}"
    rec = Recorder(make_bus("recorder"), robot)
    human_steps = [1, 2, 3]
    robot_proc = procs(*_robot_args(robot), "-p", "action_timeout_s:=5.0")
    # The human answers the same observations as the policy, for its steps only. The robot waits for the
    # policy's action for each step; so that the human's is there first, the policy answers only the others
    # and the human's steps fall back to the intervention within the robot's wait.
    policy_steps = [s for s in range(60) if s not in human_steps]
    procs("expert", "--name", f"{robot}_policy", "-p", f"robot_id:={robot}", "-p", "task:=button_press",
          "-p", f"steps:={policy_steps}")  # fmt: skip
    procs("expert", "--name", f"{robot}_human", "-p", f"robot_id:={robot}", "-p", "task:=button_press",
          "-p", "role:=human", "-p", f"steps:={human_steps}")  # fmt: skip
    assert wait_until(lambda: bool(_complete_episodes(rec, 2)), 40.0, 0.05), robot_proc.text()
    for end, steps in _complete_episodes(rec, 2):
        assert end.success, robot_proc.text()
        flagged = [t.step for t in steps if t.action.intervened]
        assert flagged == human_steps
        assert end.interventions == len(human_steps)
        for t in steps:
            assert t.action.source == (SOURCE_HUMAN if t.step in human_steps else SOURCE_SCRIPTED)
    assert robot_proc.stop(signal.SIGTERM)[0] == 0, robot_proc.text()


def _started_ids(proc: Proc) -> list[int]:
    """Episode ids a robot process started, from its log."""
    return [int(m) for m in re.findall(r"episode (\d+) started", proc.text())]


def test_a_robot_killed_mid_run_continues_its_episode_ids_after_a_respawn(
    procs: Callable[..., Proc], make_bus: Callable[..., ZenohBus], tmp_path: Path
) -> None:
    """Finding 4: a respawned robot restarted at episode 0 and replayed the demos the expert drives below
    `until_episode`, so the buffer held duplicated (robot, episode) ids. With `state_dir` it continues after
    every id it used (the one it was killed in included); an expert killed too and started again redoes nothing."""
    robot = f"arm_{uuid.uuid4().hex[:6]}"
    rec = Recorder(make_bus("recorder"), robot)
    args = [
        "robot", "--name", f"{robot}_node", "-p", f"robot_id:={robot}", "-p", "task:=button_press",
        "-p", "realtime:=false", "-p", "privileged_state:=true", "-p", f"state_dir:={tmp_path / 'robots'}",
    ]  # fmt: skip
    expert_args = ["expert", "--name", f"{robot}_expert", "-p", f"robot_id:={robot}", "-p", "task:=button_press",
                   "-p", "until_episode:=1000"]  # fmt: skip  # every episode here is a demo
    first, expert = procs(*args), procs(*expert_args)
    # kill it in the middle of an episode, after at least one whole one
    assert wait_until(lambda: len(rec.ended()) >= 1 and len(rec.transitions) > rec.ended()[-1].steps + 2, 40.0), (
        first.text() + expert.text()
    )
    first.proc.kill()
    expert.proc.kill()
    first.proc.wait(10.0)
    expert.proc.wait(10.0)
    before = _started_ids(first)
    assert before, first.text()
    second, _ = procs(*args), procs(*expert_args)
    assert wait_until(lambda: any(e.episode_id > max(before) for e in rec.ended()), 40.0), second.text()
    after = _started_ids(second)
    assert after and min(after) == max(before) + 1, (before, after)
    with rec._lock:
        keys = [(t.episode_id, t.step) for t in rec.transitions]
    assert len(keys) == len(set(keys)), "a (robot, episode, step) arrived twice: an episode id was used again"
    assert second.stop(signal.SIGTERM)[0] == 0, second.text()


@pytest.mark.timeout(150)
def test_an_expert_finishes_once_its_robot_is_past_until_episode(
    procs: Callable[..., Proc], make_bus: Callable[..., ZenohBus], zenoh_env: dict[str, str], tmp_path: Path
) -> None:
    """Issue 31, item 9d: an expert kept running after its demonstrations. It gives episodes 0 and 1, then at the
    first observation of episode 2 says so in one line and exits as finished (code 0), which no launcher respawns."""
    robot = f"arm_{uuid.uuid4().hex[:6]}"
    rec = Recorder(make_bus("recorder"), robot)
    robot_proc = procs("robot", "--name", f"{robot}_node", "-p", f"robot_id:={robot}", "-p", "task:=button_press",
                       "-p", "realtime:=false", "-p", "privileged_state:=true")  # fmt: skip
    status = tmp_path / "expert.status"
    argv = user_cmd("node", "expert", "--name", f"{robot}_expert", "-p", f"robot_id:={robot}",
                    "-p", "task:=button_press", "-p", "until_episode:=2")  # fmt: skip
    expert = LoggedProcess(argv, {**zenoh_env, ENV_STATUS_FILE: str(status)}, tmp_path / "expert.log")
    try:
        code = expert.proc.wait(120.0)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the expert did not finish:\n{expert.text()}\n{robot_proc.text()}")
    finally:
        expert.stop(signal.SIGKILL)
    assert code == 0, expert.text()
    assert expert.text().count("demonstrations done (2 episodes); expert stopping") == 1, expert.text()
    assert read_status(status) == NodeStatus("stopped")
    assert [e.episode_id for e in rec.ended()][:2] == [0, 1], robot_proc.text()
    with rec._lock:
        assert {t.episode_id for t in rec.transitions if t.action.source == SOURCE_SCRIPTED} <= {0, 1}
    assert robot_proc.stop(signal.SIGTERM)[0] == 0, robot_proc.text()
