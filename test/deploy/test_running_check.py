"""One deployment per run: a second `user bringup` of a deployment whose nodes are alive in its domain is refused
before it starts anything (one line naming them and how to run beside them); `--domain` runs it beside."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from test.conftest import free_port, user_cmd, wait_until
from test.helpers.bringup_process import BringupProcess, kill_left
from user.deploy.deployment import load
from user.deploy.running_check import DeploymentRunningError, check_not_running

START_S = 60.0  # a small deployment's nodes running, on a loaded 2-core machine


def _talkers(tmp_path: Path, endpoint: str) -> Path:
    path = tmp_path / "pair.yaml"
    path.write_text(
        f"""name: pair
router: {{endpoints: [{endpoint}], start: auto}}
nodes:
  - name: pair_talker
    kind: talker
    params: {{topic: /pair_chatter, rate_hz: 10.0}}
  - name: pair_listener
    kind: listener
    params: {{topic: /pair_chatter}}
"""
    )
    return path


@pytest.fixture
def runs() -> Iterator[list[BringupProcess]]:
    started: list[BringupProcess] = []
    yield started
    kill_left(started)


def _run(cwd: Path, *args: str) -> BringupProcess:
    cwd.mkdir(parents=True, exist_ok=True)
    return BringupProcess(list(args), cwd / "console.txt", cwd)


def test_a_second_bringup_is_refused_and_runs_beside_in_a_domain_of_its_own(
    tmp_path: Path, runs: list[BringupProcess]
) -> None:
    config = _talkers(tmp_path, f"tcp/127.0.0.1:{free_port()}")
    first = _run(tmp_path / "first", str(config))
    runs.append(first)
    assert wait_until(lambda: first.text().count("is running (") == 2, START_S, 0.05), first.text()
    before = first.text()

    second = subprocess.run(user_cmd("bringup", str(config)), cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert second.returncode == 2, second.stderr
    lines = [line for line in second.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, second.stderr
    assert "pair is already running: pair_listener, pair_talker are alive in the default domain" in lines[0]
    assert "`user bringup pair --domain NAME`" in lines[0]
    assert not (tmp_path / "runs").exists()  # nothing of the second run was made
    assert first.proc.poll() is None and first.text() == before  # the first run's console did not hear of it

    beside = _run(tmp_path / "beside", str(config), "--domain", "pair_two")
    runs.append(beside)
    assert wait_until(lambda: beside.text().count("is running (") == 2, START_S, 0.05), beside.text()
    assert beside.stop() == 0 and first.stop() == 0, (beside.text(), first.text())
    # the closing hint after Ctrl-C: where the results are, and how to look at and continue them
    assert (
        "the run is in runs/pair (" in first.text() and "`user bringup --resume runs/pair` continues it" in first.text()
    )
    assert (tmp_path / "first/runs/pair/deployment.yaml").is_file() and (tmp_path / "beside/runs/pair").is_dir()


def test_nodes_of_other_names_or_another_domain_are_no_clash(tmp_path: Path, router_endpoint: str) -> None:
    from user.bus.zenoh_bus import ZenohBus
    from user.bus.zenoh_config import ZenohSettings

    config = _talkers(tmp_path, router_endpoint)
    deployment = load(config)
    elsewhere = ZenohBus("pair_talker", ZenohSettings(router=[router_endpoint], domain="not_this_one"))
    unrelated = ZenohBus("someone_else", ZenohSettings(router=[router_endpoint]))
    try:
        check_not_running(deployment, deployment.routers())  # neither is a node of this deployment's domain
        clash = ZenohBus("pair_listener", ZenohSettings(router=[router_endpoint]))
        try:
            with pytest.raises(DeploymentRunningError, match=r"pair_listener is alive in the default domain"):
                check_not_running(deployment, deployment.routers())
        finally:
            clash.close()
    finally:
        elsewhere.close()
        unrelated.close()


def test_without_a_router_running_there_is_nothing_to_refuse(tmp_path: Path) -> None:
    deployment = load(_talkers(tmp_path, f"tcp/127.0.0.1:{free_port()}"))
    check_not_running(deployment, deployment.routers())
    assert os.listdir(tmp_path) == ["pair.yaml"]


def test_a_second_learning_run_beside_a_running_one_changes_nothing_of_it(
    tmp_path: Path, runs: list[BringupProcess]
) -> None:
    """Issue 31's finding: a second bringup of a learning deployment merged into the first (a second learner and
    robots under the same names). Now it is refused, and the first run's buffer, progress.csv and console go on
    as if it had never been tried: its episodes one robot's ids without a gap or a repeat, its progress counts
    never stepping back, no warning in its console or learner log after the attempt."""
    pytest.importorskip("mujoco")
    from test.deploy.test_pipeline_bringup import _deployment, _episodes, _log, _progress

    config = _deployment(tmp_path, f"tcp/127.0.0.1:{free_port()}")
    run_dir = tmp_path / "run"
    first = _run(tmp_path / "first", str(config), "--run-dir", str(run_dir))
    runs.append(first)
    assert wait_until(lambda: len(_episodes(run_dir)) >= 2 and len(_progress(run_dir)) >= 2, 150.0, 0.5), (
        first.text() + _log(run_dir, "learner")
    )
    console, learner_log, rows = first.text(), _log(run_dir, "learner"), len(_progress(run_dir))

    second = subprocess.run(
        user_cmd("bringup", str(config), "--run-dir", str(tmp_path / "second")),
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert second.returncode == 2 and "pipeline_e2e is already running: " in second.stderr, second.stderr
    assert "learner, monitor, robot, rollout" in second.stderr and not (tmp_path / "second").exists()

    stored = len(_episodes(run_dir))
    assert wait_until(lambda: len(_episodes(run_dir)) >= stored + 2 and len(_progress(run_dir)) > rows + 2, 120.0, 0.5)
    after = first.text()[len(console) :] + _log(run_dir, "learner")[len(learner_log) :]  # before the stop's own
    assert first.stop() == 0, first.text()
    ids = sorted(_episodes(run_dir))
    assert ids == list(range(ids[0], ids[-1] + 1)), ids  # one robot's episodes, each once
    steps = [int(row["env_steps"]) for row in _progress(run_dir)]
    assert steps == sorted(steps), steps  # no other run's counts mixed in
    assert not [line for line in after.splitlines() if "[WARN" in line or "[ERROR" in line], after
