"""The learner's `/diagnostics`: is it training or idle, and how full is the disk its buffer writes to; and whether
it has failed for good (training stopped or diverged)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from user.buffer.info import directory_bytes
from user.runtime.diagnostics import ERROR, OK, WARN, Status

IDLE_WARN = 0.95  # idle this fraction of the time since the last report: WARN (waiting for data)
DISK_WARN_FREE = 2 * 1024**3  # bytes free on the buffer's file system below which it is a WARN
DISK_WARN_FRACTION = 0.05  # ... or this fraction of the file system
DISK_ERROR_FREE = 200 * 1024**2  # bytes free below which it is an ERROR (a segment may not fit)
SIZE_EVERY_S = 10.0  # the buffer directory is measured at most this often (it walks every segment file)


class DiskUsage(NamedTuple):
    total: int
    used: int
    free: int


class LearnerHealth:
    """Statuses of one learner session: training (updates, recent idle fraction) and buffer (size, disk)."""

    def __init__(
        self,
        name: str,
        session: Any,
        disk_usage: Callable[[Path], DiskUsage] = lambda p: DiskUsage(*shutil.disk_usage(p)),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name, self.session, self._disk, self._clock = name, session, disk_usage, clock
        self._buffer_dir = Path(session.config.run_dir) / "buffer"
        counters = session.trainer.counters
        self._seen = (counters.busy_s, counters.idle_s, counters.update_calls)
        self._size: tuple[float, int] | None = None  # (when measured, bytes)

    def statuses(self) -> list[Status]:
        return [self.training(), self.buffer()]

    def failure(self) -> str | None:
        """Why the learner must end as failed, or None: training that stopped (unreadable data, again and again) or
        diverged (a loss that is not finite). The launcher then respawns it, and it resumes from its last good
        checkpoint, or reports it gone; a learner that lived on without training would hide it."""
        failed = self.session.trainer.failed
        if failed is not None:
            return f"training stopped: {failed}"
        halted = self.session.halted
        return None if halted is None else f"publication halted: {halted}"

    def training(self) -> Status:
        counters = self.session.trainer.counters
        busy, idle = counters.busy_s - self._seen[0], counters.idle_s - self._seen[1]
        updates = counters.update_calls - self._seen[2]
        self._seen = (counters.busy_s, counters.idle_s, counters.update_calls)
        fraction = idle / (busy + idle) if busy + idle > 0 else 1.0
        values = {
            "update_calls": counters.update_calls,
            "gradient_steps": counters.gradient_steps,
            "updates_since_last": updates,
            "idle_fraction_since_last": fraction,
        }
        name = f"{self.name}: training"
        if self.session.stopped:
            return Status(name, OK, "stopped: the run's stop_after was reached", values)
        if fraction >= IDLE_WARN:
            held = len(self.session.buffer)
            return Status(name, WARN, f"idle {fraction:.0%} of the time: waiting for data ({held} transitions)", values)
        return Status(name, OK, f"training ({updates} updates since the last report)", values)

    def buffer(self) -> Status:
        now = self._clock()
        if self._size is None or now - self._size[0] >= SIZE_EVERY_S:
            self._size = (now, directory_bytes(self._buffer_dir))
        disk = self._disk(self._buffer_dir)
        values = {
            "transitions": len(self.session.buffer),
            "steps_in_unfinished_episodes": sum(self.session.buffer.steps_in_progress().values()),
            "buffer_bytes": self._size[1],
            "disk_free_bytes": disk.free,
            "disk_total_bytes": disk.total,
            "directory": str(self._buffer_dir),
        }
        name = f"{self.name}: buffer"
        free_gib = disk.free / 1024**3
        if disk.free < DISK_ERROR_FREE:
            return Status(
                name, ERROR, f"disk almost full: {disk.free / 1024**2:.0f} MiB free at {self._buffer_dir}", values
            )
        if disk.free < DISK_WARN_FREE or disk.free < DISK_WARN_FRACTION * disk.total:
            return Status(name, WARN, f"disk filling: {free_gib:.1f} GiB free at {self._buffer_dir}", values)
        return Status(name, OK, f"{self._size[1] / 1024**2:.1f} MiB on disk, {free_gib:.0f} GiB free", values)
