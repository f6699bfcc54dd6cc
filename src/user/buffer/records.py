"""What one stored episode becomes: the messages a segment holds for it and the index rows that find them.

In the segment, an EpisodeEvent START, the transitions (each followed by its camera frames on their topics:
`camera_topics`), an EpisodeEvent END (log times: the steps' wall times); in the index, one row per transition
at its position and one episode row with its aggregates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from user.buffer.disk.camera_topics import camera_frames, camera_topic, frame_payload
from user.buffer.disk.next_frames import keeps_next, stored_payloads
from user.buffer.disk.segments import EVENT_TOPIC, TRANSITION_TOPIC, OutMessage, Position
from user.buffer.rows import EpisodeRow, TransitionRow
from user.interfaces.codec import Codec
from user.interfaces.domain import EncodedImage, Transition
from user.interfaces.episode_events import EpisodeEvent, EpisodeKind, episode_event_to_msg


def episode_messages(
    codec: Codec,
    ts: Sequence[Transition],
    payloads: Sequence[bytes],
    wall_ns: Sequence[int],
    frames: Sequence[Sequence[EncodedImage]],
) -> list[OutMessage]:
    """START event, the transitions' CDR `payloads` each followed by its `frames` (`camera_topics`), END event, to
    be written in this order."""
    out = [_event(codec, ts, EpisodeKind.START, wall_ns[0])]
    for t, payload, wall, step_frames in zip(ts, payloads, wall_ns, frames, strict=True):
        out.append(OutMessage(TRANSITION_TOPIC, payload, wall))
        for img in step_frames:
            out.append(OutMessage(camera_topic(t.robot_id, img.camera), frame_payload(img, codec), wall, joined=True))
    out.append(_event(codec, ts, EpisodeKind.END, wall_ns[-1]))
    return out


def stored_messages(
    codec: Codec,
    ts: Sequence[Transition],
    payloads: Sequence[bytes],
    wall_ns: Sequence[int],
    encode: Callable[[Transition], bytes],
) -> list[OutMessage]:
    """The messages that store episode `ts`, given `payloads` of its steps' records without their next frames:
    a step that keeps its next frames (`next_frames.keeps_next`) is encoded whole with `encode`, and each step is
    followed by the frames it does not leave to the next step (`camera_topics`)."""
    frames = [camera_frames(t, keep_next=keep) for t, keep in zip(ts, keeps_next(ts), strict=True)]
    return episode_messages(codec, ts, stored_payloads(ts, payloads, encode), wall_ns, frames)


def _event(codec: Codec, ts: Sequence[Transition], kind: EpisodeKind, wall_ns: int) -> OutMessage:
    first, end = ts[0], kind == EpisodeKind.END
    event = EpisodeEvent(
        robot_id=first.robot_id,
        task=first.task,
        episode_id=first.episode_id,
        kind=kind,
        stamp_ns=wall_ns,
        success=end and any(t.success for t in ts),
        steps=len(ts) if end else 0,
        episode_return=float(sum(t.reward for t in ts)) if end else 0.0,
        interventions=sum(1 for t in ts if t.action.intervened) if end else 0,
        policy_version=ts[-1].action.policy_version if end else first.action.policy_version,
    )
    return OutMessage(EVENT_TOPIC, codec.encode(episode_event_to_msg(event, codec)), wall_ns)


def transition_row(
    t: Transition, *, index: int, segment_id: int, offset: int, length: int, episode: int, wall_ns: int
) -> TransitionRow:
    """The index row of transition `t`, stored at `offset` (`length` bytes) of segment `segment_id`."""
    return TransitionRow(
        index=index,
        segment_id=segment_id,
        offset=offset,
        length=length,
        episode=episode,
        robot_id=t.robot_id,
        task=t.task,
        episode_id=t.episode_id,
        step=t.step,
        policy_version=t.action.policy_version,
        wall_ns=wall_ns,
        sim_ns=t.stamp_ns,
        reward=float(t.reward),
        terminated=t.terminated,
        truncated=t.truncated,
        intervened=t.action.intervened,
        is_demo=t.is_demo,
        success=t.success,
    )


def index_rows(
    ts: Sequence[Transition],
    wall_ns: Sequence[int],
    positions: Sequence[Position],
    *,
    segment_id: int,
    first: int,
    number: int,
) -> tuple[EpisodeRow, list[TransitionRow]]:
    """The index rows of episode `number` (transitions numbered from `first`) written at `positions` of segment
    `segment_id` (START event, transitions, END event)."""
    rows = [
        transition_row(
            t,
            index=first + k,
            segment_id=segment_id,
            offset=pos.offset,
            length=pos.length,
            episode=number,
            wall_ns=wall_ns[k],
        )
        for k, (t, pos) in enumerate(zip(ts, positions[1:-1], strict=True))
    ]
    episode = EpisodeRow(
        episode=number,
        segment_id=segment_id,
        robot_id=ts[0].robot_id,
        task=ts[0].task,
        episode_id=ts[0].episode_id,
        steps=len(ts),
        first_index=first,
        success=any(t.success for t in ts),
        episode_return=float(sum(t.reward for t in ts)),
        interventions=sum(1 for t in ts if t.action.intervened),
        is_demo=all(t.is_demo for t in ts),
        policy_version=max(t.action.policy_version for t in ts),
        start_wall_ns=wall_ns[0],
        end_wall_ns=wall_ns[-1],
        start_event=positions[0],
        end_event=positions[-1],
    )
    return episode, rows
