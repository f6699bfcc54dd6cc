"""`user.distributed.launch`: torchrun that ends with the lead's own code (a complete run is no failure to restart
for), and whose ranks' real failures still are torchrun's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from user.distributed.launch import EXIT_FILE_ENV
from user.nodes.learner_ranks import handed_over
from user.runtime.status import EXIT_FAILED, EXIT_RUN_COMPLETE

pytestmark = pytest.mark.timeout(120)
REPO = Path(__file__).resolve().parents[2]


def launch(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=f"{REPO}:{REPO / 'src'}", OMP_NUM_THREADS="1")
    command = [sys.executable, "-m", "user.distributed.launch", "--standalone", "--nproc-per-node=2"]
    command += ["--max-restarts=2", "--module", "test.distributed.exit_worker", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=100, check=False)


def test_a_complete_run_ends_the_launcher_with_its_code_without_a_restart() -> None:
    done = launch(str(EXIT_RUN_COMPLETE))
    assert done.returncode == EXIT_RUN_COMPLETE, done.stderr[-2000:]
    assert "Restarting" not in done.stderr


def test_a_failed_rank_is_still_a_failure() -> None:
    done = launch(str(EXIT_FAILED))
    assert done.returncode == 1 and "exit_worker FAILED" in done.stderr


def test_the_lead_hands_over_every_code_but_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exit_file = tmp_path / "code"
    monkeypatch.setenv(EXIT_FILE_ENV, str(exit_file))
    assert handed_over(0) == 0 and not exit_file.exists()
    assert handed_over(EXIT_FAILED) == EXIT_FAILED and not exit_file.exists()
    assert handed_over(EXIT_RUN_COMPLETE) == 0 and exit_file.read_text() == "5\n"
    monkeypatch.delenv(EXIT_FILE_ENV)
    assert handed_over(EXIT_RUN_COMPLETE) == EXIT_RUN_COMPLETE  # not under the launcher: the code as it is
