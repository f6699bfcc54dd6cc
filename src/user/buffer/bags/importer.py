"""`user buffer import-bag`: turn a bag recorded by plain `ros2 bag record` into whole episodes.

A small YAML mapping says which standard topics hold what. Every message on the action topic is one step:
the observation of that step is the latest message of each state and image topic at that moment (zero-order
hold), its reward the sum of reward messages until the next step. Example:

    robot_id: franka_left
    task: peg_insertion
    action: {topic: /cartesian_cmd, field: [linear.x, linear.y, linear.z]}
    state:
      - {topic: /joint_states, field: position}
      - {topic: /gripper/joint_states, field: position}
    images:
      - {topic: /wrist/color/image_raw/compressed, camera: wrist}
    reward: {topic: /reward, field: data}          # optional; 0 otherwise
    success: true                                   # the last step of each episode succeeded
    episode_gap_s: 2.0                              # a pause this long on the action topic starts a new episode
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from user.buffer.bags.bagread import BagMessage, BagReader
from user.buffer.errors import BagReadError, BufferError, MappingError
from user.config.strict import ConfigError, setting
from user.interfaces.codec import Codec, DecodeError, UnknownTypeError
from user.interfaces.domain import Action, EncodedImage, Observation, Transition
from user.interfaces.images import encode_jpeg

_log = logging.getLogger("user.buffer.importer")

# how far a long step is: (what, done, total or None); the CLI shows it (`user.cli.progress.Phases`)
ProgressCallback = Callable[[str, int, int | None], None]
READING = "reading bag messages"  # the step `BagImporter.episodes` reports

_SOURCES = {"policy": 0, "human": 1, "scripted": 2}


@dataclass(frozen=True)
class FieldSource:
    """Numbers taken from one topic."""

    topic: str = setting("", "topic name")
    field: str | list[str] = setting("data", "dotted field path(s), concatenated: position, [linear.x, angular.z]")
    indices: list[int] = setting([], "keep only these entries of the vector (empty: all)")


@dataclass(frozen=True)
class ImageSource:
    """Frames of one camera: sensor_msgs/CompressedImage (kept as is) or sensor_msgs/Image (rgb8/bgr8, to JPEG)."""

    topic: str = setting("", "image topic")
    camera: str = setting("", "camera name in the observation")


@dataclass(frozen=True)
class ImportMapping:
    """How the topics of a bag become transitions."""

    action: FieldSource = setting(FieldSource(), "one step per message on this topic")
    robot_id: str = setting("imported", "robot id of the transitions")
    task: str = setting("", "task name")
    state: list[FieldSource] = setting([], "topics concatenated into the observation state")
    images: list[ImageSource] = setting([], "cameras")
    reward: FieldSource | None = setting(None, "reward topic (summed per step); none: 0")
    success: bool = setting(True, "the last step of each episode reached the goal (terminated + success)")
    episode_gap_s: float = setting(
        0.0, "a pause this long on the action topic ends an episode (0: one per bag)", min=0.0
    )
    policy_version: int = setting(0, "policy version recorded in the transitions", min=0)
    source: Literal["human", "scripted", "policy"] = setting("human", "who produced the actions")
    jpeg_quality: int = setting(90, "JPEG quality for raw sensor_msgs/Image frames", min=1, max=100)

    def __post_init__(self) -> None:
        if not self.action.topic:
            raise ConfigError("action.topic is required")

    def topics(self) -> set[str]:
        found = {self.action.topic, *(s.topic for s in self.state), *(i.topic for i in self.images)}
        return found | ({self.reward.topic} if self.reward else set())


def _attribute(msg: Any, path: str, topic: str) -> Any:
    value = msg
    for part in path.split("."):
        if not hasattr(value, part):
            fields = [f for f in getattr(value, "__dataclass_fields__", {}) if not f.startswith("_")]
            raise MappingError(f"{topic}: no field {path!r} ({part!r} is not one of {', '.join(fields)})")
        value = getattr(value, part)
    return value


def vector(msg: Any, source: FieldSource) -> np.ndarray:
    """The float32 vector `source` names in `msg`."""
    paths = [source.field] if isinstance(source.field, str) else source.field
    parts = []
    for path in paths:
        value = _attribute(msg, path, source.topic)
        if hasattr(value, "__msgtype__"):
            raise MappingError(f"{source.topic}: {path!r} is a {value.__msgtype__} message, name one of its fields")
        try:
            parts.append(np.asarray(value, dtype=np.float32).ravel())
        except (TypeError, ValueError) as exc:
            raise MappingError(f"{source.topic}: {path!r} is not numeric ({exc})") from exc
    out = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
    if source.indices:
        if max(source.indices) >= len(out):
            raise MappingError(f"{source.topic}: index {max(source.indices)} out of range for {len(out)} entries")
        out = out[source.indices]
    bad = np.flatnonzero(~np.isfinite(out))
    if bad.size:
        raise BagReadError(f"{source.field!r} is not finite: {out[bad[0]]} at entry {int(bad[0])}")
    return out


def image(msg: Any, source: ImageSource, stamp_ns: int, quality: int) -> EncodedImage:
    if hasattr(msg, "format"):  # sensor_msgs/CompressedImage
        fmt = "png" if "png" in str(msg.format).lower() else "jpeg"
        return EncodedImage(source.camera, fmt, np.asarray(msg.data, dtype=np.uint8).tobytes(), stamp_ns)
    encoding = str(getattr(msg, "encoding", ""))
    if encoding not in ("rgb8", "bgr8"):
        raise MappingError(f"{source.topic}: image encoding {encoding!r} (only rgb8, bgr8 or compressed)")
    pixels = np.asarray(msg.data, dtype=np.uint8).reshape(int(msg.height), int(msg.step))[:, : int(msg.width) * 3]
    pixels = pixels.reshape(int(msg.height), int(msg.width), 3)
    rgb = pixels if encoding == "rgb8" else pixels[:, :, ::-1]
    return EncodedImage(source.camera, "jpeg", encode_jpeg(np.ascontiguousarray(rgb), quality), stamp_ns)


@dataclass
class _Episode:
    observations: list[Observation] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    stamps: list[int] = field(default_factory=list)


def _where(bag: Path, topic: str, index: int, log_time_ns: int) -> str:
    seconds, nanos = divmod(log_time_ns, 1_000_000_000)
    return f"{bag}: {topic} message {index} (log time {seconds}.{nanos:09d})"


class BagImporter:
    """Yields the episodes of a bag as lists of transitions. Every message used is checked as it is read (it
    decodes, its numbers are finite, its vector keeps its size); the first that fails ends the import with an
    error naming the bag, the topic, the message's index on that topic (from 0) and its log time."""

    def __init__(self, mapping: ImportMapping, codec: Codec, *, as_demos: bool, first_episode_id: int = 0) -> None:
        self.mapping = mapping
        self.codec = codec
        self.as_demos = as_demos
        self.next_episode_id = first_episode_id
        self.skipped_steps = 0  # action messages before every state/image topic had spoken
        self._states: dict[int, np.ndarray] = {}  # state source -> its latest vector
        self._images: dict[int, EncodedImage] = {}  # image source -> its latest frame
        self._sizes: dict[str, int] = {}  # what -> vector size, fixed by its first message
        self._current = _Episode()

    def episodes(self, reader: BagReader, progress: ProgressCallback | None = None) -> Iterator[list[Transition]]:
        m = self.mapping
        available = reader.topics()
        missing = sorted(t for t in m.topics() if t not in available)
        if missing:
            raise MappingError(
                f"{reader.path}: no topic {', '.join(missing)} (the bag has {', '.join(sorted(available))})"
            )
        self._states, self._images, self._sizes, self._current = {}, {}, {}, _Episode()
        counts: dict[str, int] = {}
        for raw in reader.messages(m.topics()):
            index = counts[raw.topic] = counts.get(raw.topic, -1) + 1
            if progress is not None:
                progress(READING, sum(counts.values()) + len(counts), None)
            try:
                finished = self._take(raw, reader.decode(raw, self.codec))
            except (BufferError, DecodeError, UnknownTypeError, ValueError) as exc:
                kind = MappingError if isinstance(exc, MappingError) else BagReadError
                raise kind(f"{_where(reader.path, raw.topic, index, raw.log_time_ns)}: {exc}") from exc
            if finished is not None:
                yield finished
        if self._current.stamps:
            yield self._finish(self._current, self._observation(self._current, self._current.stamps[-1]))
            self._current = _Episode()

    def _take(self, raw: BagMessage, msg: Any) -> list[Transition] | None:
        """Use one message; returns the episode it ended (a pause on the action topic), if any."""
        m, finished = self.mapping, None
        if raw.topic == m.action.topic:
            finished = self._step(self._sized("action", vector(msg, m.action)), raw.log_time_ns)
        if m.reward is not None and raw.topic == m.reward.topic:
            reward = float(vector(msg, m.reward).sum())
            if self._current.rewards:
                self._current.rewards[-1] += reward
        for k, source in enumerate(m.state):
            if raw.topic == source.topic:
                self._states[k] = self._sized(f"state {source.topic} {source.field}", vector(msg, source))
        for k, camera in enumerate(m.images):
            if raw.topic == camera.topic:
                self._images[k] = image(msg, camera, raw.log_time_ns, m.jpeg_quality)
        return finished

    def _sized(self, what: str, value: np.ndarray) -> np.ndarray:
        size = self._sizes.setdefault(what, len(value))
        if len(value) != size:
            raise BagReadError(f"the {what} has {len(value)} values where earlier messages had {size}")
        return value

    def _step(self, action: np.ndarray, stamp_ns: int) -> list[Transition] | None:
        m, current, finished = self.mapping, self._current, None
        if m.episode_gap_s > 0 and current.stamps and stamp_ns - current.stamps[-1] > m.episode_gap_s * 1e9:
            finished = self._finish(current, self._observation(current, current.stamps[-1]))
            current = self._current = _Episode()
        if len(self._states) == len(m.state) and len(self._images) == len(m.images):
            current.observations.append(self._observation(current, stamp_ns))
            current.actions.append(action)
            current.rewards.append(0.0)
            current.stamps.append(stamp_ns)
        else:
            self.skipped_steps += 1
        return finished

    def _observation(self, ep: _Episode, stamp_ns: int) -> Observation:
        m = self.mapping
        state = [self._states[k] for k in range(len(m.state))]
        images = tuple(self._images[k] for k in range(len(m.images)))
        return Observation(
            robot_id=m.robot_id,
            task=m.task,
            episode_id=self.next_episode_id,
            step=len(ep.observations),
            state=np.concatenate(state) if state else np.zeros(0, dtype=np.float32),
            stamp_ns=stamp_ns,
            images=images,
            policy_version=m.policy_version,
        )

    def _finish(self, ep: _Episode, final: Observation) -> list[Transition]:
        m = self.mapping
        n = len(ep.observations)
        out = []
        for t in range(n):
            last = t == n - 1
            out.append(
                Transition(
                    observation=ep.observations[t],
                    action=Action(
                        robot_id=m.robot_id,
                        episode_id=self.next_episode_id,
                        step=t,
                        data=ep.actions[t],
                        stamp_ns=ep.stamps[t],
                        intervened=False,
                        source=_SOURCES[m.source],
                        policy_version=m.policy_version,
                    ),
                    reward=ep.rewards[t],
                    next_observation=final if last else ep.observations[t + 1],
                    terminated=last and m.success,
                    truncated=last and not m.success,
                    success=last and m.success,
                    is_demo=self.as_demos,
                    stamp_ns=ep.stamps[t],
                )
            )
        self.next_episode_id += 1
        return out
