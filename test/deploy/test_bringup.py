"""`user bringup`: deployments as separate processes: started, supervised (respawns, their limit and its reset,
configuration errors, start deadlines, required nodes) and stopped by SIGINT, all nodes at once."""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from test.conftest import free_port, user_cmd, wait_until

START_S = 60.0  # a small deployment's nodes running, on a loaded 2-core machine


def _deployment(tmp_path: Path, endpoint: str, extra_node: str = "", talker: str = "") -> Path:
    path = tmp_path / "two_nodes.yaml"
    path.write_text(
        f"""name: two_nodes
router:
  endpoints: [{endpoint}]
  start: auto
log_dir: {tmp_path}/logs
nodes:
  - name: talker
    kind: talker
    params: {{topic: /two_nodes, rate_hz: 20.0}}
{talker}  - name: listener
    kind: listener
    params: {{topic: /two_nodes}}
{extra_node}"""
    )
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); look at its state
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


class Bringup:
    """`user bringup CONFIG` with its console output in a file."""

    def __init__(self, config: Path, tmp_path: Path) -> None:
        self.out = tmp_path / "bringup.out"
        with open(self.out, "wb") as f:
            self.proc = subprocess.Popen(
                user_cmd("bringup", str(config), "--run-dir", str(tmp_path / "run")),
                stdout=f,
                stderr=subprocess.STDOUT,
            )

    def text(self) -> str:
        return self.out.read_text(errors="replace")

    def wait_for(self, fragment: str, timeout_s: float = START_S, count: int = 1) -> bool:
        return wait_until(lambda: self.text().count(fragment) >= count, timeout_s, 0.05)

    def pids(self) -> dict[str, list[int]]:
        """Every pid each child had, in start order."""
        found: dict[str, list[int]] = {}
        for name, pid in re.findall(r"started (\S+) \(pid (\d+)\)", self.text()):
            found.setdefault(name, []).append(int(pid))
        return found

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(60)


@pytest.fixture
def bringup(tmp_path: Path) -> Iterator[Callable[[Path], Bringup]]:
    runs: list[Bringup] = []

    def start(config: Path) -> Bringup:
        runs.append(Bringup(config, tmp_path))
        return runs[-1]

    yield start
    for run in runs:
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait(10)
        for pids in run.pids().values():
            for pid in pids:
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)


def _says(log: Path, fragment: str) -> bool:
    return log.exists() and fragment in log.read_text(errors="replace")


def _logged_at(text: str, fragment: str) -> float:
    """The ROS-format timestamp of the first log line containing `fragment`."""
    line = next(line for line in text.splitlines() if fragment in line)
    return float(line.split("] [", 1)[1].split("]", 1)[0])


def test_bringup_starts_router_and_nodes_and_sigint_stops_all(
    bringup: Callable[[Path], Bringup], tmp_path: Path
) -> None:
    run = bringup(_deployment(tmp_path, f"tcp/127.0.0.1:{free_port()}"))
    listener_log = tmp_path / "logs" / "listener.log"
    assert wait_until(lambda: listener_log.exists() and "I heard" in listener_log.read_text(), START_S), run.text()
    assert run.wait_for("talker is running") and run.wait_for("listener is running"), run.text()
    pids = [pid for pids in run.pids().values() for pid in pids]
    assert len(pids) == 3  # router, talker, listener
    code = run.stop()
    text = run.text()
    assert code == 0, text
    assert "stopped listener (exit code 0)" in text and "stopped talker (exit code 0)" in text
    assert text.index("stopped talker") < text.index("stopped the Zenoh router")  # the router last
    assert "SIGTERM" not in text  # every node honoured SIGINT within its allowance
    assert not any(_alive(pid) for pid in pids)
    assert "Publishing" in (tmp_path / "logs" / "talker.log").read_text()
    assert (tmp_path / "logs" / "talker.status").read_text() == "stopped\n"  # how it ended, not its last running


def test_ctrl_c_signals_every_node_at_once(bringup: Callable[[Path], Bringup], tmp_path: Path) -> None:
    """A frozen node (the last started, so the first to be stopped) does not hold the others' SIGINT back until
    it is killed: each node stops within its own allowance, and Ctrl-C takes the longest of them, not their sum."""
    frozen = "  - {name: frozen, kind: listener, params: {topic: /elsewhere}, shutdown_timeout_s: 2.0}\n"
    run = bringup(_deployment(tmp_path, f"tcp/127.0.0.1:{free_port()}", frozen))
    logs = tmp_path / "logs"
    for name in ("talker", "listener", "frozen"):
        assert wait_until(functools.partial(_says, logs / f"{name}.log", "running"), START_S), run.text()
    (frozen_pid,) = run.pids()["frozen"]
    os.kill(frozen_pid, signal.SIGSTOP)
    code = run.stop()
    text = run.text()
    gave_up = _logged_at(text, "frozen did not stop")
    for name in ("talker", "listener"):
        node_log = (logs / f"{name}.log").read_text()
        assert _logged_at(node_log, "shutting down") < gave_up, f"{name} was signalled only after frozen was given up"
        assert f"{name} did not stop" not in text
    assert code == 1, text  # the frozen node had to be killed: not a clean stop
    assert "stopped frozen (exit code -9)" in text and "frozen did not stop within 2.0 s of SIGINT" in text
    assert "stopped listener (exit code 0)" in text and "stopped talker (exit code 0)" in text


# A configuration error only the node's start can find (its settings pass the check bringup makes before
# starting anything): a pedal read through evdev, which is not installed here (the `pedal` extra).
NEEDS_EVDEV = "kind: pedal\n    params: {source: evdev, device_path: /dev/input/no_such_pedal}"
EVDEV_MISSING = "the foot pedal at /dev/input/no_such_pedal needs the evdev package: pip install 'user[pedal]'"


def test_a_node_with_a_configuration_error_is_not_respawned_its_reason_is_on_the_console_and_bringup_exits_1(
    bringup: Callable[[Path], Bringup], tmp_path: Path
) -> None:
    if importlib.util.find_spec("evdev") is not None:
        pytest.skip("evdev is installed: the pedal would start")
    broken = f"""  - name: broken
    {NEEDS_EVDEV}
    respawn: true
    respawn_delay_s: 0.1
    max_respawns: 2
"""
    run = bringup(_deployment(tmp_path, f"tcp/127.0.0.1:{free_port()}", broken))
    code = run.proc.wait(120)  # it stops by itself: a required node is gone for good
    text = run.text()
    assert code == 1, text
    line = (
        f"broken exited with code 2 (configuration error): {EVDEV_MISSING}; not respawned: the same configuration "
        "fails the same way; it is required: stopping the deployment"
    )
    assert [x.split("]: ", 1)[1] for x in text.splitlines() if "broken exited" in x] == [line], text
    assert "respawning" not in text and len(run.pids()["broken"]) == 1
    assert "stopped listener" in text and "stopped the Zenoh router" in text


def test_an_optional_node_gone_for_good_leaves_the_rest_running(
    bringup: Callable[[Path], Bringup], tmp_path: Path
) -> None:
    if importlib.util.find_spec("evdev") is not None:
        pytest.skip("evdev is installed: the pedal would start")
    broken = f"  - name: broken\n    {NEEDS_EVDEV}\n    required: false\n"
    run = bringup(_deployment(tmp_path, f"tcp/127.0.0.1:{free_port()}", broken))
    assert run.wait_for("it is optional: the rest runs on"), run.text()
    listener_log = tmp_path / "logs" / "listener.log"
    heard = listener_log.read_text().count("I heard")
    assert wait_until(lambda: listener_log.read_text().count("I heard") > heard + 2, START_S), run.text()
    assert run.proc.poll() is None
    assert run.stop() == 1  # it ran on, and still says that a node failed


def test_the_respawn_count_resets_after_a_healthy_period(bringup: Callable[[Path], Bringup], tmp_path: Path) -> None:
    talker = "    respawn: true\n    respawn_delay_s: 0.1\n    max_respawns: 1\n    respawn_reset_s: 1.0\n"
    run = bringup(_deployment(tmp_path, f"tcp/127.0.0.1:{free_port()}", talker=talker))
    assert run.wait_for("talker is running"), run.text()
    os.kill(run.pids()["talker"][0], signal.SIGKILL)
    assert run.wait_for("talker exited with signal SIGKILL; respawning in 0.1 s (respawn 1 of 1)"), run.text()
    assert run.wait_for("talker has run 1 s since its start: its respawn count is reset"), run.text()
    os.kill(run.pids()["talker"][1], signal.SIGKILL)  # without the reset, the limit of 1 would be used up
    assert run.wait_for("respawning in 0.1 s (respawn 1 of 1)", count=2), run.text()
    assert run.wait_for("talker is running", count=3), run.text()
    assert len(run.pids()["talker"]) == 3
    assert run.stop() == 0, run.text()


def test_a_killed_router_is_started_again_and_the_nodes_talk_through_it_again(
    bringup: Callable[[Path], Bringup], tmp_path: Path
) -> None:
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    run = bringup(_deployment(tmp_path, endpoint))
    assert run.wait_for("listener is running"), run.text()
    os.kill(run.pids()["router"][0], signal.SIGKILL)
    assert run.wait_for("the Zenoh router exited with code -9; starting it again"), run.text()
    assert run.wait_for("started router", count=2), run.text()
    # a newcomer finds the talker through the new router (the nodes reconnected to it)
    env = {**os.environ, "USER_ZENOH_ROUTER": endpoint}
    echo = subprocess.run(
        user_cmd("topic", "echo", "/two_nodes", "std_msgs/msg/String", "--once", "--timeout", "30"),
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert echo.returncode == 0 and echo.stdout.startswith(b"data: "), echo.stderr.decode()
    assert run.proc.poll() is None and len(run.pids()["talker"]) == 1  # the nodes were not restarted
    assert run.stop() == 0, run.text()


def test_a_node_that_does_not_report_running_in_time_is_stopped(
    bringup: Callable[[Path], Bringup], tmp_path: Path
) -> None:
    late = "  - {name: late, kind: listener, params: {topic: /elsewhere}, start_timeout_s: 0.1}\n"
    run = bringup(_deployment(tmp_path, f"tcp/127.0.0.1:{free_port()}", late))
    code = run.proc.wait(120)
    text = run.text()
    assert code == 1, text
    assert "late did not report running within 0.1 s (its start_timeout_s); stopping it" in text
    # "late exited with <code> after it did not report running within 0.1 s[: <its last words>]; not respawned ...":
    # a node stopped while still importing may or may not have said something by then
    line = next((ln for ln in text.splitlines() if "late exited with" in ln), "")
    assert "after it did not report running within 0.1 s" in line and "; not respawned" in line, text


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"name: caf\xe9\nnodes: []\n", "not UTF-8 text: byte 0xe9 at line 1 (offset 9)"),
        (b"name: x\nnodes: [\n  - a: b\n", "not valid YAML: expected the node content, but found '-'"),
    ],
)
def test_an_unreadable_deployment_file_is_one_line(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    proc = subprocess.run(
        user_cmd("bringup", str(path), "--run-dir", str(tmp_path / "run")), capture_output=True, timeout=60
    )
    assert proc.returncode == 2
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1 and f"{path}: {message}" in lines[0], proc.stderr.decode()
    assert not (tmp_path / "run").exists()


def test_bad_deployment_is_refused_naming_key_and_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nnodes:\n  - name: a\n    kind: talker\n    parms: {}\n")
    proc = subprocess.run(
        user_cmd("bringup", str(path), "--run-dir", str(tmp_path / "run")), capture_output=True, timeout=30
    )
    assert proc.returncode == 2
    assert str(path).encode() in proc.stderr and b"unknown key 'parms'" in proc.stderr


def test_a_learner_that_reaches_its_stop_after_ends_the_run_cleanly(
    bringup: Callable[[Path], Bringup], tmp_path: Path
) -> None:
    """Issue 14, finding 5: a run has a length. The learner's `stop_after` met, it writes its final checkpoint and
    exits with the run-complete code; bringup stops every other node as on Ctrl-C and exits 0 by itself."""
    learning = "{mlp: {state_dim: 3, action_dim: 1, hidden: [8]}, algorithm: sac}"
    learner = (f"  - {{name: learner, kind: learner, params: {{robots: [r], run_dir: {tmp_path}/learner_run, "
               f"learning: {learning}, stop_after: {{wall_time_s: 2.0}}}}}}\n")  # fmt: skip
    run = bringup(_deployment(tmp_path, f"tcp/127.0.0.1:{free_port()}", learner))
    assert run.proc.wait(START_S + 30) == 0, run.text()
    text = run.text()
    assert "learner exited with code 5 (the run is complete)" in text, text
    assert "s since the start (stop_after.wall_time_s 2)" in text, text
    assert "stopped talker" in text and "stopped listener" in text, text
    assert (tmp_path / "learner_run" / "checkpoints" / "latest.pt").exists()


def test_with_a_learner_per_task_the_run_ends_when_both_learners_completed(
    bringup: Callable[[Path], Bringup], tmp_path: Path
) -> None:
    """Issue 36, item 4: one learner per task. The first learner done leaves the deployment running; the second
    done ends it, cleanly."""
    learning = "{mlp: {state_dim: 3, action_dim: 1, hidden: [8]}, algorithm: sac}"
    learners = "".join(
        f"  - {{name: learner_{task}, kind: learner, params: {{learner_id: learner_{task}, robots: [{task}_arm], "
        f"run_dir: {tmp_path}/{task}, weights_topic: /{task}/weights, stats_topic: /{task}/stats, "
        f"credit_topic: /{task}/credit, learning: {learning}, stop_after: {{wall_time_s: {after}}}}}}}\n"
        for task, after in (("a", 1.0), ("b", 6.0))
    )
    run = bringup(_deployment(tmp_path, f"tcp/127.0.0.1:{free_port()}", learners))
    assert run.proc.wait(START_S + 60) == 0, run.text()
    lines = run.text().splitlines()
    first = next(i for i, ln in enumerate(lines) if "learner_a exited with code 5 (the run is complete)" in ln)
    assert lines[first].endswith("the run goes on until learner_b complete too"), lines[first]
    last = next(i for i, ln in enumerate(lines) if "learner_b exited with code 5 (the run is complete)" in ln)
    assert lines[last].endswith("stopping the deployment") and first < last, lines[last]
    stopped = next(i for i, ln in enumerate(lines) if "stopped talker" in ln)
    assert stopped > last, "\n".join(lines)  # the others ran on after the first task was done
    for task in ("a", "b"):
        assert (tmp_path / task / "checkpoints" / "latest.pt").exists()


def _talker_in_domain(tmp_path: Path, endpoint: str, domain: str) -> Path:
    path = tmp_path / f"{domain}.yaml"
    path.write_text(
        f"""name: talker_{domain}
domain: {domain}
router:
  endpoints: [{endpoint}]
  start: auto
log_dir: {tmp_path}/logs_{domain}
nodes:
  - name: talker
    kind: talker
    params: {{topic: /chatter, rate_hz: 10.0, text: from_{domain}}}
"""
    )
    return path


def test_two_deployments_with_different_domains_share_a_router_unseen(tmp_path: Path) -> None:
    """Issue 15: like two ROS_DOMAIN_IDs, one host, one router; each sees only its own /chatter."""
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = Bringup(_talker_in_domain(tmp_path / "a", endpoint, "lab_a"), tmp_path / "a")
    second: Bringup | None = None
    try:
        assert first.wait_for("started talker"), first.text()
        second = Bringup(_talker_in_domain(tmp_path / "b", endpoint, "lab_b"), tmp_path / "b")
        assert second.wait_for("using the Zenoh router already running"), second.text()
        assert second.wait_for("started talker"), second.text()
        for domain in ("lab_a", "lab_b"):
            env = dict(os.environ, USER_ZENOH_ROUTER=endpoint, USER_DOMAIN=domain)
            echo = subprocess.run(
                user_cmd("topic", "echo", "/chatter", "--count", "5", "--timeout", "60"),
                env=env, capture_output=True, text=True, timeout=90,
            )  # fmt: skip
            assert echo.returncode == 0, echo.stderr
            assert echo.stdout.count(f"from_{domain}") == 5, echo.stdout
            other = "lab_b" if domain == "lab_a" else "lab_a"
            assert f"from_{other}" not in echo.stdout
    finally:
        codes = [b.stop() for b in (second, first) if b is not None]
    assert codes == [0, 0], (first.text(), second.text() if second else "")
