"""`LearnerHealth`: training reported idle while it waits for data and OK while it trains; the buffer's disk
reported OK, WARN when filling and ERROR when almost full; the buffer measured on disk."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from user.learner.health import DISK_ERROR_FREE, DiskUsage, LearnerHealth
from user.learner.trainer import TrainerCounters
from user.runtime.diagnostics import ERROR, OK, WARN

GIB = 1024**3


@dataclass
class FakeSession:
    run_dir: Path
    counters: TrainerCounters = field(default_factory=TrainerCounters)
    stopped: bool = False
    held: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.config = SimpleNamespace(run_dir=self.run_dir)
        self.trainer = SimpleNamespace(counters=self.counters)
        self.buffer = self.held


def health(tmp_path: Path, free: int = 100 * GIB, total: int = 500 * GIB) -> tuple[LearnerHealth, FakeSession]:
    session = FakeSession(tmp_path)
    (tmp_path / "buffer" / "segments").mkdir(parents=True)
    (tmp_path / "buffer" / "segments" / "a.mcap").write_bytes(b"x" * 3 * 1024**2)
    usage: Any = lambda path: DiskUsage(total, total - free, free)  # noqa: E731
    return LearnerHealth("learner", session, disk_usage=usage), session


def test_idle_while_waiting_for_data_then_training(tmp_path: Path) -> None:
    h, session = health(tmp_path)
    session.counters.idle_s = 10.0
    status = h.training()
    assert status.level == WARN and "waiting for data" in status.message
    session.counters.busy_s, session.counters.idle_s, session.counters.update_calls = 8.0, 12.0, 40
    status = h.training()  # since the last report: 8 s busy, 2 s idle
    assert status.level == OK and "40 updates" in status.message
    assert float(status.values["idle_fraction_since_last"]) == 0.2
    session.stopped = True
    assert h.training().level == OK and "stop_after" in h.training().message


def test_buffer_disk_levels(tmp_path: Path) -> None:
    ok, _ = health(tmp_path / "a")
    status = ok.buffer()
    assert status.level == OK and status.values["buffer_bytes"] == 3 * 1024**2
    filling, _ = health(tmp_path / "b", free=1 * GIB)
    assert filling.buffer().level == WARN and "filling" in filling.buffer().message
    small_disk, _ = health(tmp_path / "c", free=4 * GIB, total=100 * GIB)  # 4 %: under the 5 % mark
    assert small_disk.buffer().level == WARN
    full, _ = health(tmp_path / "d", free=DISK_ERROR_FREE - 1)
    assert full.buffer().level == ERROR and "almost full" in full.buffer().message
