"""Episode ids of one robot, kept across restarts: a respawned robot node continues where the last one stopped.

An id names one episode for good: the buffer stores episodes by (robot, episode id), an expert drives the ids
below its `until_episode` as demonstrations, a learner acknowledges them. A robot node that restarted at its
first id again would send episodes the buffer already holds and redo demonstrations.

`EpisodeIds` hands out ids in memory. `DurableEpisodeIds` writes the id after the one it hands out to
`<state_dir>/<robot_id>.episode.json` first, atomically (a temporary file, fsync, rename, fsync of the
directory), so an id is used only once it is on disk, and a kill -9 at any moment leaves the old number or
the new one, never a torn file. On start it continues from the larger of the configured first id and the
saved one. `user bringup --resume` sets the first id to the larger of the id after the buffer's last episode and
the saved one (`saved_next_id`: an episode started but never stored keeps its id), so the id it announces is the
one the robot starts at.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from user.config.strict import ConfigError

SUFFIX = ".episode.json"


class EpisodeIdError(RuntimeError):
    """The next episode id could not be saved (the disk is full or not writable): no episode may start."""


class EpisodeIdStateError(ConfigError):
    """The saved episode id cannot be read: which ids were used is unknown, so the robot does not start."""


def saved_next_id(state_dir: Path, robot_id: str) -> int | None:
    """The next episode id robot `robot_id` saved in `state_dir` (None: none saved); `EpisodeIdStateError` when
    the file cannot be read. Reads only: nothing is created."""
    path = state_dir / f"{robot_id}{SUFFIX}"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise _unreadable(path, robot_id, str(exc)) from exc
    try:
        state: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _unreadable(path, robot_id, f"not JSON ({exc})") from exc
    value = state.get("next_episode_id") if isinstance(state, dict) else None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _unreadable(path, robot_id, f"no non-negative integer next_episode_id in {text[:80]!r}")
    if state.get("robot_id") != robot_id:
        raise _unreadable(path, robot_id, f"it belongs to robot {state.get('robot_id')!r}, not {robot_id!r}")
    return value


def _unreadable(path: Path, robot_id: str, why: str) -> EpisodeIdStateError:
    return EpisodeIdStateError(
        f"robot {robot_id!r}: the saved episode id in {path} is unreadable: {why}. Write "
        f'{{"robot_id": "{robot_id}", "next_episode_id": N}} there with N above every id this robot '
        "used (see `user buffer info`), or remove the file to start at first_episode_id"
    )


class EpisodeIds:
    """Increasing episode ids from `first`, in memory."""

    def __init__(self, first: int = 0) -> None:
        if first < 0:
            raise ValueError(f"the first episode id must be >= 0, got {first}")
        self._next = first

    @property
    def next_id(self) -> int:
        """The id the next `take` returns."""
        return self._next

    def take(self) -> int:
        """The id for a new episode; ids increase by one and are never handed out twice."""
        episode_id = self._next
        self._keep(episode_id + 1)
        self._next = episode_id + 1
        return episode_id

    def _keep(self, next_id: int) -> None:
        """Remember `next_id` before an id below it is used (nothing to do in memory)."""


class DurableEpisodeIds(EpisodeIds):
    """`EpisodeIds` whose next id survives the process, in `<state_dir>/<robot_id>.episode.json`."""

    def __init__(self, state_dir: Path, robot_id: str, first: int = 0) -> None:
        self.robot_id = robot_id
        self.path = state_dir / f"{robot_id}{SUFFIX}"
        try:
            state_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise EpisodeIdStateError(f"cannot create the robot state directory {state_dir}: {exc}") from exc
        self.saved = saved_next_id(state_dir, robot_id)  # None: nothing saved yet (a fresh run)
        super().__init__(max(first, self.saved or 0))

    def _keep(self, next_id: int) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        data = json.dumps({"robot_id": self.robot_id, "next_episode_id": next_id}).encode() + b"\n"
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            directory = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        except OSError as exc:
            raise EpisodeIdError(
                f"robot {self.robot_id!r}: cannot save the next episode id to {self.path}: {exc.strerror or exc}"
            ) from exc
        self.saved = next_id
