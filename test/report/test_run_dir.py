"""A run directory loaded for the report: a path that is no run directory is refused naming what was expected; a
run that crashed early, a buffer without its index, a deployment file with markup in it and a machine without
matplotlib each give a report that says what is missing (never a traceback)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from test.report.factories import SECTIONS
from user.report.errors import NotARunDirectoryError
from user.report.run_dir import load_run
from user.report.write import write_report
from user.runtime.status import record_exit, write_status

CONFIG = "name: crashed\nnodes:\n  - {name: learner, kind: learner, params: {note: '<script>x</script> & more'}}\n"


def _crashed_run(tmp_path: Path) -> Path:
    """What `user bringup` leaves when the learner failed at once: the configuration and the nodes' logs."""
    run = tmp_path / "crashed"
    (run / "logs").mkdir(parents=True)
    (run / "deployment.yaml").write_text(CONFIG)
    write_status("failed", "RuntimeError: no accelerator", run / "logs" / "learner.status")
    write_status("running", "", run / "logs" / "robot.status")
    (run / "logs" / "learner.log").write_text("Traceback (most recent call last):\n")
    return run


@pytest.mark.parametrize("kind", ["missing", "file", "empty"])
def test_a_path_that_is_not_a_run_directory_is_refused_naming_what_was_expected(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "not_a_run"
    if kind == "file":
        path.write_text("x")
    elif kind == "empty":
        path.mkdir()
    expected = {"missing": "no such directory", "file": "not a directory", "empty": "expected at least one of"}[kind]
    with pytest.raises(NotARunDirectoryError) as info:
        load_run(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and expected in message
    assert "deployment.yaml" in message or "run directory of `user bringup`" in message
    assert not (path / "report.html").exists()


def test_a_run_that_crashed_early_gets_a_report_that_says_what_is_missing(tmp_path: Path) -> None:
    run = _crashed_run(tmp_path)
    loaded = load_run(run)
    assert [(n.name, n.state, n.reason) for n in loaded.nodes] == [
        ("learner", "failed", "RuntimeError: no accelerator"),
        ("robot", "running", ""),
    ]
    assert loaded.config_text == CONFIG
    files = write_report(run)
    assert files.html == run / "report.html" and files.png == run / "report.png"
    assert files.png.read_bytes().startswith(b"\x89PNG")
    page = files.html.read_text()
    for section in SECTIONS:
        assert f'<section id="{section}">' in page
    for missing in ("episodes.csv is missing", "progress.csv is missing", "no buffer/ directory",
                    "no checkpoints/ directory", "No online episode recorded", "No learner progress row"):  # fmt: skip
        assert missing in page, missing
    assert "RuntimeError: no accelerator" in page
    assert (
        files.notes == loaded.notes
        and "episodes.csv is missing: no episode rows (did the learner start?)" in files.notes
    )


def test_a_run_stopped_cleanly_shows_each_node_as_it_ended(tmp_path: Path) -> None:
    """After Ctrl-C every node used to be shown `running`; now each shows how it ended, whoever recorded it."""
    run = tmp_path / "stopped"
    (run / "logs").mkdir(parents=True)
    write_status("running", "", run / "logs" / "learner.status")
    write_status("stopped", "", run / "logs" / "learner.status")  # the node, at the end of its clean stop
    write_status("running", "", run / "logs" / "robot.status")
    record_exit(run / "logs" / "robot.status", -9)  # killed: its launcher recorded it
    loaded = load_run(run)
    assert [(n.name, n.state, n.reason) for n in loaded.nodes] == [
        ("learner", "stopped", ""),
        ("robot", "failed", "ended by signal SIGKILL"),
    ]
    assert not [n for n in loaded.notes if "last status of" in n]
    rows = re.findall(r"<tr><td>(\w+)</td><td>(\w+)</td>", write_report(run).html.read_text())
    assert ("learner", "stopped") in rows and ("robot", "failed") in rows


def test_a_status_still_saying_running_is_not_taken_for_a_live_node(tmp_path: Path) -> None:
    """A run directory from before `stopped`, or whose launcher was killed too: the report says what it cannot know."""
    loaded = load_run(_crashed_run(tmp_path))
    (note,) = [n for n in loaded.notes if "last status of" in n]
    assert note.startswith("last status of robot (running): if the run is over, how they ended was not recorded")


def test_configuration_text_is_escaped(tmp_path: Path) -> None:
    page = write_report(_crashed_run(tmp_path)).html.read_text()
    assert "<script>" not in page
    assert "&lt;script&gt;x&lt;/script&gt; &amp; more" in page


def test_a_buffer_without_its_index_is_named_with_the_way_to_rebuild_it(tmp_path: Path) -> None:
    run = _crashed_run(tmp_path)
    (run / "buffer" / "segments" / "seg_000000").mkdir(parents=True)
    loaded = load_run(run)
    assert loaded.buffer is None
    (note,) = [n for n in loaded.notes if n.startswith("the buffer cannot be read")]
    assert "no index here" in note and f"user buffer reindex {run / 'buffer'}" in note
    assert "user buffer reindex" in write_report(run).html.read_text()


def test_without_matplotlib_the_page_is_written_and_says_why_it_has_no_plots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    run = _crashed_run(tmp_path)
    files = write_report(run, tmp_path / "out" / "page.html")
    assert files.html == tmp_path / "out" / "page.html" and files.png is None
    assert not (tmp_path / "out" / "page.png").exists()
    assert "matplotlib cannot be imported" in files.html.read_text()
