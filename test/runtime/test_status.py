"""The status line a node leaves its launcher (`user.runtime.status`): one line, written whole, read back as
(state, reason); nothing without a file to write to; anything else read as no status."""

from __future__ import annotations

from pathlib import Path

import pytest

from user.runtime.status import (
    ENV_STATUS_FILE,
    MAX_REASON_CHARS,
    NodeStatus,
    one_line,
    read_status,
    write_status,
)


def test_a_status_is_written_whole_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "n.status"
    write_status("config-error", "parameters of node 'n':\n  rate_hz: -1.0 is below the minimum\n", path)
    assert path.read_text() == "config-error parameters of node 'n': | rate_hz: -1.0 is below the minimum\n"
    assert read_status(path) == NodeStatus(
        "config-error", "parameters of node 'n': | rate_hz: -1.0 is below the minimum"
    )
    write_status("running", "", path)
    assert path.read_text() == "running\n" and read_status(path) == NodeStatus("running", "")
    assert not (tmp_path / "n.status.tmp").exists()


def test_the_file_comes_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "env.status"
    monkeypatch.setenv(ENV_STATUS_FILE, str(path))
    write_status("starting")
    assert read_status(path) == NodeStatus("starting")
    monkeypatch.delenv(ENV_STATUS_FILE)
    write_status("failed", "boom")  # no file named: nothing written, no error
    assert read_status(path) == NodeStatus("starting")
    monkeypatch.setenv(ENV_STATUS_FILE, "")
    write_status("failed", "boom")
    assert read_status(path) == NodeStatus("starting")


def test_an_unwritable_status_is_not_the_nodes_error(tmp_path: Path) -> None:
    write_status("failed", "boom", tmp_path / "missing-dir" / "n.status")
    assert not (tmp_path / "missing-dir").exists()


def test_unknown_states_are_refused_when_written_and_ignored_when_read(tmp_path: Path) -> None:
    known = "known: starting, running, config-error, failed, complete"
    with pytest.raises(ValueError, match=f"^unknown node state 'sleeping' \\({known}\\)$"):
        write_status("sleeping", "", tmp_path / "n.status")
    path = tmp_path / "other.status"
    path.write_text("sleeping for a while\n")
    assert read_status(path) is None
    path.write_text("")
    assert read_status(path) is None
    assert read_status(tmp_path / "none.status") is None
    path.write_bytes(b"failed bad \xff byte\n")
    assert read_status(path) == NodeStatus("failed", "bad \ufffd byte")


def test_one_line_joins_and_cuts() -> None:
    assert one_line("  a \n\n b\n") == "a | b"
    assert one_line("") == ""
    exact = "x" * MAX_REASON_CHARS
    assert one_line(exact) == exact
    cut = one_line("y" * (MAX_REASON_CHARS + 1))
    assert len(cut) == MAX_REASON_CHARS and cut.endswith("yy...")


def test_a_completed_run_s_reason_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "learner.status"
    write_status("complete", "20 episodes stored (stop_after.episodes 20)", path)
    assert read_status(path) == NodeStatus("complete", "20 episodes stored (stop_after.episodes 20)")
