"""The learner node's services: `~/checkpoint` (user/srv/Checkpoint: save one now, its path) and `~/buffer_stats`
(user/srv/BufferStats: what the buffer holds), each answered from the `LearningSession`."""

from __future__ import annotations

from functools import partial
from typing import Any

from user.interfaces.codec import Codec
from user.learner.session import LearningSession
from user.runtime.node import Node


def serve(node: Node, session: LearningSession) -> None:
    """Both services of `node`, under its name."""
    node.create_service(f"/{node.name}/checkpoint", "user/srv/Checkpoint", partial(checkpoint, session, node.codec))
    node.create_service(
        f"/{node.name}/buffer_stats", "user/srv/BufferStats", partial(buffer_stats, session, node.codec)
    )


def checkpoint(session: LearningSession, codec: Codec, request: Any) -> Any:
    """Save a checkpoint now; the response names its path, or why it failed."""
    del request
    response = codec.msg_class("user/srv/Checkpoint_Response")
    try:
        path = session.save_checkpoint()
    except Exception as exc:
        return response(success=False, message=str(exc), path="", updates=0)
    return response(success=True, message="", path=str(path), updates=session.trainer.counters.gradient_steps)


def buffer_stats(session: LearningSession, codec: Codec, request: Any) -> Any:
    """What the buffer holds: transitions, episodes, demos, interventions, its size on disk, its success rate."""
    del request
    info = session.buffer_info()
    return codec.msg_class("user/srv/BufferStats_Response")(
        success=True,
        message=str(info.directory),
        transitions=info.transitions,
        episodes=info.episodes,
        demo_transitions=info.demo_transitions,
        intervened_transitions=info.intervened_transitions,
        bytes_on_disk=info.bytes_on_disk,
        success_rate=info.success_rate,
    )
