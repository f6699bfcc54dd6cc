"""`LearnerHealth`: training reported idle while it waits for data and OK while it trains; the buffer's disk
reported OK, WARN when filling and ERROR when almost full; the buffer measured on disk; training that stopped or
diverged is a failure naming why."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from user.learner.health import DISK_ERROR_FREE, DiskUsage, LearnerHealth
from user.learner.trainer import TrainerCounters
from user.runtime.diagnostics import ERROR, OK, WARN

GIB = 1024**3


class FakeBuffer(list[int]):
    """What the health reads of the buffer: its length and the steps of episodes not ended yet."""

    def __init__(self, held: list[int]) -> None:
        super().__init__(held)
        self.in_progress: dict[str, int] = {}

    def steps_in_progress(self) -> dict[str, int]:
        return self.in_progress


@dataclass
class FakeSession:
    run_dir: Path
    counters: TrainerCounters = field(default_factory=TrainerCounters)
    stopped: bool = False
    held: list[int] = field(default_factory=list)
    halted: str | None = None  # why publication halted (training diverged)

    def __post_init__(self) -> None:
        self.config = SimpleNamespace(run_dir=self.run_dir)
        self.trainer = SimpleNamespace(counters=self.counters, failed=None)
        self.buffer = FakeBuffer(self.held)


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


def test_every_figure_and_line_of_the_statuses(tmp_path: Path) -> None:
    asked: list[Path] = []
    now = [100.0]

    def usage(path: Path) -> DiskUsage:
        asked.append(path)
        return DiskUsage(500 * GIB, 400 * GIB, 100 * GIB)

    session = FakeSession(tmp_path, held=[1, 2, 3])
    session.buffer.in_progress = {"arm": 4, "other": 1}
    (tmp_path / "buffer").mkdir()
    (tmp_path / "buffer" / "a.mcap").write_bytes(b"x" * 1024**2)
    h = LearnerHealth("learn", session, disk_usage=usage, clock=lambda: now[0])
    buffer = h.buffer()
    assert asked == [tmp_path / "buffer"]
    assert (buffer.name, buffer.level, buffer.message) == ("learn: buffer", OK, "1.0 MiB on disk, 100 GiB free")
    assert dict(buffer.values) == {
        "transitions": 3,
        "steps_in_unfinished_episodes": 5,
        "buffer_bytes": 1024**2,
        "disk_free_bytes": 100 * GIB,
        "disk_total_bytes": 500 * GIB,
        "directory": str(tmp_path / "buffer"),
    }
    (tmp_path / "buffer" / "b.mcap").write_bytes(b"x" * 1024**2)
    now[0] += 9.9  # measured again only every SIZE_EVERY_S
    assert h.buffer().values["buffer_bytes"] == 1024**2
    now[0] += 0.1
    assert h.buffer().values["buffer_bytes"] == 2 * 1024**2
    session.counters.busy_s, session.counters.idle_s, session.counters.update_calls = 1.0, 0.0, 7
    session.counters.gradient_steps = 14
    training = h.training()
    assert (training.name, training.level, training.message) == (
        "learn: training",
        OK,
        "training (7 updates since the last report)",
    )
    assert dict(training.values) == {
        "update_calls": 7,
        "gradient_steps": 14,
        "updates_since_last": 7,
        "idle_fraction_since_last": 0.0,
    }
    session.counters.idle_s = 19.0  # 19 s idle against 0 busy since: 100 %
    idle = h.training()
    assert (idle.level, idle.message) == (WARN, "idle 100% of the time: waiting for data (3 transitions)")
    assert h.training().message.startswith("idle 100%")  # nothing happened since: idle, not busy


def test_disk_boundaries(tmp_path: Path) -> None:
    at_warn, _ = health(tmp_path / "a", free=2 * GIB, total=40 * GIB)  # 2 GiB and 5 % exactly: not yet
    assert at_warn.buffer().level == OK
    at_error, _ = health(tmp_path / "b", free=DISK_ERROR_FREE, total=500 * GIB)  # exactly 200 MiB: a WARN
    status = at_error.buffer()
    assert status.level == WARN and status.message == f"disk filling: 0.2 GiB free at {tmp_path / 'b' / 'buffer'}"
    full, _ = health(tmp_path / "c", free=DISK_ERROR_FREE - 1024**2)
    assert full.buffer().message == f"disk almost full: 199 MiB free at {tmp_path / 'c' / 'buffer'}"


def test_names_values_and_the_idle_threshold_in_every_state(tmp_path: Path) -> None:
    full, _ = health(tmp_path / "a", free=DISK_ERROR_FREE - 1)
    filling, _ = health(tmp_path / "b", free=1 * GIB)
    for status in (full.buffer(), filling.buffer()):
        assert status.name == "learner: buffer" and status.values["disk_total_bytes"] == 500 * GIB
    assert filling.buffer().message.startswith("disk filling: 1.0 GiB free")
    h, session = health(tmp_path / "c")
    session.counters.busy_s, session.counters.idle_s, session.counters.update_calls = 1.0, 19.0, 5  # exactly 95 %
    idle = h.training()
    assert (idle.name, idle.level) == ("learner: training", WARN) and idle.values["updates_since_last"] == 5
    session.counters.busy_s, session.counters.idle_s, session.counters.update_calls = 5.0, 22.0, 8  # 4 busy, 3 idle
    busy = h.training()
    assert busy.level == OK and busy.values["updates_since_last"] == 3
    assert float(busy.values["idle_fraction_since_last"]) == 3 / 7
    session.stopped = True
    stopped = h.training()
    assert (stopped.name, stopped.message) == ("learner: training", "stopped: the run's stop_after was reached")
    assert stopped.values["update_calls"] == 8


def test_training_that_stopped_or_diverged_is_a_failure_naming_why(tmp_path: Path) -> None:
    h, session = health(tmp_path)
    assert h.failure() is None
    session.halted = "training diverged at update call 3: loss/critic = nan"
    assert h.failure() == "publication halted: training diverged at update call 3: loss/critic = nan"
    session.trainer.failed = RuntimeError("20 batches in a row could not be read")
    assert h.failure() == "training stopped: 20 batches in a row could not be read"  # the first cause wins
