"""`user buffer import-bag` and `export` report their progress on stderr (their results stay on stdout)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from rosbags.rosbag2 import StoragePlugin

from test.buffer.bags.test_bagread import MAPPING, record_bag
from test.buffer.factories import episode
from user.buffer import BufferConfig, ReplayBuffer
from user.buffer.bags.bagread import BagReader
from user.buffer.bags.importer import ImportMapping
from user.cli.main import main
from user.config.strict import from_mapping


def test_import_bag_reports_reading_and_storing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record_bag(tmp_path / "bag", StoragePlugin.MCAP)
    mapping = tmp_path / "mapping.yaml"
    mapping.write_text(yaml.safe_dump(MAPPING))
    assert main(["buffer", "import-bag", str(tmp_path / "bag"), "--into", str(tmp_path / "buf"),
                 "--mapping", str(mapping)]) == 0  # fmt: skip
    out, err = capsys.readouterr()
    used = from_mapping(ImportMapping, MAPPING, where="test").topics()
    messages = sum(1 for _ in BagReader(tmp_path / "bag").messages(used))
    with ReplayBuffer.open(tmp_path / "buf", read_only=True) as buf:
        episodes = len(buf.storage.index.episodes())
    lines = err.splitlines()
    assert any(line.startswith(f"reading bag messages: {messages} in ") for line in lines), err
    assert any(line.startswith(f"storing episodes: {episodes} in ") for line in lines), err
    assert "storing episodes" not in out and f"imported {episodes} online episodes" in out


def test_export_reports_each_episode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with ReplayBuffer.open(tmp_path / "buf", BufferConfig(prefetch=0)) as buf:
        for e in range(3):
            for t in episode("left", e, 2):
                buf.add(t)
    assert main(["buffer", "export", str(tmp_path / "buf"), str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert any(line.startswith("exporting episodes: 3 in ") for line in err.splitlines()), err
