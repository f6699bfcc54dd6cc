"""Camera frames on a topic per camera: a segment plays back in rviz like the robot that recorded it.

A step's record on `/transitions` keeps, for each of its images, a placeholder (its camera and stamp, format
`ON_CAMERA_TOPIC`, no bytes); the frames themselves follow the record as sensor_msgs/CompressedImage messages
on `/<robot>/<camera>/image/compressed` (the robot's own image topic), in the same chunk (`segments`): first
every observation image, then each next-observation image that is not stored in the next step's record
(`next_frames`: only the last step of an episode, or a break in the chain, keeps its own). So each frame a
camera took is one message on its topic, and `ros2 bag play` of a segment republishes the camera streams.

Reading a record takes the frames after it back into its placeholders (`attach`), after checking that there
are as many as it waits for and that each one's camera and stamp are the placeholder's (`frames_problem`), so
a transition comes out bit for bit as it went in (`read_frames`, for every reader). An incoming image in
either placeholder format is refused (`image_problem`).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from user.buffer.disk.next_frames import IN_NEXT_STEP
from user.buffer.disk.segments import CAMERA_TOPIC_SUFFIX, FRAME_TYPE, Position, SegmentReader
from user.buffer.errors import CorruptRecordError
from user.interfaces.codec import Codec, DecodeError
from user.interfaces.domain import EncodedImage, Observation, Transition
from user.interfaces.stamps import from_time, header

ON_CAMERA_TOPIC = "user/on-camera-topic"  # the format of a placeholder whose frame follows the record
_CDR_LE = b"\x00\x01\x00\x00"  # the encapsulation header of little-endian plain CDR
_U32 = struct.Struct("<I")
_STAMP = struct.Struct("<iI")  # builtin_interfaces/Time: int32 sec, uint32 nanosec
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9]+")


def _token(name: str) -> str:
    """`name` as one token of a ROS topic name (letters, digits, single underscores; not starting with a digit)."""
    token = _NOT_IN_NAME.sub("_", name).strip("_") or "unnamed"
    return f"_{token}" if token[0].isdigit() else token


def camera_topic(robot_id: str, camera: str) -> str:
    """The topic that camera `camera` of robot `robot_id` publishes on (and its frames are stored on)."""
    return f"/{_token(robot_id)}/{_token(camera)}{CAMERA_TOPIC_SUFFIX}"


def has_frames(t: Transition) -> bool:
    """Whether `t` carries camera frames (its record is then encoded by the buffer)."""
    return bool(t.observation.images or t.next_observation.images)


def record(t: Transition, *, keep_next: bool) -> Transition:
    """`t` as its record stores it: each image a placeholder, for a frame on a camera topic, or (the next images
    of a step that does not `keep_next`: `next_frames`) in the next step. `t` comes as a robot sent it (no
    placeholders: `image_problem`)."""
    if not t.observation.images and not t.next_observation.images:
        return t
    held = tuple(EncodedImage(img.camera, ON_CAMERA_TOPIC, b"", img.stamp_ns) for img in t.observation.images)
    where = ON_CAMERA_TOPIC if keep_next else IN_NEXT_STEP
    after = tuple(EncodedImage(img.camera, where, b"", img.stamp_ns) for img in t.next_observation.images)
    return replace(
        t, observation=replace(t.observation, images=held), next_observation=replace(t.next_observation, images=after)
    )


def camera_frames(t: Transition, *, keep_next: bool) -> list[EncodedImage]:
    """The frames written after `record(t, keep_next=...)`, in order: the observation's, then the next ones kept."""
    return [*t.observation.images, *(t.next_observation.images if keep_next else ())]


def _waiting(t: Transition) -> list[EncodedImage]:
    """The placeholders of `t` whose frames follow its record, in the order they are written."""
    return [img for obs in (t.observation, t.next_observation) for img in obs.images if img.format == ON_CAMERA_TOPIC]


def frame_count(t: Transition) -> int:
    """How many camera frames follow the record `t` was read from."""
    return len(_waiting(t))


def frames_problem(t: Transition, frames: Sequence[EncodedImage]) -> str | None:
    """Why `frames` (read after `t`'s record) are not the ones `t` waits for, or None."""
    waiting = _waiting(t)
    if len(frames) != len(waiting):
        return f"it waits for {len(waiting)} camera frames, {len(frames)} follow it"
    for k, want in enumerate(waiting):
        got = frames[k]
        if (got.camera, got.stamp_ns) != (want.camera, want.stamp_ns):
            return (
                f"camera frame {k + 1} after it is camera {got.camera!r} at {got.stamp_ns}, "
                f"it waits for camera {want.camera!r} at {want.stamp_ns}"
            )
        if got.format in (IN_NEXT_STEP, ON_CAMERA_TOPIC):
            return f"camera frame {k + 1} after it is itself a placeholder ({got.format!r})"
    return None


def attach(t: Transition, frames: Sequence[EncodedImage]) -> Transition:
    """`t` with its placeholders replaced by `frames` (check `frames_problem` first)."""
    if not frames:
        return t
    queue = iter(frames)

    def filled(obs: Observation) -> Observation:
        images = tuple(next(queue) if img.format == ON_CAMERA_TOPIC else img for img in obs.images)
        return replace(obs, images=images)

    return replace(t, observation=filled(t.observation), next_observation=filled(t.next_observation))


def read_frames(
    reader: SegmentReader, position: Position, t: Transition, codec: Codec, what: str
) -> tuple[list[EncodedImage], list[bytes]]:
    """The camera frames after the record of `t` at `position`, and their stored bytes, checked against its
    placeholders; `CorruptRecordError` (saying `what`, e.g. "transition 7") or `TruncatedSegmentError` if they
    are not its own."""
    payloads = reader.read_following(position, frame_count(t))
    frames = []
    for payload in payloads:
        try:
            frames.append(frame_from_payload(payload, codec))
        except DecodeError as exc:
            where = f"{what}: a camera frame after it does not decode: {exc}"
            raise CorruptRecordError(str(reader.path), position.offset, where) from exc
    problem = frames_problem(t, frames)
    if problem is not None:
        raise CorruptRecordError(str(reader.path), position.offset, f"{what}: {problem}")
    return frames, payloads


def frame_msg(img: EncodedImage, codec: Codec) -> Any:
    """The sensor_msgs/CompressedImage of frame `img` (header.frame_id: its camera)."""
    return codec.msg_class(FRAME_TYPE)(
        header=header(img.stamp_ns, img.camera, codec),
        format=img.format,
        data=np.frombuffer(img.data, dtype=np.uint8),
    )


def frame_payload(img: EncodedImage, codec: Codec) -> bytes:
    """The CDR bytes frame `img` is stored as on its camera topic."""
    return codec.encode(frame_msg(img, codec))


def frame_from_payload(payload: bytes, codec: Codec) -> EncodedImage:
    """The frame stored as `payload`; `DecodeError` if it is not a CompressedImage. Little-endian CDR (what
    every writer here produces) is read by `_read_frame`, a direct reader of this one fixed layout (3.7 us a
    frame, against 8.5 us through the codec; a cache miss reads four); anything else goes through the codec."""
    if payload[:4] == _CDR_LE:
        return _read_frame(payload)
    msg = codec.decode(payload, FRAME_TYPE)
    return EncodedImage(
        camera=str(msg.header.frame_id),
        format=str(msg.format),
        data=bytes(msg.data),  # a uint8 array
        stamp_ns=from_time(msg.header.stamp),
    )


def image_problem(t: Transition) -> str | None:
    """Why `t`'s images cannot be stored (one uses a placeholder format the buffer reserves), or None."""
    for which, obs in (("observation", t.observation), ("next observation", t.next_observation)):
        for img in obs.images:
            if img.format in (IN_NEXT_STEP, ON_CAMERA_TOPIC):
                return f"{which} image of camera {img.camera!r} has format {img.format!r}, reserved by the buffer"
    return None


def _read_frame(payload: bytes) -> EncodedImage:
    """A sensor_msgs/CompressedImage in little-endian plain CDR: header (stamp, frame_id), format, data; each
    string a uint32 length counting its NUL, then the bytes; uint32-aligned from the byte after the 4-byte
    encapsulation header. `DecodeError` for bytes that do not follow it."""
    body = memoryview(payload)[4:]
    try:
        sec, nanosec = _STAMP.unpack_from(body, 0)
        camera, at = _string(body, 8)
        fmt, at = _string(body, (at + 3) & ~3)
        at = (at + 3) & ~3
        (size,) = _U32.unpack_from(body, at)
        if at + 4 + size > len(body):
            raise ValueError(f"{size} bytes of data announced, {len(body) - at - 4} follow")
        data = bytes(body[at + 4 : at + 4 + size])
    except (struct.error, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise DecodeError(FRAME_TYPE, str(exc)) from exc
    return EncodedImage(camera=camera, format=fmt, data=data, stamp_ns=sec * 1_000_000_000 + nanosec)


def _string(body: memoryview, at: int) -> tuple[str, int]:
    """The CDR string at `at` and where it ends."""
    (size,) = _U32.unpack_from(body, at)
    end = at + 4 + size
    if size < 1 or end > len(body) or body[end - 1] != 0:
        raise ValueError(f"a string of {size} bytes at {at} does not fit or does not end with NUL")
    return str(body[at + 4 : end - 1], "utf-8"), end
