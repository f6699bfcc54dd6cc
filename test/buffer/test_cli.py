"""`user buffer info | verify | import-bag | export`, run through the real command-line entry point."""

import json
import logging
import sqlite3
from pathlib import Path

import numpy as np
import pytest
import yaml
from rosbags.rosbag2 import StoragePlugin

from test.buffer.bags.test_bagread import MAPPING, record_bag
from test.buffer.factories import episode
from user.buffer import BufferConfig, ReplayBuffer, StorageConfig
from user.buffer.errors import IndexDamagedError
from user.cli.main import main
from user.deploy.deployment import load
from user.deploy.run_dir import save


@pytest.fixture
def buffer_dir(tmp_path: Path) -> Path:
    path = tmp_path / "buf"
    config = BufferConfig(storage=StorageConfig(segment_max_episodes=2), prefetch=0)
    with ReplayBuffer.open(path, config) as buf:
        for e in range(5):
            for t in episode("left" if e % 2 else "right", e, 3, demo=e == 0, success=e >= 3, version=e):
                buf.add(t)
    return path


def test_info_json(buffer_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["buffer", "info", str(buffer_dir), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (info["transitions"], info["episodes"], info["demo_transitions"]) == (15, 5, 3)
    assert info["policy_versions"] == [0, 1, 2, 3, 4]
    # left: episodes 1 (return 0) and 3 (return 1, a success); right: the demo 0, then 2 (return 0) and 4 (1)
    recent_left = {
        "episodes": 2,
        "mean_return": 0.5,
        "last_return": 1.0,
        "mean_length": 3.0,
        "success_rate": 0.5,
        "mean_interventions": 0.0,
    }
    assert info["robots"]["left"] == {
        "episodes": 2,
        "transitions": 6,
        "success_rate": 0.5,
        "last_episode_id": 3,
        "demo_episodes": 0,
        "recent": recent_left,
    }
    assert info["robots"]["right"]["demo_episodes"] == 1
    assert info["robots"]["right"]["recent"] == {**recent_left, "mean_return": 0.5, "last_return": 1.0}
    assert info["recent_window"] == 20
    assert info["recent"] == {**recent_left, "episodes": 4, "mean_return": 0.5, "last_return": 1.0}
    assert info["success_rate"] == pytest.approx(0.4)
    assert (info["segments_closed"], info["segments_open"]) == (3, 0)
    assert info["bytes_on_disk"] > 0
    assert main(["buffer", "info", str(buffer_dir)]) == 0
    text = capsys.readouterr().out
    assert "episodes:      5" in text
    assert "recent:        4 online episodes (window 20): return mean 0.50, last 1.00; length 3.0 steps" in text
    assert "robot right: 3 episodes (1 demo), 9 transitions, success 33.3%; recent: 2 online episodes" in text


def test_verify_finds_a_corrupt_row(buffer_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["buffer", "verify", str(buffer_dir)]) == 0
    assert capsys.readouterr().out.startswith("OK: 15 transitions, 5 episodes, 3 segments")
    db = sqlite3.connect(buffer_dir / "index.sqlite3")
    db.execute("UPDATE transitions SET offset = offset + 1 WHERE idx = 4")
    db.commit()
    db.close()
    assert main(["buffer", "verify", str(buffer_dir)]) == 1
    out = capsys.readouterr().out
    assert "PROBLEM: transition 4:" in out and "bad record" in out


def test_verify_missing_buffer_is_an_error(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert main(["buffer", "verify", str(tmp_path / "none")]) == 2
    assert f"{tmp_path / 'none'}: no such directory: expected a buffer directory" in caplog.text


def _run_dir(tmp_path: Path, buffer: Path | None) -> Path:
    """What `user bringup` leaves: the saved deployment, and the learner's buffer/ (moved here from `buffer`)."""
    run = tmp_path / "runs" / "default"
    save(load("talker_listener"), run)
    if buffer is not None:
        buffer.rename(run / "buffer")
    return run


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize("verb", ["info", "verify", "export", "reindex"])
def test_a_run_directory_is_taken_for_its_buffer_saying_so_in_one_line(
    buffer_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, verb: str
) -> None:
    """Issue 31, item 9a: `user buffer info runs/default` refused the run directory instead of using its buffer/."""
    run = _run_dir(tmp_path, buffer_dir)
    args = [str(tmp_path / "out")] if verb == "export" else []
    caplog.set_level(logging.INFO)
    assert main(["buffer", verb, str(run), *args]) == 0, _errors(caplog)
    said = [r.getMessage() for r in caplog.records if "run directory" in r.getMessage()]
    assert said == [f"{run} is a run directory: using its buffer {run / 'buffer'}"]
    out = capsys.readouterr().out
    expected = {
        "info": "transitions:   15 (3 demo, 0 intervened)",
        "verify": "OK: 15 transitions, 5 episodes, 3 segments",
        "export": "exported 5 episodes (15 transitions)",
        "reindex": f"reindexed {run / 'buffer'}: 15 transitions, 5 episodes",
    }[verb]
    assert expected in out


def test_a_bag_is_imported_into_a_run_directorys_buffer(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    record_bag(tmp_path / "bag", StoragePlugin.MCAP)
    mapping = tmp_path / "mapping.yaml"
    mapping.write_text(yaml.safe_dump(MAPPING))
    run = _run_dir(tmp_path, None)  # started, nothing stored yet: the buffer is made where the learner keeps it
    caplog.set_level(logging.INFO)
    assert main(["buffer", "import-bag", str(tmp_path / "bag"), "--into", str(run), "--mapping", str(mapping)]) == 0
    assert f"{run} is a run directory: using its buffer {run / 'buffer'}" in caplog.messages
    with ReplayBuffer.open(run / "buffer", read_only=True) as buf:
        assert len(buf) == 8
    assert sorted(p.name for p in run.iterdir()) == ["buffer", "deployment.yaml"]


@pytest.mark.parametrize("verb", ["info", "verify", "export", "reindex"])
def test_a_directory_that_is_neither_is_named_and_left_as_it_was(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, verb: str
) -> None:
    plain = tmp_path / "photos"
    plain.mkdir()
    (plain / "cat.jpg").write_bytes(b"x")
    args = [str(tmp_path / "out")] if verb == "export" else []
    assert main(["buffer", verb, str(plain), *args]) == 2
    assert _errors(caplog) == [
        f"{plain}: not a buffer directory: expected a buffer directory (holding index.sqlite3 or segments/) "
        "or a run directory of `user bringup` (holding deployment.yaml and buffer/)"
    ]
    assert [p.name for p in plain.iterdir()] == ["cat.jpg"] and not (tmp_path / "out").exists()
    caplog.clear()
    run = _run_dir(tmp_path, None)
    assert main(["buffer", verb, str(run), *args]) == 2
    [line] = _errors(caplog)
    assert line.startswith(f"{run} is a run directory without a buffer ({run / 'buffer'} holds no index.sqlite3")


def test_import_bag_as_demos(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record_bag(tmp_path / "bag", StoragePlugin.MCAP)
    record_bag(tmp_path / "later", StoragePlugin.SQLITE3, steps=(2,))
    mapping = tmp_path / "mapping.yaml"
    mapping.write_text(yaml.safe_dump(MAPPING))
    args = ["--into", str(tmp_path / "buf"), "--mapping", str(mapping)]
    assert main(["buffer", "import-bag", str(tmp_path / "bag"), *args, "--as-demos"]) == 0
    assert "imported 2 demonstration episodes (8 transitions)" in capsys.readouterr().out
    assert main(["buffer", "import-bag", str(tmp_path / "later"), *args]) == 0  # another bag: episode ids continue
    assert "imported 1 online episodes (2 transitions)" in capsys.readouterr().out
    with ReplayBuffer.open(tmp_path / "buf", read_only=True) as buf:
        assert buf.info().demo_transitions == 8 and len(buf) == 10
        assert [e.episode_id for e in buf.storage.index.episodes()] == [0, 1, 2]
        assert buf.verify().ok
    mapping.write_text(yaml.safe_dump({**MAPPING, "rewards": {}}))
    assert main(["buffer", "import-bag", str(tmp_path / "bag"), *args]) == 2  # unknown key: named, nothing imported


def test_export_plain_dataset(buffer_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "dataset"
    assert main(["buffer", "export", str(buffer_dir), str(out), "--online-only"]) == 0
    assert "exported 4 episodes (12 transitions)" in capsys.readouterr().out
    info = json.loads((out / "info.json").read_text())
    assert (info["episodes"], info["state_dim"], info["action_dim"], info["cameras"]) == (4, 7, 4, ["front", "wrist"])
    lines = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert [line["episode_id"] for line in lines] == [1, 2, 3, 4] and not any(line["is_demo"] for line in lines)
    data = np.load(out / lines[0]["file"])
    assert data["state"].shape == (3, 7) and data["action"].shape == (3, 4) and data["truncated"][-1]
    frames = sorted(p.name for p in (out / lines[0]["frames"] / "wrist").iterdir())
    assert frames == ["000000.jpg", "000001.jpg", "000002.jpg", "000003.jpg"]  # steps + the final observation
    assert main(["buffer", "export", str(buffer_dir), str(out)]) == 2  # never into a non-empty directory


def test_verify_reports_a_segment_the_index_does_not_know(buffer_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (buffer_dir / "segments" / "seg_000099").mkdir()
    assert main(["buffer", "verify", str(buffer_dir), "--no-decode"]) == 1
    assert "segments/seg_000099 is not in the index" in capsys.readouterr().out


@pytest.mark.parametrize("verb", ["info", "verify", "export"])
def test_a_partly_overwritten_index_is_one_line_naming_the_file_and_reindex(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, verb: str
) -> None:
    """Issue 13, finding 12b: a partly overwritten index gave a traceback (sqlite3.DatabaseError); now every verb
    prints one line that names the file and how to rebuild it, and exits 2."""
    path = tmp_path / "buf"
    with ReplayBuffer.open(path, BufferConfig(prefetch=0)) as buf:
        for e in range(150):
            buf.add_episode(episode("arm", e, 5, images=False))
    index_file = path / "index.sqlite3"
    data = bytearray(index_file.read_bytes())
    data[len(data) // 2 :] = b"\xff" * (len(data) - len(data) // 2)  # its second half overwritten
    index_file.write_bytes(bytes(data))
    args = [str(tmp_path / "out")] if verb == "export" else []
    caplog.clear()
    assert main(["buffer", verb, str(path), *args]) == 2
    [line] = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert line.startswith(f"{index_file}: ") and "is damaged" in line and "\n" not in line
    assert line.endswith(f"rebuild it from the segments with `user buffer reindex {path}`")
    with pytest.raises(IndexDamagedError, match="user buffer reindex"):
        ReplayBuffer.open(path, BufferConfig(prefetch=0))


def test_verify_finds_a_damaged_page_that_no_row_read_touches(
    buffer_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = sqlite3.connect(buffer_dir / "index.sqlite3")
    page = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'transitions_version'").fetchone()[0]
    size = db.execute("PRAGMA page_size").fetchone()[0]
    db.close()
    with open(buffer_dir / "index.sqlite3", "r+b") as f:
        f.seek((page - 1) * size)
        f.write(b"\xff" * size)
    assert main(["buffer", "verify", str(buffer_dir)]) == 1
    out = capsys.readouterr().out
    assert "index.sqlite3 is damaged (" in out and f"`user buffer reindex {buffer_dir}`" in out


def test_verify_reports_a_robots_episode_stored_twice(buffer_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = sqlite3.connect(buffer_dir / "index.sqlite3")
    db.execute("UPDATE episodes SET episode_id = 1 WHERE episode = 3")  # robot left's episodes 1 and 3
    db.execute("UPDATE transitions SET episode_id = 1 WHERE episode = 3")
    db.commit()
    db.close()
    assert main(["buffer", "verify", str(buffer_dir), "--no-decode"]) == 1
    out = capsys.readouterr().out
    assert "PROBLEM: robot left's episode 1 is stored 2 times (episodes [1, 3])" in out and "1 problem(s)" in out
