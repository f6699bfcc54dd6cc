"""The status line a node leaves its launcher (`user.runtime.status`): one line, written whole, read back as
(state, reason); nothing without a file to write to; anything else read as no status; after the process is gone,
its launcher records how it ended where the node could not."""

from __future__ import annotations

from pathlib import Path

import pytest

from user.runtime.status import (
    ENV_STATUS_FILE,
    MAX_REASON_CHARS,
    NodeStatus,
    one_line,
    read_status,
    record_exit,
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
    known = "known: starting, running, stopped, config-error, failed, complete"
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


def test_a_clean_stop_reads_back_and_old_files_still_do(tmp_path: Path) -> None:
    path = tmp_path / "robot.status"
    write_status("stopped", "", path)
    assert path.read_text() == "stopped\n" and read_status(path) == NodeStatus("stopped")
    path.write_text("running\n")  # what a node wrote before `stopped` existed
    assert read_status(path) == NodeStatus("running")


@pytest.mark.parametrize(
    ("left", "code", "reason", "recorded"),
    [
        ("running", 0, "", NodeStatus("stopped")),  # stopped cleanly, but could not say so
        ("starting", -9, "", NodeStatus("failed", "ended by signal SIGKILL")),
        ("running", -11, "", NodeStatus("failed", "ended by signal SIGSEGV")),
        ("running", -99, "", NodeStatus("failed", "ended by signal 99")),  # a number that names no signal
        ("running", 1, "RuntimeError: boom", NodeStatus("failed", "RuntimeError: boom")),
        ("running", 3, "", NodeStatus("failed", "exit code 3")),
        (None, 2, "", NodeStatus("config-error", "exit code 2")),  # died before it wrote anything
        ("running", 5, "", NodeStatus("complete", "exit code 5")),
    ],
)
def test_the_launcher_records_the_end_a_node_could_not_write(
    tmp_path: Path, left: str | None, code: int, reason: str, recorded: NodeStatus
) -> None:
    path = tmp_path / "robot.status"
    if left is not None:
        write_status(left, "", path)
    record_exit(path, code, reason)
    assert read_status(path) == recorded


@pytest.mark.parametrize("written", ["stopped", "failed boom", "config-error bad key", "complete 20 episodes"])
def test_what_the_node_wrote_itself_is_kept(tmp_path: Path, written: str) -> None:
    path = tmp_path / "robot.status"
    path.write_text(written + "\n")
    record_exit(path, -9, "killed on its way out")
    assert path.read_text() == written + "\n"


def test_without_a_reason_the_exit_itself_is_recorded(tmp_path: Path) -> None:
    path = tmp_path / "robot.status"
    write_status("running", "", path)
    record_exit(path, -9)
    assert read_status(path) == NodeStatus("failed", "ended by signal SIGKILL")
