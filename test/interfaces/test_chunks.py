"""user/msg/ActionChunk through the CDR codec: a chunk comes back as it was sent (H x A actions, row-major), and a
message whose data is not a whole number of actions is refused naming the robot and the sizes."""

from __future__ import annotations

import numpy as np
import pytest

from user.interfaces.chunks import ActionChunk, ChunkMessageError, chunk_from_msg, chunk_to_msg
from user.interfaces.codec import default_codec


def test_a_chunk_survives_the_codec() -> None:
    codec = default_codec()
    actions = (np.arange(12).reshape(4, 3) / 12).astype(np.float32)
    sent = ActionChunk("arm", 7, 30, 5, actions, 9, 1_234_567_890)
    got = chunk_from_msg(codec.decode(codec.encode(chunk_to_msg(sent, codec)), "user/msg/ActionChunk"))
    assert (got.robot_id, got.episode_id, got.start_step, got.seq, got.policy_version, got.stamp_ns) == (
        "arm", 7, 30, 5, 9, 1_234_567_890,
    )  # fmt: skip
    np.testing.assert_array_equal(got.actions, actions)


@pytest.mark.parametrize(("values", "dim"), [(7, 3), (0, 3), (6, 0)])
def test_data_that_is_not_whole_actions_is_refused(values: int, dim: int) -> None:
    codec = default_codec()
    msg = chunk_to_msg(ActionChunk("arm", 0, 0, 1, np.zeros((2, 3), np.float32), 0, 0), codec)
    msg.data, msg.action_dim = np.zeros(values, np.float32), dim
    with pytest.raises(ChunkMessageError, match=f"for arm: {values} values are not a whole number of actions of {dim}"):
        chunk_from_msg(msg)
