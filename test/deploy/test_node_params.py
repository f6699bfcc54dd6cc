"""`user bringup` checks every node's settings before anything starts: one line names the file, the node, its kind,
the key and the nearest known key; exit code 2; no run directory, no process."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from test.conftest import REPO, user_cmd
from user.config.strict import ConfigError
from user.deploy.deployment import load
from user.deploy.node_params import check_node_params


def _typo(tmp_path: Path, old: str, new: str) -> Path:
    text = (REPO / "config/default.yaml").read_text()
    assert old in text
    path = tmp_path / "typo.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


def test_a_nested_typo_names_file_node_key_and_the_near_key(tmp_path: Path) -> None:
    path = _typo(tmp_path, "updates_per_step: 4.0", "updates_per_stp: 4.0")
    with pytest.raises(ConfigError) as caught:
        check_node_params(load(path), path)
    message = str(caught.value)
    assert message.startswith(f"{path}: node 'learner' (learner): pacing: unknown key 'updates_per_stp'"), message
    assert "did you mean 'updates_per_step'?" in message, message


def test_every_shipped_deployment_passes(tmp_path: Path) -> None:
    for path in sorted((REPO / "config").glob("*.yaml")):
        if path.name == "sites.yaml":
            continue  # sites only, no nodes of its own
        check_node_params(load(path), path)


def test_bringup_refuses_a_robot_typo_before_any_process_or_run_directory(tmp_path: Path) -> None:
    path = _typo(tmp_path, "control_rate_hz: 10.0", "control_rate_hzz: 10.0")
    proc = subprocess.run(user_cmd("bringup", str(path)), cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert f"{path}: node 'franka_left' (robot): unknown key 'control_rate_hzz'" in lines[0], lines[0]
    assert "did you mean 'control_rate_hz'?" in lines[0]
    assert not (tmp_path / "runs").exists()  # no run directory for a run that never started


def test_resume_of_a_run_whose_saved_deployment_has_a_typo_names_that_file(tmp_path: Path) -> None:
    run = tmp_path / "runs/default"
    run.mkdir(parents=True)
    saved = run / "deployment.yaml"
    saved.write_text(_typo(tmp_path, "period_s: 10.0", "periods: 10.0").read_text())
    proc = subprocess.run(
        user_cmd("bringup", "--resume", str(run)), cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2, proc.stderr
    assert f"{saved}: node 'monitor' (monitor): unknown key 'periods'; did you mean 'period_s'?" in proc.stderr
    assert sorted(p.name for p in run.iterdir()) == ["deployment.yaml"]
