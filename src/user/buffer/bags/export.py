"""`user buffer export`: whole episodes into a plain dataset directory that needs neither ROS nor this package.

OUT/info.json                  what was exported, from where, dimensions and cameras
OUT/episodes.jsonl             one line per episode: its file, robot, task, steps, success, return, ...
OUT/episode_000000.npz         state, action, reward, next_state, terminated, truncated, success,
                               intervened, is_demo, policy_version, step, stamp_ns (one row per step)
OUT/episode_000000/CAM/000000.jpg   frame t = the observation of step t; the last one is the final
                               next observation (images stay as they were compressed, never re-encoded)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from user.buffer.errors import BufferError
from user.buffer.rows import EpisodeRow
from user.buffer.storage import DiskStorage
from user.interfaces.domain import EncodedImage, Transition

EXPORT_FORMAT = 1
_SUFFIX = {"jpeg": ".jpg", "jpg": ".jpg", "png": ".png"}
EXPORTING = "exporting episodes"  # the step `export_dataset` reports
# how far the export is: (what, done, total); the CLI shows it (`user.cli.progress.Phases`)
ProgressCallback = Callable[[str, int, int | None], None]


@dataclass(frozen=True)
class EpisodeFilter:
    """Which episodes to export; None means any."""

    robot_id: str | None = None
    task: str | None = None
    is_demo: bool | None = None
    success: bool | None = None

    def accepts(self, ep: EpisodeRow) -> bool:
        return (
            (self.robot_id is None or ep.robot_id == self.robot_id)
            and (self.task is None or ep.task == self.task)
            and (self.is_demo is None or ep.is_demo == self.is_demo)
            and (self.success is None or ep.success == self.success)
        )


def _arrays(transitions: list[Transition]) -> dict[str, np.ndarray]:
    return {
        "state": np.stack([t.observation.state for t in transitions]).astype(np.float32),
        "action": np.stack([t.action.data for t in transitions]).astype(np.float32),
        "reward": np.asarray([t.reward for t in transitions], dtype=np.float32),
        "next_state": np.stack([t.next_observation.state for t in transitions]).astype(np.float32),
        "terminated": np.asarray([t.terminated for t in transitions], dtype=bool),
        "truncated": np.asarray([t.truncated for t in transitions], dtype=bool),
        "success": np.asarray([t.success for t in transitions], dtype=bool),
        "intervened": np.asarray([t.action.intervened for t in transitions], dtype=bool),
        "is_demo": np.asarray([t.is_demo for t in transitions], dtype=bool),
        "policy_version": np.asarray([t.action.policy_version for t in transitions], dtype=np.int64),
        "step": np.asarray([t.step for t in transitions], dtype=np.int64),
        "stamp_ns": np.asarray([t.stamp_ns for t in transitions], dtype=np.int64),
    }


def _write_frames(folder: Path, transitions: list[Transition]) -> list[str]:
    frames: list[tuple[EncodedImage, ...]] = [t.observation.images for t in transitions]
    frames.append(transitions[-1].next_observation.images)
    cameras: set[str] = set()
    for t, images in enumerate(frames):
        for img in images:
            cam_dir = folder / img.camera
            cam_dir.mkdir(parents=True, exist_ok=True)
            (cam_dir / f"{t:06d}{_SUFFIX.get(img.format.lower(), '.bin')}").write_bytes(img.data)
            cameras.add(img.camera)
    return sorted(cameras)


def export_dataset(
    storage: DiskStorage,
    out: Path,
    selection: EpisodeFilter,
    *,
    images: bool = True,
    progress: ProgressCallback | None = None,
) -> dict[str, Any]:
    """Write the selected episodes to `out` (which must be new or empty); returns the info.json content.
    `progress` hears each episode written."""
    if out.exists() and any(out.iterdir()):
        raise BufferError(f"{out}: export directory is not empty")
    out.mkdir(parents=True, exist_ok=True)
    episodes = [ep for ep in storage.index.episodes() if selection.accepts(ep)]
    cameras: set[str] = set()
    dims: dict[str, int] = {}
    steps = 0
    with open(out / "episodes.jsonl", "w", encoding="utf-8") as lines:
        for n, ep in enumerate(episodes):
            transitions = storage.get(range(ep.first_index, ep.first_index + ep.steps))
            name = f"episode_{n:06d}"
            arrays = _arrays(transitions)
            np.savez(out / f"{name}.npz", **arrays)  # type: ignore[arg-type]
            dims.setdefault("state_dim", int(arrays["state"].shape[1]))
            dims.setdefault("action_dim", int(arrays["action"].shape[1]))
            if images:
                cameras.update(_write_frames(out / name, transitions))
            steps += ep.steps
            record = {
                "file": f"{name}.npz",
                "frames": name if images else None,
                "robot_id": ep.robot_id,
                "task": ep.task,
                "episode_id": ep.episode_id,
                "steps": ep.steps,
                "success": ep.success,
                "episode_return": ep.episode_return,
                "interventions": ep.interventions,
                "is_demo": ep.is_demo,
                "policy_version": ep.policy_version,
            }
            lines.write(json.dumps(record) + "\n")
            if progress is not None:
                progress(EXPORTING, n + 1, len(episodes))
    info = {
        "format": EXPORT_FORMAT,
        "source": str(storage.directory),
        "episodes": len(episodes),
        "transitions": steps,
        "cameras": sorted(cameras),
        **dims,
    }
    (out / "info.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return info
